package idletick

import (
	"testing"
	"time"
)

// woken fails the test unless the loop's channel ch was closed (want) or
// left open (!want); what names the change.
func woken(t *testing.T, ch <-chan struct{}, want bool, what string) {
	t.Helper()
	got := false
	select {
	case <-ch:
		got = true
	default:
	}
	if got != want {
		t.Fatalf("%s: loop woken %v, want %v", what, got, want)
	}
}

func TestClockPeriodAndBroadcast(t *testing.T) {
	var c Clock
	if tick, _ := c.Get(); tick != 0 {
		t.Fatalf("zero clock period = %s, want 0", tick)
	}
	c.Set(time.Second)
	tick, changed := c.Get()
	if tick != time.Second {
		t.Fatalf("period = %s, want 1s", tick)
	}
	c.Set(time.Second)
	woken(t, changed, false, "the same period set again")
	c.Shorten(Need(400 * time.Millisecond))
	woken(t, changed, true, "a shorter need")
	tick, changed = c.Get()
	if tick != 100*time.Millisecond {
		t.Fatalf("period = %s, want 100ms (a quarter of the idle timeout)", tick)
	}
	c.Shorten(Need(time.Hour)) // longer than the need: kept
	c.Set(2 * time.Second)     // the need still wins
	woken(t, changed, false, "changes that left the period as it was")
	c.Set(50 * time.Millisecond)
	woken(t, changed, true, "a configured period below the need")
	if tick, _ = c.Get(); tick != 50*time.Millisecond {
		t.Fatalf("period = %s, want 50ms", tick)
	}
}

func TestNeed(t *testing.T) {
	for _, c := range []struct{ idle, want time.Duration }{
		{0, 0}, {-time.Second, 0}, {20 * time.Millisecond, 10 * time.Millisecond}, {time.Minute, 15 * time.Second},
	} {
		if got := Need(c.idle); got != c.want {
			t.Errorf("Need(%s) = %s, want %s", c.idle, got, c.want)
		}
	}
}
