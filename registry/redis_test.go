package registry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// openTestRedis opens a Redis store on srv under a prefix of its own (an
// empty store), closed when t ends.
func openTestRedis(t *testing.T, srv *registrytest.RedisServer, prefix string, now func() time.Time) *registry.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := registry.OpenRedis(ctx, registry.RedisOptions{URL: srv.URL(), Prefix: prefix, Now: now})
	if err != nil {
		t.Fatalf("open redis store: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r
}

func TestRedisConformance(t *testing.T) {
	srv := registrytest.StartRedis(t)
	var n atomic.Int64
	registrytest.Run(t, func(t *testing.T) (registry.Store, func(time.Duration)) {
		clk := registrytest.NewClock()
		return openTestRedis(t, srv, fmt.Sprintf("conf-%d", n.Add(1)), clk.Now), clk.Advance
	})
}

func TestRedisUnavailable(t *testing.T) {
	registrytest.RunUnavailable(t, func(t *testing.T) (registry.Store, func(), func()) {
		srv := registrytest.StartRedis(t)
		r := openTestRedis(t, srv, "wakegate", nil)
		return r, srv.Kill, srv.Restart
	})
}
