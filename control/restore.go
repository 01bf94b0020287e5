package control

import (
	"context"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/registry"
)

// registerRead is RegisterHome for a home whose stored record rec was read
// just now (a restore at start lists every record once, a fleet sync reads
// each one it registers): the engine does not read it again, which is half
// the store reads of a start with many homes.
func (r *Registrar[H]) registerRead(ctx context.Context, spec homes.Spec, rec registry.Home) error {
	if err := r.d.Engine.RegisterRead(ctx, spec, rec); err != nil {
		return err
	}
	r.d.Homes.Set(spec.ID, r.d.Homes.New(spec))
	return nil
}
