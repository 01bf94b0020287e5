package redis

import (
	"context"
	"fmt"

	"github.com/wakegate/wakegate/registry"
)

// Ping asks the server for an answer within ctx. A failure makes
// Unavailable return it until a later Ping passes.
func (r *Store) Ping(ctx context.Context) error {
	if err := r.c.Ping(ctx).Err(); err != nil {
		werr := fmt.Errorf("redis at %s does not answer: %w: %w", r.where(), err, registry.ErrUnavailable)
		r.silent.Store(&werr)
		return werr
	}
	r.silent.Store(nil)
	return nil
}

var _ registry.Pinger = (*Store)(nil)
