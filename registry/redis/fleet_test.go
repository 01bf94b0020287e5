package redis_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// openInstance opens a store on srv under prefix for gateway instance.
func openInstance(t *testing.T, srv *registrytest.RedisServer, prefix, instance string) *redis.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := redis.Open(ctx, redis.Options{URL: srv.URL(), Prefix: prefix, Instance: instance})
	if err != nil {
		t.Fatalf("open redis store: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestRedisEpochChangesWhenTheDataIsLost(t *testing.T) {
	srv := registrytest.StartVolatileRedis(t)
	a := openInstance(t, srv, "epoch", "gw-a")
	b := openInstance(t, srv, "epoch", "gw-b")
	ctx := context.Background()
	ea, err := a.Epoch(ctx)
	if err != nil || ea == "" {
		t.Fatalf("epoch: %q %v", ea, err)
	}
	if eb, err := b.Epoch(ctx); err != nil || eb != ea {
		t.Fatalf("epoch read by another instance: %q %v, want %q", eb, err, ea)
	}
	p, err := a.Persistence(ctx)
	if err != nil || !p.Known || p.Keeps() {
		t.Fatalf("persistence of a server with neither AOF nor snapshots: %+v %v, want known and keeping nothing", p, err)
	}
	srv.Kill()
	srv.Restart()
	// The client reconnects on its own time: ask until it has.
	var again string
	testbin.Eventually(t, "the epoch of the restarted server", func() bool {
		again, err = b.Epoch(ctx)
		return err == nil
	})
	if err != nil || again == "" || again == ea {
		t.Fatalf("epoch after the server came back empty: %q %v, want a new one (was %q)", again, err, ea)
	}
	if ea2, err := a.Epoch(ctx); err != nil || ea2 != again {
		t.Fatalf("epoch read by the first instance: %q %v, want %q", ea2, err, again)
	}
	// The new epoch brings the format version back with it.
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer func() { _ = c.Close() }()
	if v, err := c.Get(ctx, "{epoch}:schema").Result(); err != nil || v != strconv.Itoa(redis.Schema) {
		t.Fatalf("format version after the server came back empty: %q %v, want %d", v, err, redis.Schema)
	}
}

func TestRedisPersistenceWithAOF(t *testing.T) {
	srv := registrytest.StartRedis(t)
	r := openInstance(t, srv, "persist", "gw-a")
	p, err := r.Persistence(context.Background())
	if err != nil || !p.Known || !p.AOF || !p.Keeps() {
		t.Fatalf("persistence of a server with an append-only file: %+v %v", p, err)
	}
}

func TestRedisAskIsAnsweredByTheInstanceAsked(t *testing.T) {
	srv := registrytest.StartRedis(t)
	a := openInstance(t, srv, "ask", "gw-a")
	b := openInstance(t, srv, "ask", "gw-b")
	c := openInstance(t, srv, "ask", "gw-c")
	b.OnAsked(func(_ context.Context, from, body string) string { return "b answers " + from + ": " + body })
	c.OnAsked(func(_ context.Context, from, body string) string { return "c must not answer" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := a.Ask(ctx, "gw-b", "stop h1")
	if err != nil || got != "b answers gw-a: stop h1" {
		t.Fatalf("ask gw-b: %q %v", got, err)
	}
	// Nobody answers for an instance that is not there: the wait ends
	// with the context.
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if got, err := a.Ask(short, "gw-gone", "stop h1"); !errors.Is(err, registry.ErrNoAnswer) {
		t.Fatalf("ask an instance that is not there: %q %v, want ErrNoAnswer", got, err)
	}
}
