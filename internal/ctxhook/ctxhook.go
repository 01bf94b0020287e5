// Package ctxhook lets the server that made a request's context offer a
// cheaper watch on it than context.AfterFunc. A child watch on a
// context.WithCancel context allocates a children map, a context of its
// own and a done channel on every call; on the warm path that is one call
// per proxied request. A server that knows every way its request context
// can end (its own cancel, its connection's, its parent's) can run the
// function itself from those places instead, from one slot per
// connection.
package ctxhook

import "context"

// Hook runs f once ctx is done, for a ctx its server made. ok false means
// the hook cannot take this one (another context, or its slot is in use),
// and the caller falls back to context.AfterFunc. stop has
// context.AfterFunc's contract: true if it stopped f from being run.
type Hook interface {
	AfterFunc(ctx context.Context, f func()) (stop func() bool, ok bool)
}

type key struct{}

// With returns a child of parent that carries h, for the contexts made
// beneath it.
func With(parent context.Context, h Hook) context.Context {
	return context.WithValue(parent, key{}, h)
}

// AfterFunc arranges for f to run, in its own goroutine, after ctx is
// done, through the hook of the server that made ctx when it has one and
// takes it, else through context.AfterFunc. The stop it returns has
// context.AfterFunc's contract.
func AfterFunc(ctx context.Context, f func()) (stop func() bool) {
	if h, _ := ctx.Value(key{}).(Hook); h != nil {
		if stop, ok := h.AfterFunc(ctx, f); ok {
			return stop
		}
	}
	return context.AfterFunc(ctx, f)
}
