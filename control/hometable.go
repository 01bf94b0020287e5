package control

import (
	"sync"
	"sync/atomic"
)

// HomeTable is the gateway's route table of homes, by target and by id.
// The request path reads it under a read lock (one map hit), and a change
// is one insert or delete: registering the n-th home costs the same as
// the first, where a copy of the table per change made registering n
// homes cost n² (TestHomeTableChangeCostIsFlat counts it). Plain maps,
// rather than sync.Maps whose every entry is an object of its own, keep
// 100,000 homes in a few large arrays that the garbage collector marks
// quickly. The zero value is an empty table.
type HomeTable[H interface {
	comparable
	Route
}] struct {
	// mu guards the maps; nothing is called while it is held.
	mu       sync.RWMutex
	byTarget map[string]H
	byID     map[string]H
	n        atomic.Int64
}

// At returns the home routed at /node/{target}.
func (t *HomeTable[H]) At(target string) (H, bool) {
	t.mu.RLock()
	h, ok := t.byTarget[target]
	t.mu.RUnlock()
	return h, ok
}

// WithID returns the home with id.
func (t *HomeTable[H]) WithID(id string) (H, bool) {
	t.mu.RLock()
	h, ok := t.byID[id]
	t.mu.RUnlock()
	return h, ok
}

// Count is how many homes are routed.
func (t *HomeTable[H]) Count() int { return int(t.n.Load()) }

// Each calls fn for every routed home, in no order, until it returns
// false (admin lists and shutdown; never the request path). fn sees the
// homes routed when Each was called, and may change the table.
func (t *HomeTable[H]) Each(fn func(h H) bool) {
	t.mu.RLock()
	all := make([]H, 0, len(t.byID))
	for _, h := range t.byID {
		all = append(all, h)
	}
	t.mu.RUnlock()
	for _, h := range all {
		if !fn(h) {
			return
		}
	}
}

// Set routes h in place of the home with id. A request that runs
// meanwhile finds the old route or the new one.
func (t *HomeTable[H]) Set(id string, h H) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byTarget, t.byID = map[string]H{}, map[string]H{}
	}
	target := h.Spec().Target
	if prev, ok := t.byID[id]; ok {
		if pt := prev.Spec().Target; pt != target && t.byTarget[pt] == prev {
			delete(t.byTarget, pt)
		}
	} else {
		t.n.Add(1)
	}
	t.byTarget[target] = h
	t.byID[id] = h
}

// Drop stops routing the home with id; the route of its target stays
// another home's if another took it meanwhile.
func (t *HomeTable[H]) Drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, ok := t.byID[id]
	if !ok {
		return
	}
	if pt := prev.Spec().Target; t.byTarget[pt] == prev {
		delete(t.byTarget, pt)
	}
	delete(t.byID, id)
	t.n.Add(-1)
}
