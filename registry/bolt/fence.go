package bolt

import (
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/wakegate/wakegate/registry"
)

// checkFence refuses, inside tx, a write fenced by f whose lease is not the
// live one of its lock (registry.ErrLeaseLost); nil for the zero registry.Fence.
func (b *Store) checkFence(tx *bbolt.Tx, f registry.Fence) error {
	if f.Lock == "" {
		return nil
	}
	cur, found, err := getLock(tx, f.Lock)
	if err != nil {
		return err
	}
	return f.Check(found, cur.Token, cur.Expires, b.clock())
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
