package registry

import (
	"context"
	"fmt"
)

// Pinger is a store whose server can be asked whether it answers. A
// server that is paused, or cut off by a link that stops forwarding
// without closing, leaves its connections open and answers nothing: only
// a question bounded in time tells. Until a Ping passes again, the store
// reports itself unavailable (Health).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Ping asks the server for an answer within ctx. A failure makes
// Unavailable return it until a later Ping passes.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.c.Ping(ctx).Err(); err != nil {
		werr := fmt.Errorf("redis at %s does not answer: %w: %w", r.where(), err, ErrUnavailable)
		r.silent.Store(&werr)
		return werr
	}
	r.silent.Store(nil)
	return nil
}

var _ Pinger = (*Redis)(nil)
