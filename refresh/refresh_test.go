package refresh

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// statusOnly is a provider that only answers Status.
type statusOnly struct {
	provider.Provider
	res provider.Result
}

func (p statusOnly) Status(context.Context, provider.Spec) (provider.Result, error) {
	return p.res, nil
}

// fakeHeld is a home held for a refresh, in memory.
type fakeHeld struct {
	rec    registry.Home
	prov   provider.Provider
	warm   bool
	failed string
	saves  int
}

func (h *fakeHeld) ID() string            { return h.rec.ID }
func (h *fakeHeld) Record() registry.Home { return h.rec }
func (h *fakeHeld) MayRun() bool          { return h.rec.Status == registry.StatusRunning }
func (h *fakeHeld) Touch()                {}
func (h *fakeHeld) SetFailed(r string)    { h.failed = r }
func (h *fakeHeld) RunnerElsewhere(context.Context) (string, error) {
	return "", nil
}

func (h *fakeHeld) Provider() (provider.Provider, provider.Spec, error) {
	return h.prov, provider.Spec{ID: h.rec.ID}, nil
}

func (h *fakeHeld) DropVerdict() bool {
	had := h.warm
	h.warm = false
	return had
}

func (h *fakeHeld) Save(_ context.Context, change func(*registry.Home)) error {
	h.saves++
	change(&h.rec)
	return nil
}

// fakeHomes holds one home.
type fakeHomes struct{ h *fakeHeld }

func (f fakeHomes) Hold(ctx context.Context, _ string, fn func(context.Context, Held) error) error {
	return fn(ctx, f.h)
}

type noCount struct{}

func (noCount) Refreshed(string) {}

// TestRefreshFollowsProvider: a running record whose provider says the home
// failed is recorded failed, its verdict dropped; a sleeping record whose
// provider says running is recorded running, with no verdict granted.
func TestRefreshFollowsProvider(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name    string
		before  registry.Status
		warm    bool
		said    provider.Result
		after   registry.Status
		changed []string
	}{
		{"failed", registry.StatusRunning, true, provider.Result{State: provider.StateFailed, Reason: "gone"},
			registry.StatusFailed, []string{ChangedVerdict, ChangedStatus}},
		{"running", registry.StatusSuspended, false, provider.Result{State: provider.StateRunning, Endpoint: "http://127.0.0.1:1"},
			registry.StatusRunning, []string{ChangedStatus, ChangedEndpoint}},
		{"agrees", registry.StatusRunning, true, provider.Result{State: provider.StateRunning},
			registry.StatusRunning, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &fakeHeld{rec: registry.Home{ID: "h1", Status: c.before}, warm: c.warm, prov: statusOnly{res: c.said}}
			r := &Refresher{Homes: fakeHomes{h}, Metrics: noCount{}, Log: log}
			res, err := r.Refresh(context.Background(), "h1", "admin")
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(res.Changed)
			slices.Sort(c.changed)
			if res.After != c.after || h.rec.Status != c.after || !slices.Equal(res.Changed, c.changed) || res.Message == "" {
				t.Fatalf("result %+v, record %s; want after %s, changed %v", res, h.rec.Status, c.after, c.changed)
			}
			if c.after == registry.StatusRunning && h.rec.Verdict != registry.VerdictNone && h.saves > 0 {
				t.Fatalf("a refresh granted verdict %q", h.rec.Verdict)
			}
			if c.after == registry.StatusFailed && h.failed != "gone" {
				t.Fatalf("failed reason %q, want the provider's", h.failed)
			}
		})
	}
}
