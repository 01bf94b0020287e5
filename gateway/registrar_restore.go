package gateway

import (
	"context"

	"github.com/wakegate/wakegate/registry"
)

// registerRead is RegisterHome for a home whose stored record rec was read
// just now (a restore at start lists every record once, a fleet sync reads
// each one it registers): the engine does not read it again, which is half
// the store reads of a start with many homes.
func (r *registrar) registerRead(ctx context.Context, h *homeRoute, rec registry.Home) error {
	if err := r.g.engine.RegisterRead(ctx, h.spec, rec); err != nil {
		return err
	}
	r.g.setHome(h.spec.ID, h)
	return nil
}
