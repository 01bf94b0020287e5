package ctxhook

import (
	"context"
	"testing"
	"time"
)

// slot is a Hook with one slot, for the request context it was made for.
type slot struct {
	req   context.Context
	taken int
}

func (s *slot) AfterFunc(ctx context.Context, f func()) (func() bool, bool) {
	if ctx != s.req {
		return nil, false
	}
	s.taken++
	return func() bool { return true }, true
}

// TestAfterFunc: the hook of the context's server takes the contexts it
// accepts; every other watch is context.AfterFunc's, and runs when its
// context ends.
func TestAfterFunc(t *testing.T) {
	h := &slot{}
	parent := With(context.Background(), h)
	req, cancelReq := context.WithCancel(parent)
	defer cancelReq()
	h.req = req
	if !AfterFunc(req, func() {})() {
		t.Fatal("the hook's stop reported false")
	}
	if h.taken != 1 {
		t.Fatalf("the hook took %d watches, want 1", h.taken)
	}

	for name, ctx := range map[string]context.Context{"no hook": context.Background(), "refused by the hook": parent} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(ctx)
			ran := make(chan struct{})
			AfterFunc(ctx, func() { close(ran) })
			if !AfterFunc(ctx, func() { t.Error("a stopped watch ran") })() {
				t.Error("stop before the context ended reported false")
			}
			cancel()
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not run after its context ended")
			}
		})
	}
	if h.taken != 1 {
		t.Fatalf("the hook took %d watches, want 1", h.taken)
	}
}
