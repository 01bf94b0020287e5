package wake_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// wakeHookProvider is the static provider with a hook that runs while the
// provider is waking the home, before it answers with the process ref.
type wakeHookProvider struct {
	*provider.Static
	ref    string
	during func()
}

func (p *wakeHookProvider) Wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	p.during()
	r, err := p.Static.Wake(ctx, s)
	r.Ref = p.ref
	return r, err
}

// A provider's give-up that arrives while a new wake is starting the home
// ends that wake only when it is about the process the wake started (or
// names no process). One about an older process (the supervisor gave up
// on it just before an operator started the home again) is stale and must
// not fail the new wake.
func TestWakeIgnoresGiveUpAboutAnOlderProcess(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(up.Close)
	tests := []struct {
		name    string
		gaveUp  string // Ref of the process the give-up is about
		wantErr bool
	}{
		{"about an older process", `{"pid":1}`, false},
		{"about the process the wake started", `{"pid":2}`, true},
		{"naming no process", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eng *wake.Engine
			prov := &wakeHookProvider{Static: &provider.Static{Endpoints: map[string]string{"h1": up.URL}}, ref: `{"pid":2}`}
			prov.during = func() {
				eng.ProviderChanged("h1", provider.Result{State: provider.StateFailed, Reason: "exit status 3", Ref: tt.gaveUp})
			}
			var store registry.Store
			eng, store = giveUpEngine(t, prov)
			ctx := context.Background()
			_, err := eng.EnsureAwake(ctx, "h1")
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("a give-up about an older process failed the wake: %v", err)
				}
				rec, gerr := store.GetHome(ctx, "h1")
				if gerr != nil || rec.Status != registry.StatusRunning {
					t.Fatalf("record %+v, %v: want running", rec, gerr)
				}
				return
			}
			if fe, ok := fault.As(err); !ok || fe.Code != homefault.CodeHomeFailed {
				t.Fatalf("wake: %v, want home_failed", err)
			}
		})
	}
}

// failingWakeProvider gives up on the process it started and then fails
// its wake: a container that exited as soon as it was started.
type failingWakeProvider struct {
	*provider.Static
	eng **wake.Engine
}

func (p *failingWakeProvider) Wake(context.Context, provider.Spec) (provider.Result, error) {
	(*p.eng).ProviderChanged("h1", provider.Result{State: provider.StateFailed, Reason: "exited with code 2", Ref: "c1"})
	return provider.Result{}, &provider.Error{Op: "wake", Reason: "exited", Err: errors.New("container c1 exited with code 2")}
}

// A give-up that arrives while the provider's wake runs, about the process
// that wake started and then failed on (it exited at once), is the wake's
// outcome: callers get home_failed and the record says failed with the
// provider's reason, as when the give-up comes during the probe.
func TestWakeFailureAfterGiveUpIsTheGiveUp(t *testing.T) {
	var eng *wake.Engine
	prov := &failingWakeProvider{Static: &provider.Static{}, eng: &eng}
	eng, store := giveUpEngine(t, prov)
	ctx := context.Background()
	_, err := eng.EnsureAwake(ctx, "h1")
	if fe, ok := fault.As(err); !ok || fe.Code != homefault.CodeHomeFailed {
		t.Fatalf("wake: %v, want home_failed", err)
	}
	// Callers are answered before the half-woken home's stop has written
	// its outcome: the record passes through suspending on its way there.
	var rec registry.Home
	testbin.Eventually(t, "the record to say failed", func() bool {
		rec, err = store.GetHome(ctx, "h1")
		return err == nil && rec.Status != registry.StatusSuspending
	})
	if rec.Status != registry.StatusFailed || rec.Reason != "exited with code 2" {
		t.Fatalf("record %+v: want failed with the provider's reason", rec)
	}
}

// giveUpEngine is an engine on a fresh store (returned too) whose one
// home, h1 (target alice), is run by prov, with a TCP probe and a
// one-second backoff.
func giveUpEngine(t *testing.T, prov provider.Provider) (*wake.Engine, registry.Store) {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	eng := wake.New(wake.Options{
		Store: store, Providers: map[string]provider.Provider{"static": prov},
		Sessions: sessions.New(), Instance: "giveup",
		WarmTTL: time.Hour, ReadyTimeout: 10 * time.Second, RetryAfter: time.Second,
		MaxConcurrent: 1, FailureBackoff: time.Second, FailureBackoffMax: time.Second,
		Probe: probe.Spec{Kind: probe.TCP}, RelayHeader: "X-Wakegate-Relay",
		Log: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(eng.Close)
	if err := eng.Register(context.Background(), homes.Spec{ID: "h1", Target: "alice", Provider: "static"}); err != nil {
		t.Fatal(err)
	}
	return eng, store
}
