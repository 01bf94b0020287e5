package control

import (
	"context"
	"time"
)

// In a fleet, an operator's lease on a home is stored (registry's
// AddAdminLease): every gateway counts it among the home's sessions, it
// outlives the gateway that took it, and any gateway can end it. A
// gateway on its own store keeps leases as its own sessions.

// fleetLeaseTimeout bounds one lease operation on the store.
const fleetLeaseTimeout = 5 * time.Second

// AddLease stores a lease on home id for ttl; ok is false on a nil
// *Fleet (the caller keeps the lease as a session of its own).
func (f *Fleet[H]) AddLease(id string, ttl time.Duration) (lease uint64, ok bool, err error) {
	if f == nil {
		return 0, false, nil
	}
	r := f.store
	ctx, cancel := context.WithTimeout(context.Background(), fleetLeaseTimeout)
	defer cancel()
	lease, _, err = r.AddAdminLease(ctx, id, ttl)
	return lease, true, err
}

// EndLease ends a stored lease on home id and reports whether it was
// live; ok is false on a nil *Fleet.
func (f *Fleet[H]) EndLease(id string, lease uint64) (live, ok bool, err error) {
	if f == nil {
		return false, false, nil
	}
	r := f.store
	ctx, cancel := context.WithTimeout(context.Background(), fleetLeaseTimeout)
	defer cancel()
	live, err = r.EndAdminLease(ctx, id, lease)
	return live, true, err
}
