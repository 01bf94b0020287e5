package h1serve

import (
	"context"
	"sync"
)

// hookSlot is a connection's one cheap watch on its current request's
// context (ctxhook): the forwarder's interrupt of its upstream exchange,
// which would otherwise cost a context.AfterFunc on every request. The
// loop knows every way a request's context ends, and fires the slot from
// each: its own cancel at the request's end (end), the client leaving
// (the watch), and the connection's context ending (connDone, for the
// server's base context).
type hookSlot struct {
	mu  sync.Mutex
	req context.Context // the current request's context; nil between requests
	// cancel ends req; connDone calls it when the connection's context
	// ends, as the context package would for a child.
	cancel context.CancelCauseFunc
	gen    uint64 // counts arms, so a stale stop cannot disarm a later one
	f      func() // the armed watch; nil: none
	// connStop ends the watch on the connection's context, registered at
	// the first request; nil until then.
	connStop func() bool
}

// AfterFunc arms c's slot with f for ctx, the current request's context
// (ctxhook.Hook). It refuses any other context, a second watch while one
// is armed, and a context already done: the caller then falls back to
// context.AfterFunc.
func (c *conn) AfterFunc(ctx context.Context, f func()) (stop func() bool, ok bool) {
	h := &c.hook
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx == nil || ctx != h.req || h.f != nil || ctx.Err() != nil {
		return nil, false
	}
	h.gen++
	gen := h.gen
	h.f = f
	return func() bool { return c.hook.stop(gen) }, true
}

// begin makes ctx, which cancel ends, the request context the slot
// serves, and ends it at once when the connection's context has ended:
// ctx is not the connection context's child (conn.reqBase), and its
// ending reaches ctx only through here and connDone.
func (c *conn) begin(ctx context.Context, cancel context.CancelCauseFunc) {
	h := &c.hook
	h.mu.Lock()
	h.req, h.cancel = ctx, cancel
	if h.connStop == nil {
		h.connStop = context.AfterFunc(c.ctx, c.connDone)
	}
	h.mu.Unlock()
	// After the slot holds cancel: connDone, which runs once c.ctx has
	// ended, either finds it or ran before, and then c.ctx.Err is set.
	if c.reqBase != c.ctx && c.ctx.Err() != nil {
		cancel(context.Cause(c.ctx))
	}
}

// end cancels the request's context and fires a watch still armed, as
// the context's own children would be; idempotent.
func (h *hookSlot) end(cancel context.CancelCauseFunc) {
	cancel(nil)
	h.take(true)
}

// stop disarms the watch of arm gen if it has not run.
func (h *hookSlot) stop(gen uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil || h.gen != gen {
		return false
	}
	h.f = nil
	return true
}

// fire runs the armed watch, once, in its own goroutine (as
// context.AfterFunc does), and reports whether there was one. Callers
// fire after the request's context is done.
func (h *hookSlot) fire() bool { return h.take(false) }

// take disarms the watch and runs it, in its own goroutine, if there was
// one; with endReq the slot also stops serving its request's context.
func (h *hookSlot) take(endReq bool) bool {
	h.mu.Lock()
	f := h.f
	h.f = nil
	if endReq {
		h.req, h.cancel = nil, nil
	}
	h.mu.Unlock()
	if f != nil {
		go f()
	}
	return f != nil
}

// connDone ends the current request's context when the connection's
// context ends (the server's base context was cancelled, or the
// connection closed), with the same cause, and then fires the slot. A
// request whose context is the connection context's child (one with a
// deadline, conn.reqBase) ends by itself: connDone waits for it.
func (c *conn) connDone() {
	c.hook.mu.Lock()
	req, cancel := c.hook.req, c.hook.cancel
	c.hook.mu.Unlock()
	switch {
	case req == nil:
	case c.reqBase == c.ctx:
		<-req.Done()
	default:
		cancel(context.Cause(c.ctx))
	}
	c.hook.fire()
}

// endHook ends the connection's watch on its context, if one started.
func (c *conn) endHook() {
	c.hook.mu.Lock()
	stop := c.hook.connStop
	c.hook.mu.Unlock()
	if stop != nil {
		stop()
	}
}
