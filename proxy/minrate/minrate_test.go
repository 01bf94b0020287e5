package minrate

import (
	"errors"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// deadlineConn is a client connection's side as a request body sees it: a
// read blocks until the read deadline set through the ResponseWriter
// passes (http.ResponseController), then fails as net/http's does. With
// expired set, a read whose deadline passed says so there and waits for
// release before it returns: the moment between a read's failure and its
// return, in which another goroutine can run.
type deadlineConn struct {
	http.ResponseWriter
	mu       sync.Mutex
	deadline time.Time
	moved    chan struct{} // closed and replaced at each SetReadDeadline
	expired  chan struct{}
	release  chan struct{}
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	close(c.moved)
	c.moved = make(chan struct{})
	return nil
}

func (c *deadlineConn) Read([]byte) (int, error) {
	for {
		c.mu.Lock()
		d, moved := c.deadline, c.moved
		c.mu.Unlock()
		select {
		case <-time.After(time.Until(d)):
			if c.expired != nil {
				close(c.expired)
				<-c.release
			}
			return 0, os.ErrDeadlineExceeded
		case <-moved:
		}
	}
}

func (c *deadlineConn) Close() error { return nil }

// A read that fails on the body rate's own deadline is the client's slow
// body even when its exchange ends the body (OwnedBody.End) before the
// failure has come back up to the rate check, which then sees
// ErrBodyStopped: the request is answered 408, not taken for a caller that
// went away. A read that the exchange ends before the rate's deadline is
// only stopped.
func TestRateCutNotTakenForTheExchangesEnd(t *testing.T) {
	t.Run("the rate's deadline first", func(t *testing.T) {
		c := &deadlineConn{moved: make(chan struct{}), expired: make(chan struct{}), release: make(chan struct{})}
		owner := h1client.NewOwnedBody(c, c)
		var cut atomic.Bool
		b := NewBody(owner, c, 100, 20*time.Millisecond, 0, &cut, owner)
		done := make(chan error, 1)
		go func() {
			_, err := b.Read(make([]byte, 1))
			done <- err
		}()
		<-c.expired // the read failed on the rate's deadline
		ended := make(chan struct{})
		go func() { owner.End(); close(ended) }()
		testbin.Eventually(t, "the exchange's end cutting the read", func() bool { return owner.WasCut() })
		close(c.release)
		if err := <-done; !errors.Is(err, ErrBodyTooSlow) || !cut.Load() {
			t.Fatalf("read: %v, marked cut %v; want ErrBodyTooSlow and the body marked cut for its rate", err, cut.Load())
		}
		<-ended
	})
	t.Run("the exchange's end first", func(t *testing.T) {
		// In a synctest bubble: the end comes once the read waits on the
		// client, at the very instant it started.
		synctest.Test(t, func(t *testing.T) {
			c := &deadlineConn{moved: make(chan struct{})}
			owner := h1client.NewOwnedBody(c, c)
			var cut atomic.Bool
			b := NewBody(owner, c, 100, time.Minute, 0, &cut, owner)
			done := make(chan error, 1)
			go func() {
				_, err := b.Read(make([]byte, 1))
				done <- err
			}()
			synctest.Wait() // the read waits on the client
			owner.End()
			if err := <-done; !errors.Is(err, h1client.ErrBodyStopped) || cut.Load() {
				t.Fatalf("read: %v, marked cut %v; want h1client.ErrBodyStopped and no cut for the rate", err, cut.Load())
			}
		})
	})
}
