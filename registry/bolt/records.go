package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// Every kind of record has a bucket of its own, named by its
// registry.Kind's Table, records keyed by id, slug or target, as JSON.
var (
	bucketApps      = []byte(registry.KindApp.Table)      // slug -> JSON registry.App
	bucketAppStates = []byte(registry.KindAppState.Table) // slug -> JSON registry.AppState
	// bucketClaims holds the target index: target -> JSON registry.Claim.
	// It is created by the first write of a claim, so that a store written
	// before the index existed opens unchanged.
	bucketClaims = []byte(registry.KindClaim.Table)
)

// GetRecord returns the stored JSON of key in k's bucket (see
// registry.Tables).
func (b *Store) GetRecord(ctx context.Context, k registry.Kind, key string) ([]byte, error) {
	var raw []byte
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		bk := tx.Bucket([]byte(k.Table))
		if bk == nil {
			return registry.ErrNotFound
		}
		v := bk.Get([]byte(key))
		if v == nil {
			return registry.ErrNotFound
		}
		raw = bytes.Clone(v)
		return nil
	})
	return raw, err
}

// EachRecord calls fn with every record of k's bucket in key order
// (bbolt iterates in byte order, which is the order of ids and slugs),
// inside one read transaction.
func (b *Store) EachRecord(ctx context.Context, k registry.Kind, fn func(key string, raw []byte) error) error {
	return b.view(ctx, func(tx *bbolt.Tx) error {
		bk := tx.Bucket([]byte(k.Table))
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(key, raw []byte) error { return fn(string(key), raw) })
	})
}

// stamp is what a compare-and-set reads of a stored record.
type stamp struct {
	Generation uint64 `json:"generation"`
	Owner      string `json:"owner"`
}

// readStamp reads the generation and owner of the record stored under key
// in bk (nil: a bucket not created yet); found is false when there is
// none.
func readStamp(bk *bbolt.Bucket, k registry.Kind, key string) (st stamp, found bool, err error) {
	if bk == nil {
		return st, false, nil
	}
	raw := bk.Get([]byte(key))
	if raw == nil {
		return st, false, nil
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, true, fmt.Errorf("decode stored %s: %w", k.Name, err)
	}
	return st, true, nil
}

// PutRecord writes raw under key if the stored record matches cond and
// cond's fence is the live lease of its lock, in one transaction, then
// announces the change (see registry.Tables).
func (b *Store) PutRecord(ctx context.Context, k registry.Kind, key string, raw []byte, cond registry.Cond) error {
	return b.writeRecord(ctx, k, key, raw, false, cond)
}

// DeleteRecord removes the record under key if it matches cond;
// registry.ErrNotFound when there is none. A cond with Generation 0 never
// matches a stored record.
func (b *Store) DeleteRecord(ctx context.Context, k registry.Kind, key string, cond registry.Cond) error {
	return b.writeRecord(ctx, k, key, nil, true, cond)
}

// writeRecord puts raw under key, or with del removes key, if the stored
// record matches cond (cond.Check, or cond.CheckDelete with del) and cond's
// fence is the live lease of its lock, in one transaction; then it
// announces the change.
func (b *Store) writeRecord(ctx context.Context, k registry.Kind, key string, raw []byte, del bool, cond registry.Cond) error {
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		bk := tx.Bucket([]byte(k.Table))
		check := cond.CheckDelete
		if !del {
			var err error
			if bk, err = tx.CreateBucketIfNotExists([]byte(k.Table)); err != nil {
				return fmt.Errorf("create bucket %s: %w", k.Table, err)
			}
			check = cond.Check
		}
		st, found, err := readStamp(bk, k, key)
		if err != nil {
			return err
		}
		if err := check(found, st.Generation, st.Owner); err != nil {
			return err
		}
		if err := b.checkFence(cond.Fence); err != nil {
			return err
		}
		if del {
			return bk.Delete([]byte(key))
		}
		return bk.Put([]byte(key), raw)
	})
	if err != nil {
		return err
	}
	b.changes.Fire(k.ChangeKey(key))
	return nil
}

// ScanHomes walks the stored homes in id order with a bbolt cursor, from
// the first id after after.
func (b *Store) ScanHomes(ctx context.Context, after string, fn func(registry.Home) bool) error {
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketHomes).Cursor()
		k, raw := c.First()
		if after != "" {
			k, raw = c.Seek([]byte(after))
			if k != nil && bytes.Equal(k, []byte(after)) {
				k, raw = c.Next()
			}
		}
		for ; k != nil; k, raw = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			var h registry.Home
			if err := registry.Decode(raw, &h); err != nil {
				return fmt.Errorf("decode stored home %s: %w", k, err)
			}
			if !fn(h) {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("registry: scan homes: %w", err)
	}
	return nil
}

var _ registry.HomeScanner = (*Store)(nil)
