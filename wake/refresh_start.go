package wake

import (
	"context"
	"sync"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// Adoption: a home registered with a stored status that says it runs (the
// gateway restarted, or another gateway of the fleet woke it) is taken
// over in one of two ways, by its provider.
//
//   - A provider of local homes (provider.Quiescer: exec) had them stopped
//     at the last shutdown with their desired state kept, or left them
//     running to be adopted. A wake with cause "adopt" brings each back:
//     it adopts the process that still runs (verifying its identity) or
//     starts it again, and proves it ready. Homes in the middle of a wake
//     or a roll (waking, restoring) are settled the same way for every
//     provider.
//   - Any other provider's homes (docker, fly, http, static) were left as they
//     were: they may have been stopped or suspended out of band while no
//     gateway watched. Each running one is refreshed instead (Refresh with
//     cause "adopt"): the provider's Status is read and the record made to
//     agree, and nothing is started. A home still running is proven by the
//     first request that needs it.
//
// Refreshes at start run in the background, at most adoptParallel at a
// time, on goroutines the engine owns (Close stops them): a start with
// many running homes neither waits for their providers nor blocks
// /readyz, and never looks at the homes that sleep.

// adoptParallel bounds the refreshes at start that run at once.
const adoptParallel = 8

// adopter queues the refreshes of adopted homes and runs them.
type adopter struct {
	mu      sync.Mutex
	queue   []string
	workers int
}

// adopt takes over home h, registered with the stored status st, which
// says it runs or was being woken or rolled (see the top of this file).
func (e *Engine) adopt(h *home, st registry.Status) {
	if _, local := e.o.Providers[h.spec.Provider].(provider.Quiescer); local || st != registry.StatusRunning {
		if _, _, err := e.join(h, "adopt", false); err != nil {
			e.o.Log.Warn("adopt home", "home", h.spec.ID, "err", err)
		}
		return
	}
	e.adopting.add(e, h.spec.ID)
}

// add queues home id's refresh and starts a worker if fewer than
// adoptParallel run.
func (a *adopter) add(e *Engine, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.ctx.Err() != nil {
		return
	}
	a.queue = append(a.queue, id)
	if a.workers >= adoptParallel {
		return
	}
	a.workers++
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		a.work(e)
	}()
}

// next takes the next queued home, or ends the worker when none is left.
func (a *adopter) next(e *Engine) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) == 0 || e.ctx.Err() != nil {
		a.workers--
		a.queue = nil
		return "", false
	}
	id := a.queue[0]
	a.queue[0] = ""
	a.queue = a.queue[1:]
	return id, true
}

// work refreshes queued homes until the queue is empty or the engine
// closes.
func (a *adopter) work(e *Engine) {
	for {
		id, ok := a.next(e)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(e.ctx, refreshTimeout)
		_, err := e.refresh(ctx, id, "adopt")
		cancel()
		switch {
		case err == nil, e.ctx.Err() != nil:
		case fault.Is(err, fault.Busy), fault.Is(err, fault.NotFound):
			// Another operation settles the home (a request woke it
			// meanwhile), or it was removed.
			e.o.Log.Debug("refresh at start skipped", "home", id, "err", err)
		default:
			e.o.Log.Warn("refresh at start", "home", id, "err", err)
		}
	}
}
