package gateway

import (
	"context"
	"fmt"
	"reflect"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/control/adminapi"
	"github.com/wakegate/wakegate/fault"
)

// Reload reads the config file again and applies it in place (SIGHUP,
// `wakegate reload`, POST /admin/reload), in this order:
//
//  1. The file is loaded and checked like at start. A file that does not
//     pass changes nothing: the error names each problem by file, line and
//     field. Nor does a file that is empty, or that declares no home and no
//     app while the running config declares some, unless the caller
//     confirms it (config.RemovesEverything, DESIGN rule 30).
//  2. Settings that only a start applies (listeners, the store, TLS, the
//     engine's timeouts, ...) keep their running values; each that the
//     file changes is named in the answer and the log
//     (config.KeepRestartOnly).
//  3. Apps the file no longer declares go; homes it adds or changes are
//     registered through the registrar, as at start (a changed home is
//     registered again and proves itself on its next request); homes it no
//     longer declares are stopped and removed, unless they still have
//     sessions or an app of the admin API (then they stay, and the answer
//     says why); apps it adds or changes are installed as candidates
//     (control.Registrar.Reload).
//  4. The access policies are rebuilt when they changed, and the request
//     path's settings (wake.hold, wake.wake_timeout, the no-wake rules,
//     the waiting page) take the file's values.
//
// Homes and apps the file leaves as they were are not touched: their
// connections, sessions and warm verdicts carry on. One reload runs at a
// time. What a reload did is answered and logged as control.ReloadSummary
// tells it.

// conf is the config the gateway runs with now: the one it started with,
// or the one the last reload applied. Code that reads what a reload may
// change (homes, apps, wake timeouts, access) reads it through conf.
func (g *Gateway) conf() *config.Config {
	if c := g.live.Load(); c != nil {
		return c
	}
	return g.cfg
}

// SetReloadSource sets how a reload reads the config file: load reads and
// checks it (with the command line's overrides applied, so that they do
// not read as changes). Without it a reload is refused. Call it before
// Serve.
func (g *Gateway) SetReloadSource(load func() (*config.Config, error)) { g.reloadSrc = load }

// Reload reads the config file again and applies what changed (see the
// order above). It reports what it did.
func (g *Gateway) Reload(ctx context.Context, opts admin.ReloadOptions) (admin.Reload, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	if g.reloadSrc == nil {
		return admin.Reload{}, fault.New(fault.Unavailable, "reload_unavailable",
			"this gateway runs a config that is not read from a file").
			WithHint("start it with `wakegate serve --config FILE` to reload FILE")
	}
	next, err := g.reloadSrc()
	if err != nil {
		return admin.Reload{}, fault.Wrap(fault.Invalid, "invalid_config",
			"the config file has problems; nothing was changed", err).
			WithHint("fix each problem at the file and line given, then reload again (wakegate check-config --config FILE checks a file)")
	}
	cur := g.conf()
	if !opts.AllowRemoveAll {
		if err := config.RemovesEverything(cur, next); err != nil {
			return admin.Reload{}, err
		}
	}
	sum := control.ReloadSummary{File: next.File()}
	sum.NeedRestart = config.KeepRestartOnly(cur, next)
	var set *access.Set
	if !reflect.DeepEqual(cur.Access, next.Access) {
		if set, err = g.newAccessSet(next); err != nil {
			return admin.Reload{}, fault.Wrap(fault.Invalid, "invalid_config",
				"the access policies cannot be built; nothing was changed", err)
		}
		sum.Applied = append(sum.Applied, "access")
	}
	sum.Applied = append(sum.Applied, config.ReloadableChanges(cur, next)...)
	if err := g.reg.Reload(ctx, cur, next, &sum.ReloadChanges); err != nil {
		// The homes and apps applied so far serve; the rest of the file
		// is not applied.
		if set != nil {
			set.Close()
		}
		res := adminapi.ReloadView(&sum)
		g.log.Error("config reload stopped part way", "file", next.File(), "err", err, "done", fmt.Sprintf("%+v", res))
		return res, fmt.Errorf("reload %s: %w", next.File(), err)
	}
	if set != nil {
		g.gate.SwapSet(set).Close()
	}
	g.live.Store(next)
	g.path.SetSettings(routeSettings(next))
	// The idle checks follow the homes' idle timeouts (gateway.go).
	g.engine.SetIdleTick(idleTick(next))
	sum.Sort()
	sum.Log(g.log)
	return adminapi.ReloadView(&sum), nil
}

// newAccessSet builds the access policies of cfg, as newGate does.
func (g *Gateway) newAccessSet(cfg *config.Config) (*access.Set, error) {
	log := g.log.With("component", "access")
	return access.NewSet(cfg.Access, g.gate.IP().Of, func(err error) { log.Warn("access policy", "err", err) })
}
