package bolt

import (
	"context"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// SeedHomes stores homes and the claims on their targets in one write
// transaction, each created afresh (generation 1): what registering them
// one by one would store, minus one transaction per record. It is for
// benchmarks and tests that need a store holding many homes (the scale
// benchmark's 100,000), and refuses to replace a record that exists.
func (b *Store) SeedHomes(ctx context.Context, homes []registry.Home, claims []registry.Claim) error {
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		hb := tx.Bucket(bucketHomes)
		cb, err := tx.CreateBucketIfNotExists(bucketClaims)
		if err != nil {
			return err
		}
		for _, h := range homes {
			if err := h.Validate(); err != nil {
				return fmt.Errorf("home %s: %w", h.ID, err)
			}
			h.Generation = 1
			if err := seedPut(hb, h.ID, h); err != nil {
				return err
			}
		}
		for _, c := range claims {
			c.Generation = 1
			if err := seedPut(cb, c.Target, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("registry: seed homes: %w", err)
	}
	return nil
}

// seedPut creates the record key in bucket, refusing one that exists.
func seedPut(bucket *bbolt.Bucket, key string, v any) error {
	if bucket.Get([]byte(key)) != nil {
		return fmt.Errorf("%s: %w", key, registry.ErrConflict)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return bucket.Put([]byte(key), raw)
}
