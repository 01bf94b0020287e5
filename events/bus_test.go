package events

import (
	"testing"
)

func TestBusOrderRingAndSlowSubscriber(t *testing.T) {
	b := NewBus(3)
	fast := b.Subscribe(10)
	defer fast.Close()
	slow := b.Subscribe(1)
	defer slow.Close()
	for i, typ := range []string{"a", "b", "c", "d", "e"} {
		b.Publish(Event{Type: typ, Home: "h", Joined: i})
	}
	for i, want := range []string{"a", "b", "c", "d", "e"} {
		e := <-fast.C
		if e.Type != want || e.Seq != uint64(i+1) || e.Time.IsZero() {
			t.Fatalf("event %d = %+v, want type %s seq %d with a time", i, e, want, i+1)
		}
	}
	if e := <-slow.C; e.Type != "a" {
		t.Fatalf("slow subscriber got %q first, want a", e.Type)
	}
	if d := b.Dropped(); d != 4 {
		t.Fatalf("dropped = %d, want 4 (the slow subscriber's b..e)", d)
	}
	var got []string
	for _, e := range b.Recent() {
		got = append(got, e.Type)
	}
	if len(got) != 3 || got[0] != "c" || got[1] != "d" || got[2] != "e" {
		t.Fatalf("recent = %v, want [c d e]", got)
	}
	slow.Close()
	b.Publish(Event{Type: "f"})
	if d := b.Dropped(); d != 4 {
		t.Fatalf("a closed subscription still counted drops: %d", d)
	}
	var nilBus *Bus
	nilBus.Publish(Event{Type: "ignored"}) // must not panic
}
