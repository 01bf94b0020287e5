package appstatus

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/registry"
)

// appSet is the set of apps Apps observes. It is never changed once
// stored: readers load it with one atomic read, and Put and Remove store a
// changed copy under Apps.setMu (copy on write).
type appSet struct {
	byslug map[string]*observedApp
	order  []string // slugs, sorted
}

// app returns the app with slug, or nil.
func (a *Apps) app(slug string) *observedApp { return a.tab.Load().byslug[slug] }

// newApp returns the state of a newly registered app: not observed yet,
// its observations owned by a context of its own under Apps'.
func (a *Apps) newApp(s registry.App) *observedApp {
	ap := &observedApp{spec: s, since: time.Now(), stopped: s.Stopped(), changed: make(chan struct{}),
		kick: make(chan struct{}, 1), opLock: make(chan struct{}, 1)}
	ap.ctx, ap.cancel = context.WithCancel(a.ctx)
	ap.st = Status{Slug: s.Slug, Phase: PhaseUnknown, Reason: ReasonNotObserved,
		Message: "the app has not been observed yet", Route: RouteCandidate}
	return ap
}

// Put registers s, or replaces the app with its slug. A replaced app's
// observation in flight is cancelled and waited for, and the new one
// starts afresh: not observed, its start period counted from now. The
// caller owns the route: it puts a candidate in its table for s.Slug
// (before or after Put) and drives observations with Refresh. Put
// publishes app.registered before the app can be observed, so that the
// event stream keeps the order of what happened to it, and returns the
// app's pulse, which the caller beats whenever a forwarded request got
// an answer from the app (schedule.go).
func (a *Apps) Put(s registry.App) *Pulse {
	a.setMu.Lock()
	defer a.setMu.Unlock()
	old := a.tab.Load()
	msg := "the app was registered; its route is a candidate until a self-probe passes"
	prev := old.byslug[s.Slug]
	if prev != nil {
		// Cancelled, its observation in flight ends at once; what it
		// publishes comes before the replacement.
		prev.end()
		msg = "the app was replaced; its route is a candidate until a self-probe passes"
	}
	set := &appSet{byslug: maps.Clone(old.byslug)}
	ap := a.newApp(s)
	set.byslug[s.Slug] = ap
	set.order = slices.Sorted(maps.Keys(set.byslug))
	// Published before the app is visible: an observation may begin the
	// moment it is (a request for the app), and its events come after
	// the registration.
	a.o.Log.Info("app registered", "app", s.Slug, "replaced", prev != nil)
	a.o.Events.Publish(events.Event{Type: events.AppRegistered, App: s.Slug, Home: s.Home, Message: msg})
	a.tab.Store(set)
	return &ap.pulse
}

// Remove stops observing slug: it cancels the app's observation in flight
// and waits until it has ended, so that no health check of the app starts
// or runs after Remove returns. It reports whether slug was registered and
// publishes app.removed.
func (a *Apps) Remove(slug string) bool {
	a.setMu.Lock()
	old := a.tab.Load()
	prev := old.byslug[slug]
	if prev == nil {
		a.setMu.Unlock()
		return false
	}
	set := &appSet{byslug: maps.Clone(old.byslug)}
	delete(set.byslug, slug)
	set.order = slices.Sorted(maps.Keys(set.byslug))
	a.tab.Store(set)
	a.setMu.Unlock()
	prev.end()
	a.o.Log.Info("app removed", "app", slug)
	a.o.Events.Publish(events.Event{Type: events.AppRemoved, App: slug, Home: prev.spec.Home, Message: "the app was removed"})
	return true
}

// end cancels ap's observations and waits for the one in flight, if any.
func (ap *observedApp) end() {
	ap.cancel()
	ap.mu.Lock()
	f := ap.flight
	ap.mu.Unlock()
	if f != nil {
		<-f.done
	}
}
