package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// bucketApps holds the apps registered at runtime: slug -> JSON registry.App.
var bucketApps = []byte("apps")

// bucketAppStates holds the operators' desired states: slug -> JSON registry.AppState.
var bucketAppStates = []byte("appstates")

// bucketClaims holds the target index: target -> JSON registry.Claim. It is
// created by the first write of a claim, so that a store written before
// the index existed opens unchanged.
var bucketClaims = []byte("claims")

// GetApp returns one stored app by slug.
func (b *Store) GetApp(ctx context.Context, slug string) (registry.App, error) {
	return boltGet[registry.App](ctx, b, bucketApps, "app", slug)
}

// ListApps returns every stored app, ordered by slug.
func (b *Store) ListApps(ctx context.Context) ([]registry.App, error) {
	return boltList[registry.App](ctx, b, bucketApps, "apps")
}

// PutApp writes a if the stored record matches cond. The record written and
// returned has Generation cond.Generation+1 and Owner a.Owner. An app needs
// a non-empty Slug.
func (b *Store) PutApp(ctx context.Context, a registry.App, cond registry.Cond) (registry.App, error) {
	if a.Slug == "" {
		return registry.App{}, errors.New("registry: put app: slug is empty")
	}
	return boltPut(ctx, b, bucketApps, "app", a.Slug, cond, a, func(a *registry.App, gen uint64) { a.Generation = gen })
}

// DeleteApp removes an app if the stored record matches cond; registry.ErrNotFound
// when there is none. A cond with Generation 0 never matches a stored app.
func (b *Store) DeleteApp(ctx context.Context, slug string, cond registry.Cond) error {
	return boltDelete[registry.App](ctx, b, bucketApps, "app", slug, cond)
}

// GetAppState returns the desired state stored for slug.
func (b *Store) GetAppState(ctx context.Context, slug string) (registry.AppState, error) {
	return boltGet[registry.AppState](ctx, b, bucketAppStates, "appstate", slug)
}

// ListAppStates returns every stored desired state, ordered by slug.
func (b *Store) ListAppStates(ctx context.Context) ([]registry.AppState, error) {
	return boltList[registry.AppState](ctx, b, bucketAppStates, "appstates")
}

// PutAppState writes s if the stored record matches cond.
func (b *Store) PutAppState(ctx context.Context, s registry.AppState, cond registry.Cond) (registry.AppState, error) {
	if err := s.Validate(); err != nil {
		return registry.AppState{}, fmt.Errorf("registry: put app state %s: %w", s.Slug, err)
	}
	return boltPut(ctx, b, bucketAppStates, "appstate", s.Slug, cond, s, func(s *registry.AppState, gen uint64) { s.Generation = gen })
}

// GetClaim returns the claim on target.
func (b *Store) GetClaim(ctx context.Context, target string) (registry.Claim, error) {
	var c registry.Claim
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketClaims) == nil {
			return registry.ErrNotFound
		}
		var found bool
		var err error
		c, found, err = boltDecode[registry.Claim](tx, bucketClaims, "claim", target)
		if err == nil && !found {
			err = registry.ErrNotFound
		}
		return err
	})
	if err != nil {
		return registry.Claim{}, fmt.Errorf("registry: get claim %s: %w", target, err)
	}
	return c, nil
}

// ListClaims returns every claim, ordered by target.
func (b *Store) ListClaims(ctx context.Context) ([]registry.Claim, error) {
	out := []registry.Claim{}
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		bucket := tx.Bucket(bucketClaims)
		if bucket == nil {
			return nil
		}
		return bucket.ForEach(func(k, raw []byte) error {
			var c registry.Claim
			if err := registry.Decode(raw, &c); err != nil {
				return fmt.Errorf("decode stored claim %s: %w", k, err)
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("registry: list claims: %w", err)
	}
	return out, nil
}

// PutClaim writes c if the stored claim on c.Target matches cond. The
// record written and returned has Generation cond.Generation+1 and Owner
// c.Owner. A claim needs a non-empty Target and Home.
func (b *Store) PutClaim(ctx context.Context, c registry.Claim, cond registry.Cond) (registry.Claim, error) {
	if c.Target == "" || c.Home == "" {
		return registry.Claim{}, fmt.Errorf("registry: put claim %q: target and home are required", c.Target)
	}
	if err := b.ensureClaims(ctx); err != nil {
		return registry.Claim{}, err
	}
	return boltPut(ctx, b, bucketClaims, "claim", c.Target, cond, c, func(c *registry.Claim, gen uint64) { c.Generation = gen })
}

// DeleteClaim removes the claim on target if it matches cond; registry.ErrNotFound
// when there is none. A cond with Generation 0 never matches a stored
// claim.
func (b *Store) DeleteClaim(ctx context.Context, target string, cond registry.Cond) error {
	if err := b.ensureClaims(ctx); err != nil {
		return err
	}
	return boltDelete[registry.Claim](ctx, b, bucketClaims, "claim", target, cond)
}

// ensureClaims creates the claims bucket when it does not exist yet.
func (b *Store) ensureClaims(ctx context.Context) error {
	var exists bool
	if err := b.view(ctx, func(tx *bbolt.Tx) error { exists = tx.Bucket(bucketClaims) != nil; return nil }); err != nil {
		return fmt.Errorf("registry: claims: %w", err)
	}
	if exists {
		return nil
	}
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketClaims)
		return err
	})
	if err != nil {
		return fmt.Errorf("registry: create the claims index: %w", err)
	}
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
