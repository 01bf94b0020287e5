package provider

import (
	"context"
	"sort"
	"sync"
)

// quiesceParallel bounds how many homes Quiesce stops at once.
const quiesceParallel = 8

// Quiesced is what Quiesce did to one home.
type Quiesced struct {
	// ID is the home.
	ID string
	// Proven is true once the home's process is verified gone, and also
	// when no live process was known or recorded for it.
	Proven bool
	// Err says why the stop failed (then Proven may be false).
	Err error
}

// Quiesce stops the process of every home this provider has started or
// adopted, and of each home in ids whose recorded process still runs, so
// that a gateway that shuts down leaves no home process behind. Each home
// is stopped as Stop does it (SIGTERM, StopGrace, SIGKILL), up to
// quiesceParallel at a time; Quiesce returns when every stop has ended,
// one entry per home, sorted by id.
//
// Unlike a caller's Stop, a quiesce carries no intent: the caller keeps
// each home's stored desired state, so the next gateway start wakes (or,
// for a process that survived, adopts) the homes that should run. Call it
// before Close; after Close every entry carries the closed error.
func (e *Exec) Quiesce(ctx context.Context, ids []string) []Quiesced {
	all := map[string]bool{}
	for _, id := range ids {
		all[id] = true
	}
	e.mu.Lock()
	for id := range e.homes {
		all[id] = true
	}
	e.mu.Unlock()
	out := make([]Quiesced, 0, len(all))
	for id := range all {
		out = append(out, Quiesced{ID: id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })

	sem := make(chan struct{}, quiesceParallel)
	var wg sync.WaitGroup
	for i := range out {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			q := &out[i]
			q.Proven, q.Err = e.Stop(ctx, Spec{ID: q.ID})
		})
	}
	wg.Wait()
	return out
}
