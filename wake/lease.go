package wake

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
//     as soon as it learns so (ProviderChanged), and counted.

// leaseMargin is the part of the heartbeat's TTL by which this gateway
// counts its own lease lapsed before the fleet does: its clock starts
// when the report was sent, the store's when it arrived.
const leaseMargin = 8 // the TTL's eighth

// leaseClock is when this gateway's heartbeat, and with it its lease on
// the homes it runs, lapses. Its zero value holds no lease.
type leaseClock struct {
	mu    sync.Mutex
	until time.Time // monotonic; zero before the first renewal

	// fencedExits counts exits of a home's process that this gateway saw
	// and did not answer with a restart because it no longer held the
	// home; fencedStops the processes it had started and stopped once it
	// learnt that the home was another gateway's.
	fencedExits atomic.Uint64
	fencedStops atomic.Uint64
}

// renewed records a heartbeat sent at sent and accepted with ttl.
func (l *leaseClock) renewed(sent time.Time, ttl time.Duration) {
	until := sent.Add(ttl - ttl/leaseMargin)
	l.mu.Lock()
	if until.After(l.until) {
		l.until = until
	}
	l.mu.Unlock()
}

// held reports whether the last heartbeat is still live.
func (l *leaseClock) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.until.IsZero() && time.Now().Before(l.until)
}

// MayRestart reports whether this gateway may restart home id's process,
// which exited by itself (provider.Env.MayRestart): always outside a
// fleet, or for a home that is not machine-local; in a fleet only while
// it holds the home (see the top of this file), after claiming the
// restart in the store.
func (e *Engine) MayRestart(id string) bool {
	h := e.home(id)
	if h == nil || !e.local(h.spec.Provider) {
		return true
	}
	refuse := func(why string, args ...any) bool {
		e.lease.fencedExits.Add(1)
		e.o.Log.Warn("fleet: the home's process exited; this gateway does not hold the home, so it does not restart it: "+why,
			append([]any{"home", id}, args...)...)
		return false
	}
	if !e.lease.held() {
		return refuse("its heartbeat lapsed (paused, or cut off from the store)")
	}
	ctx, cancel := context.WithTimeout(e.ctx, providerChangeTimeout)
	defer cancel()
	rec, err := e.o.Store.GetHome(ctx, id)
	switch {
	case err != nil:
		return refuse("its record cannot be read", "err", err)
	case rec.Runner != e.o.Instance:
		return refuse("another gateway runs it, or it was stopped", "runner", rec.Runner)
	case !rec.WantRunning || !mayRun(rec.Status):
		return refuse("it is not meant to run", "status", string(rec.Status))
	}
	claim := rec
	claim.Owner = e.o.Instance
	if _, err := e.o.Store.PutHome(ctx, claim, registry.CondOf(rec)); err != nil {
		return refuse("its record changed meanwhile", "err", err)
	}
	return true
}

// notRunner reports whether rec, the record of a machine-local home in a
// fleet, names another gateway or none as its runner: a process this
// gateway's provider restarted for it is a copy.
func (e *Engine) notRunner(rec registry.Home) bool {
	return e.local(rec.Provider) && rec.Runner != e.o.Instance
}

// Holds returns those of ids whose process this gateway may stop at its
// shutdown: every home outside a fleet or not machine-local, and in a
// fleet the homes whose record names this gateway as runner, or none. It
// reads the records in one listing. When they cannot be read, every home
// is kept while this gateway's heartbeat holds (no orphan is left), and
// the machine-local ones are left alone once it lapsed (another gateway
// may run them now).
func (e *Engine) Holds(ctx context.Context, ids []string) []string {
	if e.o.Peers == nil {
		return ids
	}
	runners := map[string]string{}
	recs, err := e.o.Store.ListHomes(ctx)
	if err != nil && e.lease.held() {
		return ids
	}
	for _, r := range recs {
		runners[r.ID] = r.Runner
	}
	out := ids[:0:0]
	for _, id := range ids {
		h := e.home(id)
		if h == nil || !e.local(h.spec.Provider) {
			out = append(out, id)
			continue
		}
		if err != nil {
			e.o.Log.Warn("fleet: shutdown leaves the home's process alone: the records cannot be read and this gateway's heartbeat lapsed",
				"home", id, "err", err)
			continue
		}
		switch runner, ok := runners[id]; {
		case !ok || runner == e.o.Instance || runner == "":
			// No record or no runner: nobody else acts on it, and this
			// gateway's provider would leave an orphan.
			out = append(out, id)
		default:
			e.o.Log.Info("fleet: shutdown leaves the home's process to the gateway that runs it now", "home", id, "runner", runner)
		}
	}
	return out
}
