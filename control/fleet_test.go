package control

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// TestFleetPeersOverRedis puts two gateways' fleets on one real Redis
// kept without persistence: each says that Redis keeps nothing across a
// restart; a gateway is alive to the other from its first heartbeat on
// (the heartbeat a gateway sends before it serves); and a question to
// the runner of a home reaches the other gateway's engine, whose answer
// comes back (here: it runs no such home).
func TestFleetPeersOverRedis(t *testing.T) {
	srv := registrytest.StartVolatileRedis(t)
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := all.Load("fleet.yaml", []byte("listen: \"127.0.0.1:0\"\ndata_dir: /nonexistent\n"))
	if err != nil {
		t.Fatal(err)
	}
	join := func(instance string) *Fleet[Route] {
		r, err := redis.Open(ctx, redis.Options{URL: srv.URL(), Instance: instance})
		if err != nil {
			t.Fatalf("open redis as %s: %v", instance, err)
		}
		t.Cleanup(func() { _ = r.Close() })
		f := NewFleet[Route](ctx, FleetOptions{Store: r, Instance: instance, StopGrace: time.Second,
			IdleTick: time.Second, Log: log})
		e := wake.New(wake.Options{Store: r, Sessions: sessions.New(), Instance: instance, Log: log})
		t.Cleanup(e.Close)
		f.Attach(e, NewRegistrar(Deps[Route]{Engine: e, Store: r, Log: log}, cfg))
		return f
	}
	a, b := join("a"), join("b")

	for name, f := range map[string]*Fleet[Route]{"a": a, "b": b} {
		if w := strings.Join(f.Warnings(), "\n"); !strings.Contains(w, "keeps nothing across its own restart") {
			t.Errorf("%s: no warning about a Redis without persistence: %q", name, w)
		}
	}

	peers := a.Peers()
	if alive, err := peers.Alive(ctx, "a"); err != nil || !alive {
		t.Fatalf("a is not alive to itself: %v, %v", alive, err)
	}
	if alive, err := peers.Alive(ctx, "b"); err != nil || alive {
		t.Fatalf("b alive before its first heartbeat: %v, %v", alive, err)
	}
	b.Heartbeat(ctx)
	// One reading of the live gateways serves for peersLiveFor: nothing
	// tells when a's next reading comes, so ask until it has.
	testbin.Eventually(t, "b alive to a after its heartbeat", func() bool {
		alive, err := peers.Alive(ctx, "b")
		if err != nil {
			t.Fatalf("alive: %v", err)
		}
		return alive
	})

	_, proven, err := peers.Stop(ctx, "b", provider.Spec{ID: "ghost"}, false)
	if err == nil || proven {
		t.Fatalf("a stop of a home b does not run: proven %v, err %v", proven, err)
	}
	if !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("the answer is not b's engine's: %v", err)
	}
}
