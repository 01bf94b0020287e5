package events

import "testing"

// closed reports whether ch is closed now.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Changed fires for the events about its key (as Home or as App) and for
// Touch, never for other keys, and is not dropped when every subscriber's
// buffer is full: 10,000 events past a stuck subscriber still close it.
func TestBusChangedNeverDrops(t *testing.T) {
	b := NewBus(4)
	stuck := b.Subscribe(1)
	defer stuck.Close()

	h1, h2, app := b.Changed("h1"), b.Changed("h2"), b.Changed("shop")
	for range 10_000 {
		b.Publish(Event{Type: "wake.start", Home: "h9"})
	}
	if closed(h1) || closed(h2) || closed(app) {
		t.Fatal("an event about another home woke a watcher")
	}
	if b.Dropped() == 0 {
		t.Fatal("the stuck subscriber dropped nothing: the test does not load the bus")
	}
	b.Publish(Event{Type: "wake.ready", Home: "h1"})
	if !closed(h1) || closed(h2) {
		t.Fatalf("after h1's event: h1 closed %v, h2 closed %v", closed(h1), closed(h2))
	}
	b.Publish(Event{Type: "app.phase", App: "shop", Home: "h2"})
	if !closed(app) || !closed(h2) {
		t.Fatal("an app's event must wake the watchers of the app and of its home")
	}
	// A new watch after a change waits for the next one.
	again := b.Changed("h1")
	if closed(again) {
		t.Fatal("a watch taken after the change fired at once")
	}
	b.Touch("h1")
	if !closed(again) {
		t.Fatal("Touch did not wake the watcher")
	}
	var nilBus *Bus
	if nilBus.Changed("h1") != nil {
		t.Fatal("a nil bus must return a channel that never fires")
	}
	nilBus.Touch("h1")
}
