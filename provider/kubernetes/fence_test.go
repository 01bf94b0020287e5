package kubernetes_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/kubernetes"
)

// TestFenceOneWriteWithoutStore: two providers as two users, with no
// store to agree through, wake one cold Deployment from 20 goroutines at
// once: the fence lets exactly one replicas write through (every other
// writer's read was stale: 409, a fresh read finds 1 replica), one
// container starts, and each wake gets the one pod.
func TestFenceOneWriteWithoutStore(t *testing.T) {
	r := newRig(t)
	r.bindRole(t, "wakegate-2", "wakegate-2", deployRules(t))
	r.deployment(t, "web", demoV1, nil)
	var logs testbin.LogBuffer
	var ps []*kubernetes.Provider
	for i, user := range []string{"wakegate", "wakegate-2"} {
		p, err := kubernetes.New(kubernetes.Config{Kubeconfig: r.c.Kubeconfig(t, r.c.Token(user)), Namespace: r.ns,
			Owner: []string{"gw1", "gw2"}[i]}, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		ps = append(ps, p)
	}
	opts, _ := json.Marshal(kubernetes.HomeOptions{Name: "web"})
	spec := provider.Spec{ID: "web", Target: "web", Options: opts}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	eps := make([]string, 20)
	errs := make([]error, 20)
	for i := range eps {
		wg.Go(func() {
			res, err := ps[i%2].Wake(ctx, spec)
			eps[i], errs[i] = res.Endpoint, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("wake %d: %v", i, err)
		}
		if eps[i] != eps[0] {
			t.Fatalf("wake %d reached %s, wake 0 %s", i, eps[i], eps[0])
		}
	}
	if n := strings.Count(logs.String(), "kubernetes: scaled"); n != 1 {
		t.Fatalf("%d replicas writes, want 1\n%s", n, logs.String())
	}
	if g := r.workload(t, "web").Metadata.Annotations["wakegate.io/generation"]; g != "1" {
		t.Fatalf("generation %q, want 1", g)
	}
	if n := r.starts(); n != 1 {
		t.Fatalf("%d container starts, want 1", n)
	}
	proven, err := ps[1].Stop(ctx, spec)
	if err != nil || !proven {
		t.Fatalf("stop: proven %v, %v", proven, err)
	}
	if pods := r.pods(t); len(pods) != 0 {
		t.Fatalf("pods after a proven stop: %v", pods)
	}
}
