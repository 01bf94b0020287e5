package ownership

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// The runner's lease on a machine-local home (DESIGN rule 32). The right
// to start, restart, adopt or stop a home's process is the home's record
// naming this gateway as its runner (registry.Home.Runner), fenced by the
// record's generation and owner, and held only while this gateway's
// heartbeat (its session report, renewed every idle tick with a TTL of
// three ticks and a second) is live: that is when the fleet counts it
// alive (Peers.Alive), and no other gateway takes the home over.
//
//   - A gateway whose heartbeat could not be renewed within its TTL (its
//     process was paused, its link to the store cut) has demoted itself:
//     an exit of a home's process it then sees is reported (log, metric)
//     and never answered with a restart; its provider stops watching the
//     home, and acts on it again only through a later wake, which goes
//     through the fleet's lock and the record like any other.
//   - With a live heartbeat, a restart is claimed first in the store: the
//     record is read, must name this gateway as runner and the home as
//     wanted, and is written back with a compare-and-set on the generation
//     and owner read. A takeover, a suspend's stopped intent or any other
//     write in between makes the claim fail, and nothing is started.
//   - A process this gateway started although the home had passed to
//     another gateway (a restart that raced a takeover) is stopped by it
//     as soon as it learns so (wake's ProviderChanged), and counted.

// leaseMargin is the part of the heartbeat's TTL by which this gateway
// counts its own lease lapsed before the fleet does: its clock starts
// when the report was sent, the store's when it arrived.
const leaseMargin = 8 // the TTL's eighth

// Lease is when this gateway's heartbeat, and with it its lease on the
// homes it runs, lapses. Its zero value holds no lease.
type Lease struct {
	mu    sync.Mutex
	until time.Time // monotonic; zero before the first renewal

	// FencedExits counts exits of a home's process that this gateway saw
	// and did not answer with a restart because it no longer held the
	// home; FencedStops the processes it had started and stopped once it
	// learnt that the home was another gateway's.
	FencedExits atomic.Uint64
	FencedStops atomic.Uint64
}

// Renewed records a heartbeat sent at sent and accepted with ttl.
func (l *Lease) Renewed(sent time.Time, ttl time.Duration) {
	until := sent.Add(ttl - ttl/leaseMargin)
	l.mu.Lock()
	if until.After(l.until) {
		l.until = until
	}
	l.mu.Unlock()
}

// Held reports whether the last heartbeat is still live.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.until.IsZero() && time.Now().Before(l.until)
}

// MayRestart reports whether this gateway may restart the process of home
// id, of provider prov, which exited by itself: always outside a fleet, or
// for a home that is not machine-local; in a fleet only while it holds the
// home (see the top of this file), after claiming the restart in the store
// within ctx.
func (o *Owner) MayRestart(ctx context.Context, id, prov string) bool {
	if !o.Local(prov) {
		return true
	}
	refuse := func(why string, args ...any) bool {
		o.Lease.FencedExits.Add(1)
		o.Log.Warn("fleet: the home's process exited; this gateway does not hold the home, so it does not restart it: "+why,
			append([]any{"home", id}, args...)...)
		return false
	}
	if !o.Lease.Held() {
		return refuse("its heartbeat lapsed (paused, or cut off from the store)")
	}
	rec, err := o.Store.GetHome(ctx, id)
	switch {
	case err != nil:
		return refuse("its record cannot be read", "err", err)
	case rec.Runner != o.Instance:
		return refuse("another gateway runs it, or it was stopped", "runner", rec.Runner)
	case !rec.WantRunning || !MayRun(rec.Status):
		return refuse("it is not meant to run", "status", string(rec.Status))
	}
	claim := rec
	claim.Owner = o.Instance
	if _, err := o.Store.PutHome(ctx, claim, registry.CondOf(rec)); err != nil {
		return refuse("its record changed meanwhile", "err", err)
	}
	return true
}

// Holds returns those of ids whose process this gateway may stop at its
// shutdown: every home outside a fleet or not machine-local (local says
// whether home id is known and machine-local), and in a fleet the homes
// whose record names this gateway as runner, or none. It reads the records
// in one listing. When they cannot be read, every home is kept while this
// gateway's heartbeat holds (no orphan is left), and the machine-local ones
// are left alone once it lapsed (another gateway may run them now).
func (o *Owner) Holds(ctx context.Context, ids []string, local func(id string) bool) []string {
	if o.Peers == nil {
		return ids
	}
	runners := map[string]string{}
	recs, err := o.Store.ListHomes(ctx)
	if err != nil && o.Lease.Held() {
		return ids
	}
	for _, r := range recs {
		runners[r.ID] = r.Runner
	}
	out := ids[:0:0]
	for _, id := range ids {
		if !local(id) {
			out = append(out, id)
			continue
		}
		if err != nil {
			o.Log.Warn("fleet: shutdown leaves the home's process alone: the records cannot be read and this gateway's heartbeat lapsed",
				"home", id, "err", err)
			continue
		}
		switch runner, ok := runners[id]; {
		case !ok || runner == o.Instance || runner == "":
			// No record or no runner: nobody else acts on it, and this
			// gateway's provider would leave an orphan.
			out = append(out, id)
		default:
			o.Log.Info("fleet: shutdown leaves the home's process to the gateway that runs it now", "home", id, "runner", runner)
		}
	}
	return out
}

// MayRun reports whether a home whose record, read under its lifecycle
// lock, has status st may have a process running. Besides running, a
// status of an operation in progress (waking, restoring, suspending) read
// under the lock means the operation that wrote it ended without recording
// its outcome (a failed store write, a crash): the home may run, and a
// suspend stops it rather than answer that it did what it did not.
func MayRun(st registry.Status) bool {
	switch st {
	case registry.StatusRunning, registry.StatusWaking, registry.StatusRestoring,
		registry.StatusSuspending, registry.StatusUnknown:
		return true
	}
	return false
}
