package registry

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// checkFence refuses, inside tx, a write fenced by f whose lease is not the
// live one of its lock (ErrLeaseLost); nil for the zero Fence.
func (b *Bolt) checkFence(tx *bolt.Tx, f Fence) error {
	if f.Lock == "" {
		return nil
	}
	cur, found, err := getLock(tx, f.Lock)
	if err != nil {
		return err
	}
	return fenceLost(f, found, cur.Token, cur.Expires, b.clock())
}

// Changed returns a channel closed at the next change of key made through
// this store (see Notifier): Bolt serves one process, so its changes are
// announced in that process alone.
func (b *Bolt) Changed(key string) <-chan struct{} { return b.changes.Changed(key) }

// boltUnavailable maps the error of a closed bbolt file to ErrUnavailable.
func boltUnavailable(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("the store file is closed: %w: %w", err, ErrUnavailable)
	}
	return err
}
