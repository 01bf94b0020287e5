package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
)

// storeFile is the embedded store's file inside a gateway's data_dir
// (control.StoreFile).
const storeFile = "state.db"

// seed gives the large gateway n homes h000000.. registered through the
// admin API, the quick way: one is registered through the API, then the
// gateway stops, and the store receives n-1 copies of that home's record
// and target claim in one transaction (bolt.Store.SeedHomes) before the
// gateway starts again on it. The records are what n registrations would
// have stored; what registration through the API costs is then not
// measured (-seed=false measures it).
func seed(ctx context.Context, o options, g *gw, n int) error {
	const first = "h000000"
	body := []byte(`{"provider":"exec","idle_timeout":"1h","probe":"http"}`)
	code, b, err := g.adminDo(ctx, http.MethodPut, "/admin/homes/"+first, body)
	if err != nil || (code != http.StatusCreated && code != http.StatusOK) {
		return fmt.Errorf("register %s: %d %v %s", first, code, err, b)
	}
	g.stop()
	s, err := bolt.Open(filepath.Join(filepath.Dir(g.cfg), "data", storeFile), bolt.Options{})
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	defer s.Close()
	rec, err := s.GetHome(ctx, first)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	claim, err := s.GetClaim(ctx, rec.Target)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	homes := make([]registry.Home, 0, n)
	claims := make([]registry.Claim, 0, n)
	for i := 1; i < n; i++ {
		h, c := rec, claim
		h.ID = fmt.Sprintf("h%06d", i)
		h.Target, c.Target, c.Home = h.ID, h.ID, h.ID
		homes, claims = append(homes, h), append(claims, c)
	}
	if err := s.SeedHomes(ctx, homes, claims); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if _, err := g.start(ctx, o.dir); err != nil {
		return err
	}
	return wakeAll(ctx, g, o.awake, 64)
}
