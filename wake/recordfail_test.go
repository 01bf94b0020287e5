package wake_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/demohome"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	execprov "github.com/wakegate/wakegate/provider/exec"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// Record writes that fail during a wake, as on a full disk: the wake stops
// what it started (or its write succeeds on a retry within its deadline),
// leaves no record saying "waking", and a restart starts no second process.

// failingStore wraps the real bolt store and fails the home writes that
// fail chooses with ENOSPC, as a full disk does.
type failingStore struct {
	registry.Store
	mu     sync.Mutex
	fail   func(h registry.Home) bool // nil: every write goes through
	failed int                        // writes failed so far
}

func (s *failingStore) PutHome(ctx context.Context, h registry.Home, cond registry.Cond) (registry.Home, error) {
	s.mu.Lock()
	fail := s.fail != nil && s.fail(h)
	if fail {
		s.failed++
	}
	s.mu.Unlock()
	if fail {
		return registry.Home{}, fmt.Errorf("registry: put home %s: %w", h.ID,
			&os.PathError{Op: "write", Path: "state.db", Err: syscall.ENOSPC})
	}
	return s.Store.PutHome(ctx, h, cond)
}

// failures returns how many writes failed so far.
func (s *failingStore) failures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// frig is a real engine over a failing store: a bbolt file in a temp dir,
// the exec provider running demo homes, one home h1.
type frig struct {
	t     *testing.T
	data  string
	bolt  *bolt.Store
	store *failingStore
	exec  *execprov.Provider
	eng   *wake.Engine
	logs  *testbin.LogBuffer
}

func newFrig(t *testing.T, fail func(registry.Home) bool) *frig {
	t.Helper()
	r := &frig{t: t, data: t.TempDir(), logs: &testbin.LogBuffer{}}
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		r.close()
		// No retry loop, stop or timer of a wake outlives the engine.
		if err := goleak.Find(before); err != nil {
			t.Error(err)
		}
		testbin.KillHomes(r.data)
		if t.Failed() {
			t.Logf("log:\n%s", r.logs)
		}
	})
	r.start(fail)
	return r
}

// start opens the store and starts a provider and an engine over it, as a
// gateway start does, registering (and so adopting) the home.
func (r *frig) start(fail func(registry.Home) bool) {
	t := r.t
	t.Helper()
	var err error
	if r.bolt, err = bolt.Open(filepath.Join(r.data, "state.db"), bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	r.store = &failingStore{Store: r.bolt, fail: fail}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r.exec, err = execprov.New(execprov.Config{
		Command: []string{testbin.Build(t), "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}",
			"--version", "{version}", "--boot-delay", "200ms"},
		DataDir: r.data, StopGrace: 2 * time.Second,
		OnChange: func(id string, res provider.Result) {
			if r.eng != nil {
				r.eng.ProviderChanged(id, res)
			}
		},
	}, log.With("provider", "exec"))
	if err != nil {
		t.Fatal(err)
	}
	r.eng = wake.New(wake.Options{
		Store: r.store, Providers: map[string]provider.Provider{"exec": r.exec},
		Sessions: sessions.New(), Instance: "test",
		WarmTTL: time.Minute, ReadyTimeout: 3 * time.Second, RetryAfter: time.Second,
		MaxConcurrent: 4, FailureBackoff: 10 * time.Millisecond,
		RelayHeader: demohome.RelayHeader, Log: log.With("component", "wake"),
	})
	if err := r.eng.Register(context.Background(), homes.Spec{ID: rigHome, Target: rigTarget,
		Provider: "exec", Version: "1", RelayToken: rigToken}); err != nil {
		t.Fatal(err)
	}
}

// close stops the engine and the provider (their homes keep running, as
// after a crash) and closes the store.
func (r *frig) close() {
	if r.eng == nil {
		return
	}
	r.eng.Close()
	_ = r.exec.Close()
	_ = r.bolt.Close()
	r.eng = nil
}

// restart is a gateway restart on the same data, with a sound store.
func (r *frig) restart() {
	r.t.Helper()
	r.close()
	r.start(nil)
}

func (r *frig) pids() []int { return testbin.HomePIDs(r.t, filepath.Join(r.data, "homes", rigHome)) }

func (r *frig) record() registry.Home {
	r.t.Helper()
	h, err := r.bolt.GetHome(context.Background(), rigHome)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func (r *frig) ensure() (homes.Awake, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.eng.EnsureAwake(ctx, rigHome)
}

// failOnce fails the first write that match chooses, and no other.
func failOnce(match func(registry.Home) bool) func(registry.Home) bool {
	done := false
	return func(h registry.Home) bool {
		if done || !match(h) {
			return false
		}
		done = true
		return true
	}
}

func TestWakeRecordWriteFails(t *testing.T) {
	refWrite := func(h registry.Home) bool { return h.Status == registry.StatusWaking && h.ProviderRef != "" }
	readyWrite := func(h registry.Home) bool { return h.Status == registry.StatusRunning }
	cases := []struct {
		name string
		fail func(registry.Home) bool
		// ok: the wake succeeds (the write succeeded on a retry).
		ok bool
	}{
		{"the ref write fails for good", refWrite, false},
		{"the ready write fails for good", readyWrite, false},
		{"the ref write fails once", failOnce(refWrite), true},
		{"the ready write fails once", failOnce(readyWrite), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newFrig(t, tc.fail)
			_, err := r.ensure()
			if r.store.failures() == 0 {
				t.Fatal("no write failed: the case tests nothing")
			}
			rec := r.record()
			if rec.Status == registry.StatusWaking {
				t.Fatalf("the record is left waking: %+v", rec)
			}
			if tc.ok {
				if err != nil || rec.Status != registry.StatusRunning || rec.ProviderRef == "" {
					t.Fatalf("wake with a write that succeeds on a retry: %v, record %+v", err, rec)
				}
				pids := r.pids()
				if len(pids) != 1 {
					t.Fatalf("home processes %v, want one", pids)
				}
				r.restart()
				if _, err := r.ensure(); err != nil {
					t.Fatalf("wake after the restart: %v", err)
				}
				if got := r.pids(); len(got) != 1 || got[0] != pids[0] {
					t.Fatalf("home processes after the restart %v, want %v adopted", got, pids)
				}
				return
			}
			if !fault.Is(err, fault.Failed) {
				t.Fatalf("wake: %v, want a failed wake", err)
			}
			st, serr := r.eng.HomeState(context.Background(), rigHome)
			if serr != nil || st.LastStop == nil || !st.LastStop.Proven {
				t.Fatalf("the wake did not report a proven stop: %+v %v (err %v)", st.LastStop, serr, err)
			}
			if pids := r.pids(); len(pids) != 0 {
				t.Fatalf("the failed wake left home processes %v", pids)
			}
			r.restart()
			if pids := r.pids(); len(pids) != 0 {
				t.Fatalf("the restart started home processes %v for a home that sleeps", pids)
			}
			if _, err := r.ensure(); err != nil {
				t.Fatalf("wake after the restart, with a sound store: %v", err)
			}
			if pids := r.pids(); len(pids) != 1 {
				t.Fatalf("home processes after the restart's wake %v, want one", pids)
			}
		})
	}
}

// A suspend of a home whose record says waking while no wake runs (the
// wake that wrote it could not record its outcome) stops the home; one
// that arrives during a wake is refused as busy, with the reason.
func TestSuspendOfWakingHome(t *testing.T) {
	t.Run("record left waking", func(t *testing.T) {
		r := newFrig(t, nil)
		if _, err := r.ensure(); err != nil {
			t.Fatal(err)
		}
		if _, err := registry.UpdateHome(context.Background(), r.bolt, registry.Home{ID: rigHome}, "test",
			func(h *registry.Home) { h.Status = registry.StatusWaking }); err != nil {
			t.Fatal(err)
		}
		if err := r.eng.Suspend(context.Background(), rigHome); err != nil {
			t.Fatalf("suspend: %v", err)
		}
		if pids := r.pids(); len(pids) != 0 {
			t.Fatalf("suspend answered success and left home processes %v", pids)
		}
		if rec := r.record(); rec.Status != registry.StatusSuspended || rec.WantRunning {
			t.Fatalf("record after the suspend: %+v", rec)
		}
	})
	t.Run("during a wake", func(t *testing.T) {
		gate := make(chan struct{})
		var once sync.Once
		// The ref write waits until the suspend has answered, so the wake
		// is in flight when it arrives.
		r := newFrig(t, func(h registry.Home) bool {
			if h.Status == registry.StatusWaking && h.ProviderRef != "" {
				<-gate
			}
			return false
		})
		done := make(chan error, 1)
		go func() {
			_, err := r.ensure()
			done <- err
		}()
		testbin.Eventually(t, "the wake to start", func() bool { _, _, ok := r.eng.Progress(rigHome); return ok })
		err := r.eng.Suspend(context.Background(), rigHome)
		once.Do(func() { close(gate) })
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Kind != fault.Busy {
			t.Fatalf("suspend during a wake: %v, want busy", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("the wake after a refused suspend: %v", err)
		}
		if rec := r.record(); rec.Status != registry.StatusRunning {
			t.Fatalf("record after the wake: %+v", rec)
		}
	})
}

// A home whose record was left waking or restoring (a gateway that died in
// the middle of a wake or a roll, or could not record its outcome) is
// adopted at the next start: its process is proven and kept, not a second
// one started, and the record says running.
func TestRestartAdoptsHomeLeftMidOperation(t *testing.T) {
	for _, st := range []registry.Status{registry.StatusWaking, registry.StatusRestoring} {
		t.Run(string(st), func(t *testing.T) {
			r := newFrig(t, nil)
			if _, err := r.ensure(); err != nil {
				t.Fatal(err)
			}
			pids := r.pids()
			if _, err := registry.UpdateHome(context.Background(), r.bolt, registry.Home{ID: rigHome}, "test",
				func(h *registry.Home) { h.Status = st }); err != nil {
				t.Fatal(err)
			}
			r.restart()
			testbin.Eventually(t, "the adoption to record the home running", func() bool {
				return r.record().Status == registry.StatusRunning
			})
			if got := r.pids(); len(got) != 1 || len(pids) != 1 || got[0] != pids[0] {
				t.Fatalf("home processes after the restart %v, want %v adopted", got, pids)
			}
		})
	}
}

// A suspend that did not finish (its record says suspending) is finished
// at the next start: the process it was stopping does not run on unwatched.
func TestRestartFinishesInterruptedSuspend(t *testing.T) {
	r := newFrig(t, nil)
	if _, err := r.ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.UpdateHome(context.Background(), r.bolt, registry.Home{ID: rigHome}, "test",
		func(h *registry.Home) { h.Status, h.WantRunning = registry.StatusSuspending, false }); err != nil {
		t.Fatal(err)
	}
	r.restart()
	testbin.Eventually(t, "the suspend to be finished", func() bool {
		return r.record().Status == registry.StatusSuspended
	})
	if pids := r.pids(); len(pids) != 0 {
		t.Fatalf("home processes %v after the interrupted suspend was finished", pids)
	}
}

// A suspend or a removal whose first write fails (a full disk refuses the
// stopping mark, or the stopped intent) has touched neither the home nor
// its record: the home stays warm, so its next request is forwarded at
// once instead of waking it again on a store that refuses the wake's own
// record.
func TestStopRefusedByTheStoreKeepsTheHomeWarm(t *testing.T) {
	for name, stop := range map[string]func(*wake.Engine) error{
		"suspend": func(e *wake.Engine) error { return e.Suspend(context.Background(), rigHome) },
		"remove":  func(e *wake.Engine) error { return e.Remove(context.Background(), rigHome, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			var refuse atomic.Bool
			r := newFrig(t, func(registry.Home) bool { return refuse.Load() })
			if _, err := r.ensure(); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.eng.WarmAwake(rigHome); !ok {
				t.Fatal("the home is not warm after its wake")
			}
			pids := r.pids()
			refuse.Store(true)
			if err := stop(r.eng); err == nil {
				t.Fatalf("%s succeeded on a store that refuses every write", name)
			}
			if _, ok := r.eng.WarmAwake(rigHome); !ok {
				t.Fatalf("a %s that wrote nothing left the home without its warm verdict", name)
			}
			if got := r.pids(); len(got) != 1 || len(pids) != 1 || got[0] != pids[0] {
				t.Fatalf("home processes %v after the refused %s, want %v", got, name, pids)
			}
			if rec := r.record(); rec.Status != registry.StatusRunning {
				t.Fatalf("record after the refused %s: %+v", name, rec)
			}
		})
	}
}

// The record saying waking is written while the exec provider prepares the
// start (its folders, socket, log and cgroup), and the process starts only
// once that write has landed: a refused write starts nothing, and a slow one
// holds the start back but not the preparations.
func TestWakingRecordGatesTheStart(t *testing.T) {
	waking := func(h registry.Home) bool { return h.Status == registry.StatusWaking && h.ProviderRef == "" }

	t.Run("refused", func(t *testing.T) {
		r := newFrig(t, waking)
		_, err := r.ensure()
		if r.store.failures() == 0 {
			t.Fatal("the waking write did not fail: the case tests nothing")
		}
		if err == nil {
			t.Fatal("the wake succeeded though its waking record was refused")
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("wake error %v, want the store's refusal (ENOSPC)", err)
		}
		if pids := r.pids(); len(pids) != 0 {
			t.Fatalf("home processes %v after a wake whose waking record was refused", pids)
		}
		if rec := r.record(); rec.Status == registry.StatusWaking || rec.WantRunning {
			t.Fatalf("record after the refused wake: %+v", rec)
		}
	})

	t.Run("slow", func(t *testing.T) {
		var r *frig
		var prepared, startedEarly atomic.Bool
		var logPath string
		r = newFrig(t, func(h registry.Home) bool {
			if !waking(h) {
				return false
			}
			// The write is held until the provider has opened the home's
			// log, which it does to prepare the start: with the write
			// first, that never happens here.
			for range 500 {
				if _, err := os.Stat(logPath); err == nil {
					prepared.Store(true)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			// A process started before the write would show by now.
			time.Sleep(200 * time.Millisecond)
			if len(r.pids()) != 0 {
				startedEarly.Store(true)
			}
			return false
		})
		files, err := r.exec.LogFiles(rigHome)
		if err != nil {
			t.Fatal(err)
		}
		logPath = files[1]
		if _, err := os.Stat(logPath); err == nil {
			t.Fatalf("the home's log %s is there before its first start: the case tests nothing", logPath)
		}
		if _, err := r.ensure(); err != nil {
			t.Fatal(err)
		}
		if !prepared.Load() {
			t.Error("the provider did not prepare the start while the waking record was written")
		}
		if startedEarly.Load() {
			t.Error("the home's process started before its waking record was written")
		}
		if pids := r.pids(); len(pids) != 1 {
			t.Fatalf("home processes %v after the wake, want one", pids)
		}
	})
}
