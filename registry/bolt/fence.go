package bolt

import (
	"errors"
	"fmt"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/wakegate/wakegate/registry"
)

// checkFence refuses, inside a write's transaction, a write fenced by f
// whose lease is not the live one of its lock (registry.ErrLeaseLost); nil
// for the zero registry.Fence. The leases are in memory (leases.go).
func (b *Store) checkFence(f registry.Fence) error {
	return b.leases.fence(f, b.clock())
}

// Changed returns a channel closed at the next change of key made through
// this store (see registry.Notifier): Store serves one process, so its changes are
// announced in that process alone.
func (b *Store) Changed(key string) <-chan struct{} { return b.changes.Changed(key) }

// boltUnavailable maps the error of a closed bbolt file to registry.ErrUnavailable.
func boltUnavailable(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("the store file is closed: %w: %w", err, registry.ErrUnavailable)
	}
	return err
}
