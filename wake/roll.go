package wake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
)

// Rolls move idle homes onto the registered target version (DESIGN.md,
// behaviour 8 to 10).
//
// A roll runs inside a wake flight: the one coalesced flight of the home,
// holding the home's lifecycle lock, so a request that arrives meanwhile
// joins it and a suspend or a second roll waits for it. At wake entry a
// home whose stored version differs from the target's, when the target is
// not the known-bad version and the home has no users, is recreated on the
// target instead of woken: probed like a wake, its running version asserted,
// then endpoint, version and a healthy verdict are committed. The first
// failure records the target as bad (the brake), then the home is recreated
// on its prior version with the same probe and assert.
//
// Which sessions make a home busy (roller.busy):
//   - A home whose stored status says no process runs (sleeping, suspended,
//     failed) has no users: nothing can be connected to it, and every
//     session counted for it, here or on another instance, is a caller
//     waiting for it to wake, queued behind the lock this roll holds. (A
//     suspend refuses a home with sessions, after dropping its verdict, so
//     no request forwarded earlier can still be using it.)
//   - Any other home is busy when this instance counts a session for it
//     that is not a caller inside EnsureAwake's slow path (those wait for
//     this very flight and are served by its result), or when another
//     instance reports sessions for it: FleetSessions minus this instance's
//     own unexpired report. A request counted by the gateway but not yet
//     inside EnsureAwake counts as a user, so the error is always towards
//     not rolling.

// roller rolls homes onto the registered target: it keeps the target's
// commands, the brake on a bad target, the roll counters and this
// instance's session report (rollfleet.go). The steps of one roll run
// inside a wake (rollrun.go).
type roller struct {
	e        *Engine
	stats    rolls.Stats
	releases rolls.Releases
	reports  rolls.Reports
}

// errRollUnsupported means the home's provider cannot recreate homes.
var errRollUnsupported = errors.New("the provider cannot recreate homes")

// RollStats returns the engine's roll counters.
func (e *Engine) RollStats() *rolls.Stats { return &e.roll.stats }

// Target returns the stored roll target; registry.ErrNotFound (wrapped)
// when none is registered.
func (e *Engine) Target(ctx context.Context) (registry.Target, error) {
	t, err := e.o.Store.GetTarget(ctx)
	if err != nil {
		return registry.Target{}, fmt.Errorf("roll target: %w", err)
	}
	e.roll.releases.Remember(t)
	return t, nil
}

// SetTarget registers t (Version required; Command, the exec provider's
// command template for that version, nil for the provider's default; Image
// for image-based providers) as the version homes roll onto, and returns
// the stored target. A target equal to the stored one (version, command
// and image) is not written, so it keeps its brake: a gateway restarted on
// the same config does not retry a bad release. Any other target is a new
// release: it is written with a compare-and-set and lifts the brake
// (BadVersion is cleared). t.BadVersion is ignored; the engine records it.
func (e *Engine) SetTarget(ctx context.Context, t registry.Target) (registry.Target, error) {
	if t.Version == "" {
		return registry.Target{}, fault.New(fault.Invalid, "invalid_target", "A target needs a version.").WithField("version")
	}
	if len(t.Command) > 0 && t.Command[0] == "" {
		return registry.Target{}, fault.New(fault.Invalid, "invalid_target", "A target's command must name a program.").WithField("command")
	}
	for attempt := 1; ; attempt++ {
		cur, err := e.o.Store.GetTarget(ctx)
		var cond registry.Cond
		switch {
		case errors.Is(err, registry.ErrNotFound):
		case err != nil:
			return registry.Target{}, fmt.Errorf("set roll target: %w", err)
		case cur.Version == t.Version && cur.Image == t.Image && slices.Equal(cur.Command, t.Command):
			e.roll.releases.Remember(cur)
			return cur, nil
		default:
			cond = registry.Cond{Generation: cur.Generation, Owner: cur.Owner}
		}
		next := registry.Target{Version: t.Version, Image: t.Image, Command: slices.Clone(t.Command),
			UpdatedAt: time.Now(), Owner: e.o.Instance}
		stored, err := e.o.Store.PutTarget(ctx, next, cond)
		if errors.Is(err, registry.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return registry.Target{}, fmt.Errorf("set roll target: %w", err)
		}
		e.roll.releases.Lift()
		e.roll.releases.Remember(stored)
		e.o.Log.Info("roll target", "version", stored.Version, "prior_target", cur.Version,
			"image", stored.Image, "custom_command", len(stored.Command) > 0)
		return stored, nil
	}
}

// eager starts a roll of every awake home that is stale and has had no
// session for IdleAfter (rolls.Eager only). The home's verdict is dropped
// first, so a request from then on joins the roll's flight; the flight
// checks for users again once it holds the lock.
func (r *roller) eager(ctx context.Context) {
	e := r.e
	if e.o.Roll.Mode != rolls.Eager {
		return
	}
	t, err := e.o.Store.GetTarget(ctx)
	if err != nil {
		if !errors.Is(err, registry.ErrNotFound) && ctx.Err() == nil {
			e.o.Log.Warn("roll: read target", "err", err.Error())
		}
		return
	}
	if r.releases.Bad(t) {
		return
	}
	for _, h := range e.homes.awakeHomes() {
		id := h.spec.ID
		// A home due for its idle suspend is suspended, not rolled: Run
		// queued its suspend this tick (it rolls at its next wake).
		if ctx.Err() != nil || h.noRoll.Load() || !e.idleFor(h, e.o.Roll.IdleAfter) || e.idle(h) {
			continue
		}
		rec, err := e.o.Store.GetHome(ctx, id)
		if err != nil || !rolls.Stale(rec.Version, t) {
			continue
		}
		if e.own.Local(rec.Provider) && rec.Runner != "" && rec.Runner != e.o.Instance {
			continue // its runner's own loop rolls it (owner.go)
		}
		if n, err := r.reports.Others(ctx, id); err != nil || n > 0 {
			continue // in use elsewhere: no pointless wake every tick
		}
		h.warm.Store(nil)
		if _, _, err := e.join(h, "roll", false); err != nil {
			e.o.Log.Info("roll: eager roll not started", "home", id, "err", err.Error())
		}
	}
}

// rollText is err as readable text for alerts: never empty.
func rollText(err error) string {
	if err == nil || err.Error() == "" {
		return "unknown error"
	}
	return err.Error()
}

// Roll rolls home id onto the target now, on an operator's request, and
// waits for it on ctx. The home's verdict is dropped so the request goes
// through the one wake path, where the usual rules decide: a home with
// sessions (busy), a home already on the target or with no recorded
// version, a missing or bad target are refused with an error that says
// which.
func (e *Engine) Roll(ctx context.Context, id string) (registry.Home, error) {
	h := e.home(id)
	if h == nil {
		return registry.Home{}, homefault.HomeNotFound(id)
	}
	if !e.o.Roll.On() {
		return registry.Home{}, homefault.Refused("roll_off", "Rolls are off.")
	}
	t, err := e.o.Store.GetTarget(ctx)
	if errors.Is(err, registry.ErrNotFound) {
		return registry.Home{}, homefault.Refused("no_target", "No target version is registered.")
	}
	if err != nil {
		return registry.Home{}, fmt.Errorf("roll %s: %w", id, err)
	}
	if e.roll.releases.Bad(t) {
		return registry.Home{}, homefault.Refused("target_bad", "The target version failed a roll; register a newer one.")
	}
	rec, err := e.o.Store.GetHome(ctx, id)
	if err != nil {
		return registry.Home{}, fmt.Errorf("roll %s: %w", id, err)
	}
	if !rolls.Stale(rec.Version, t) {
		return registry.Home{}, homefault.Refused("roll_not_needed", "The home already runs the target version, or has no recorded version.")
	}
	if n := e.o.Sessions.Count(id); n > 0 {
		return registry.Home{}, homefault.Busy(fmt.Errorf("roll %s: the home has %d session(s); it rolls once they end", id, n))
	}
	h.warm.Store(nil)
	if _, err := e.WakeNow(ctx, id, "roll"); err != nil {
		return registry.Home{}, err
	}
	if rec, err = e.o.Store.GetHome(ctx, id); err != nil {
		return registry.Home{}, fmt.Errorf("roll %s: %w", id, err)
	}
	if rec.Version != t.Version {
		return registry.Home{}, homefault.Busy(fmt.Errorf("roll %s: the home was woken but not rolled: it is in use", id))
	}
	return rec, nil
}
