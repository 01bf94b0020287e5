package route

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// TestHomeConnsCapOrderAndRefusal holds a home's only slot: a second
// request waits and gets it once it is given back, a third that waits
// past maxWait is refused with the public capacity code and a retry, and
// an upgrade takes no slot at all.
func TestHomeConnsCapOrderAndRefusal(t *testing.T) {
	c := NewHomeConns(1, 200*time.Millisecond, 3*time.Second)
	req := func() *http.Request { return httptest.NewRequest(http.MethodGet, "/node/a/", nil) }

	first, err := c.Acquire(req(), "a")
	if err != nil || first == nil {
		t.Fatalf("first request: slot %v, err %v", first, err)
	}
	got := make(chan error, 1)
	go func() {
		slot, err := c.Acquire(req(), "a")
		c.Release(slot)
		got <- err
	}()
	c.Release(first)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiting request got no slot after the first gave it back: %v", err)
		}
	case <-time.After(20 * time.Second): // a guard against a hang
		t.Fatal("the waiting request never got the slot")
	}

	held, err := c.Acquire(req(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(held)
	if _, err := c.Acquire(req(), "b"); err != nil {
		t.Fatalf("another home's slots are its own: %v", err)
	}
	_, err = c.Acquire(req(), "a")
	f, ok := fault.As(err)
	if !ok || f.Code != CodeHomeAtCapacity || f.Kind != fault.NotReady || f.RetryAfter != 3*time.Second ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request past the wait: %v (fault %+v)", err, f)
	}

	up := req()
	up.Header.Set("Upgrade", "websocket")
	if slot, err := c.Acquire(up, "a"); slot != nil || err != nil {
		t.Fatalf("an upgrade took a slot (%v) or was refused (%v)", slot, err)
	}
}

// TestHomeConnsCallerLeaves refuses a waiting request whose caller goes
// away, with the caller's cause, long before maxWait.
func TestHomeConnsCallerLeaves(t *testing.T) {
	c := NewHomeConns(1, time.Minute, time.Second)
	held, err := c.Acquire(httptest.NewRequest(http.MethodGet, "/", nil), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(held)
	gone := errors.New("caller left")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(gone)
	_, err = c.Acquire(httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx), "a")
	if !errors.Is(err, gone) || fault.KindOf(err) != fault.NotReady {
		t.Fatalf("a request whose caller left: %v", err)
	}
}

// TestHomeConnsNoCap takes no slot when the cap is off.
func TestHomeConnsNoCap(t *testing.T) {
	c := NewHomeConns(0, time.Second, time.Second)
	for range 3 {
		if slot, err := c.Acquire(httptest.NewRequest(http.MethodGet, "/", nil), "a"); slot != nil || err != nil {
			t.Fatalf("slot %v, err %v with no cap", slot, err)
		}
	}
}
