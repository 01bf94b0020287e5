package ownership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// A fleet's store that lost its data (a Redis restarted without
// persistence) is healed from what the gateways still know (DESIGN rule
// 28): each one records again the machine-local homes whose processes it
// runs (RecordRun), at once, and then the records of its config's homes
// that nobody recreated (Reseed), as sleeping homes.

// Home is what the heal needs of a home the engine knows.
type Home struct {
	// ID, Target, Provider and Version are the home's config.
	ID, Target, Provider, Version string
	// Stored is the version of the home's stored record as the engine
	// mirrors it, "" when it knows none.
	Stored string
}

// RecordRun writes again the record of home h when this gateway's
// provider runs its process and the record is missing or does not say
// so: running, wanted, at the process's endpoint, with this gateway as
// its runner. It reports whether the home runs here. Homes of providers
// that are not machine-local are left to Reseed.
func (o *Owner) RecordRun(ctx context.Context, h Home) (bool, error) {
	if !o.Local(h.Provider) {
		return false, nil
	}
	id, prov := h.ID, o.Providers[h.Provider]
	rec, err := o.Store.GetHome(ctx, id)
	missing := errors.Is(err, registry.ErrNotFound)
	if err != nil && !missing {
		return false, fmt.Errorf("record the run of %s: %w", id, err)
	}
	if !missing && rec.Runner != "" && rec.Runner != o.Instance {
		return false, nil
	}
	// Only what this provider watches counts: a process it does not know
	// (no ref is given) is not this gateway's.
	st, serr := prov.Status(ctx, provider.Spec{ID: id, Target: h.Target})
	if serr != nil {
		o.Log.Debug("fleet: the provider's state of the home is unknown; not recorded as run here", "home", id, "err", serr)
		return false, nil
	}
	if st.State != provider.StateRunning || st.Endpoint == "" {
		return false, nil
	}
	version := h.Stored
	if version == "" {
		version = h.Version
	}
	run := func(r *registry.Home) {
		r.Target, r.Provider = h.Target, h.Provider
		r.Status, r.Verdict, r.Reason, r.WantRunning = registry.StatusRunning, registry.VerdictHealthy, "", true
		r.Endpoint, r.ProviderRef = st.Endpoint, st.Ref
		o.SetRunner(r)
		r.LastReadyAt = time.Now()
		if r.Version == "" {
			r.Version = version
		}
	}
	if missing {
		fresh := registry.Home{ID: id, Owner: o.Instance}
		run(&fresh)
		if _, err = o.Store.PutHome(ctx, fresh, registry.Cond{}); err == nil {
			return true, nil
		}
		if !errors.Is(err, registry.ErrConflict) {
			return true, fmt.Errorf("record the run of %s: %w", id, err)
		}
		rec = registry.Home{ID: id} // created meanwhile: update it
	} else if rec.Runner == o.Instance && rec.Status == registry.StatusRunning && rec.ProviderRef == st.Ref {
		return true, nil
	}
	if _, err := registry.UpdateHome(ctx, o.Store, rec, o.Instance, run); err != nil {
		return true, fmt.Errorf("record the run of %s: %w", id, err)
	}
	return true, nil
}

// Reseed creates the record of home h, as a sleeping home, when it is
// missing; a record that exists is left as it is. It reports whether it
// created one: nothing runs the home on this gateway then, and its next
// request wakes it.
func (o *Owner) Reseed(ctx context.Context, h Home) (bool, error) {
	id := h.ID
	if _, err := o.Store.GetHome(ctx, id); !errors.Is(err, registry.ErrNotFound) {
		if err != nil {
			return false, fmt.Errorf("reseed %s: %w", id, err)
		}
		return false, nil
	}
	_, err := o.Store.PutHome(ctx, registry.Home{ID: id, Target: h.Target, Provider: h.Provider,
		Version: h.Version, Status: registry.StatusSleeping, Owner: o.Instance}, registry.Cond{})
	switch {
	case errors.Is(err, registry.ErrConflict):
		return false, nil // another gateway wrote it first
	case err != nil:
		return false, fmt.Errorf("reseed %s: %w", id, err)
	}
	return true, nil
}
