package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// testdata/redis-v1.json holds the records of a Redis store of format 1
// (the same gateway's as the bbolt fixtures): hash name (without the
// prefix) -> field -> record. A change of the format that this wakegate
// cannot read, or that writes records differently without a new
// RedisSchema, fails here.

// loadRedisFixture writes the fixture's hashes under prefix on srv, with
// no format version (as a gateway from before versions left them), and
// returns a client of srv and the fixture.
func loadRedisFixture(t *testing.T, srv *registrytest.RedisServer, prefix string) (*goredis.Client, map[string]map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "redis-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx map[string]map[string]string
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for hash, fields := range fx {
		for f, v := range fields {
			if err := c.HSet(ctx, "{"+prefix+"}:"+hash, f, v).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c, fx
}

func TestRedisFixtureV1(t *testing.T) {
	srv := registrytest.StartRedis(t)
	c, fx := loadRedisFixture(t, srv, "fx")
	r := openTestRedis(t, srv, "fx", nil)
	ctx := context.Background()
	if v, err := c.Get(ctx, "{fx}:schema").Result(); err != nil || v != "1" {
		t.Fatalf("format version recorded at open: %q, %v; want 1", v, err)
	}
	hs, err := r.ListHomes(ctx)
	if err != nil || len(hs) != 2 || hs[0].ID != "cfg" || hs[1].ID != "dyn" {
		t.Fatalf("homes %+v, %v", hs, err)
	}
	if dyn := hs[1]; dyn.Target != "dt" || !dyn.Dynamic || dyn.IdleTimeout != 90*time.Second || !slices.Contains(dyn.Settings.Command, "http.server") {
		t.Fatalf("home dyn: %+v", dyn)
	}
	if apps, err := r.ListApps(ctx); err != nil || len(apps) != 1 || apps[0].Slug != "files" {
		t.Fatalf("apps %+v, %v", apps, err)
	}
	if tg, err := r.GetTarget(ctx); err != nil || tg.Version != "2" {
		t.Fatalf("target %+v, %v", tg, err)
	}
	if cl, err := r.GetClaim(ctx, "dt"); err != nil || cl.Home != "dyn" {
		t.Fatalf("claim dt %+v, %v", cl, err)
	}
	// Each record, decoded and encoded again by this wakegate, is the
	// bytes stored.
	decode := map[string]func(string) (any, error){
		"homes":  func(s string) (any, error) { var v registry.Home; err := json.Unmarshal([]byte(s), &v); return v, err },
		"apps":   func(s string) (any, error) { var v registry.App; err := json.Unmarshal([]byte(s), &v); return v, err },
		"claims": func(s string) (any, error) { var v registry.Claim; err := json.Unmarshal([]byte(s), &v); return v, err },
		"target": func(s string) (any, error) {
			var v registry.Target
			err := json.Unmarshal([]byte(s), &v)
			return v, err
		},
	}
	for hash, fields := range fx {
		for f, stored := range fields {
			v, err := decode[hash](stored)
			if err != nil {
				t.Fatalf("%s/%s: %v", hash, f, err)
			}
			if again, _ := json.Marshal(v); string(again) != stored {
				t.Errorf("%s/%s is written differently now:\nstored %s\nnow    %s", hash, f, stored, again)
			}
		}
	}
}

func TestRedisNewerFormatIsRefused(t *testing.T) {
	srv := registrytest.StartRedis(t)
	c, _ := loadRedisFixture(t, srv, "fx")
	ctx := context.Background()
	if err := c.Set(ctx, "{fx}:schema", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r, err := redis.Open(octx, redis.Options{URL: srv.URL(), Prefix: "fx"})
	if err == nil {
		_ = r.Close()
		t.Fatal("opened a store of a newer format")
	}
	if !errors.Is(err, redis.ErrNewerSchema) || !strings.Contains(err.Error(), "format version 2") || !strings.Contains(err.Error(), "version 1") {
		t.Fatalf("open: %v; want it refused naming versions 2 and 1", err)
	}
	if v, _ := c.Get(ctx, "{fx}:schema").Result(); v != "2" {
		t.Fatalf("the refused store's version became %q", v)
	}
}
