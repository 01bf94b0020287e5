package control

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
)

// ReloadChanges are the homes and apps a reload changed, by id and slug
// (admin.Reload carries them to the operator).
type ReloadChanges struct {
	// HomesAdded, HomesChanged and HomesRemoved are home ids; a changed
	// home was registered again, an unchanged one left as it was.
	HomesAdded, HomesChanged, HomesRemoved []string
	// HomesKept are homes the file no longer declares that could not be
	// removed yet, each with the reason ("alice: the home has sessions").
	HomesKept []string
	// AppsAdded, AppsChanged and AppsRemoved are app slugs.
	AppsAdded, AppsChanged, AppsRemoved []string
}

// ReloadSummary is what a reload did, as its answer (adminapi.ReloadView)
// and its log line tell it.
type ReloadSummary struct {
	// File is the config file read.
	File string
	// Applied are the settings outside homes and apps that changed and
	// now apply ("access", "wake.hold").
	Applied []string
	// NeedRestart are the settings that changed in the file but apply
	// only at the next start (config.KeepRestartOnly).
	NeedRestart []string
	ReloadChanges
}

// Sort sorts every list of s, as the answer and the log give them.
func (s *ReloadSummary) Sort() {
	for _, l := range [][]string{s.HomesAdded, s.HomesChanged, s.HomesRemoved, s.HomesKept,
		s.AppsAdded, s.AppsChanged, s.AppsRemoved, s.Applied, s.NeedRestart} {
		sort.Strings(l)
	}
}

// Log writes the one line of a reload that applied, and a warning for
// each thing it left for later: homes kept, settings that need a restart.
func (s *ReloadSummary) Log(log *slog.Logger) {
	attrs := []any{"file", s.File}
	for _, f := range []struct {
		k string
		v []string
	}{{"homes_added", s.HomesAdded}, {"homes_changed", s.HomesChanged}, {"homes_removed", s.HomesRemoved},
		{"apps_added", s.AppsAdded}, {"apps_changed", s.AppsChanged}, {"apps_removed", s.AppsRemoved},
		{"applied", s.Applied}} {
		if len(f.v) > 0 {
			attrs = append(attrs, f.k, strings.Join(f.v, ","))
		}
	}
	log.Info("config reloaded", attrs...)
	if len(s.HomesKept) > 0 {
		log.Warn("config reload: homes the file no longer declares are kept for now", "homes", strings.Join(s.HomesKept, "; "),
			"hint", "reload again once they are idle, or remove them with DELETE /admin/homes/{id}")
	}
	if len(s.NeedRestart) > 0 {
		log.Warn("config reload: settings that apply only at the next start were not applied", "fields", strings.Join(s.NeedRestart, ","),
			"hint", "restart the gateway to apply them; it runs with the values it started with until then")
	}
}

// Reload applies the homes and apps of next over those of cur (step 3 of
// the reload's order, gateway/reload.go), filling res: apps the file no
// longer declares leave first (one may run in a home that goes), homes
// added or changed register as at start, homes removed go unless they
// have sessions or an app runs in them (they are kept, and res says
// why), then apps added or changed are installed.
func (r *Registrar[H]) Reload(ctx context.Context, cur, next *config.Config, res *ReloadChanges) error {
	oldHomes := map[string]config.HomeConfig{}
	for _, hc := range cur.Homes {
		oldHomes[hc.ID] = hc
	}
	var register []config.HomeConfig
	newHomes := map[string]bool{}
	for _, hc := range next.Homes {
		newHomes[hc.ID] = true
		old, ok := oldHomes[hc.ID]
		switch {
		case !ok:
			res.HomesAdded = append(res.HomesAdded, hc.ID)
			register = append(register, hc)
		case !sameHomeRouting(old, hc):
			res.HomesChanged = append(res.HomesChanged, hc.ID)
			register = append(register, hc)
		}
	}
	oldApps := map[string]registry.App{}
	for _, ac := range cur.Apps {
		oldApps[ac.Slug] = ac
	}
	var install []registry.App
	newApps := map[string]bool{}
	for _, ac := range next.Apps {
		newApps[ac.Slug] = true
		old, ok := oldApps[ac.Slug]
		switch {
		case !ok:
			res.AppsAdded = append(res.AppsAdded, ac.Slug)
			install = append(install, ac)
		case !reflect.DeepEqual(old, ac):
			res.AppsChanged = append(res.AppsChanged, ac.Slug)
			install = append(install, ac)
		}
	}
	// Apps first leave (one may run in a home that goes), and the config's
	// slugs are the file's from now on.
	r.d.Apps.Lock()
	for slug := range oldApps {
		if !newApps[slug] {
			r.d.Apps.Uninstall(slug)
			res.AppsRemoved = append(res.AppsRemoved, slug)
		}
	}
	r.configApps = newApps
	r.d.Apps.Unlock()

	r.claimMu.Lock()
	r.configHomes = maps2Set(r.configHomes, newHomes) // removed homes stay the config's until they go
	r.claimMu.Unlock()
	if err := r.RegisterConfigHomes(ctx, register); err != nil {
		return err
	}
	for id := range oldHomes {
		if newHomes[id] {
			continue
		}
		if err := r.removeConfigHome(ctx, id); err != nil {
			res.HomesKept = append(res.HomesKept, id+": "+publicReason(err))
			continue
		}
		res.HomesRemoved = append(res.HomesRemoved, id)
	}
	r.claimMu.Lock()
	for _, k := range res.HomesKept {
		id, _, _ := strings.Cut(k, ":")
		newHomes[id] = true
	}
	r.configHomes = newHomes
	r.claimMu.Unlock()
	r.RegisterConfigApps(install)
	return nil
}

// removeConfigHome stops and removes home id, which the config no longer
// declares, through the registrar; it refuses while the home has sessions
// or an app runs in it.
func (r *Registrar[H]) removeConfigHome(ctx context.Context, id string) error {
	h, ok := r.d.Homes.WithID(id)
	if !ok {
		return nil
	}
	if n := r.d.Sessions.Count(id); n > 0 {
		return fault.New(fault.Busy, "home_busy", fmt.Sprintf("the home has %d sessions", n))
	}
	return r.RemoveHome(ctx, h, 0)
}

// publicReason is err's sentence for the reload's answer.
func publicReason(err error) string {
	if fe, ok := fault.As(err); ok {
		return fe.Message
	}
	return err.Error()
}

// maps2Set returns the union of the keys of a and b.
func maps2Set(a, b map[string]bool) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// sameHomeRouting reports whether a and b register the same home: every
// field but the display name and the waiting theme (which only the
// waiting page reads, through conf).
func sameHomeRouting(a, b config.HomeConfig) bool {
	a.DisplayName, b.DisplayName = "", ""
	a.WaitingTheme, b.WaitingTheme = "", ""
	return reflect.DeepEqual(a, b)
}
