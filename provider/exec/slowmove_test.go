package execprov

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
)

// Where a start moves its home into cgroup v1 hierarchies, a move that
// made the start wait is logged once, with its cause and the fixes; the
// threshold is lowered to nothing here, so that every move counts.
func TestSlowMoveIntoCgroupsV1IsToldOnce(t *testing.T) {
	cfg := testConfig(testDataDir(t))
	var logs testbin.LogBuffer
	e, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if !e.limits.V1() {
		t.Skip("the homes enter no cgroup v1 hierarchy here")
	}
	old := slowMove
	slowMove = 0
	defer func() { slowMove = old }()
	for _, id := range []string{"h1", "h2"} {
		s := provider.Spec{ID: id, Version: "v1"}
		wake(t, e, s)
		t.Cleanup(func() {
			if _, err := e.Stop(context.Background(), s); err != nil {
				t.Errorf("stop %s: %v", s.ID, err)
			}
		})
	}
	out := logs.String()
	if n := strings.Count(out, "made its start wait"); n != 1 {
		t.Fatalf("%d lines say that a move made a start wait, want 1:\n%s", n, out)
	}
	for _, want := range []string{"home=h1", "favordynmods", "rcu_expedited", "grace period of RCU"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
}
