package fly_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/demohome"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	execprov "github.com/wakegate/wakegate/provider/exec"
	"github.com/wakegate/wakegate/provider/fly"
	"github.com/wakegate/wakegate/provider/fly/flyfake"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/rolls"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// world is one provider the engine scenarios run on, with what the
// scenarios need to ask of it.
type world struct {
	prov *counted
	// options are the home's provider options.
	options json.RawMessage
	// target returns the roll target of version; a lying target's home
	// reports another version than the one it was asked to run.
	target func(version string, lying bool) registry.Target
	// apiStarts counts the starts the provider's backend saw (fly: start
	// calls to the API); nil where the provider has no API.
	apiStarts func() int
	// stick keeps the home from ever becoming ready, and with wedge from
	// being stopped either; nil where the provider cannot be told so.
	stick func(wedge bool)
	// state is the machine's state as the API has it (fly only).
	state func() string
	// srv is the fake Machines API (fly only).
	srv *flyfake.Server
	// guest is the program inside the machine (fly only).
	guest *guest
	// health, when set, is what the engine's provider reports the home's
	// health checks with (health_test.go).
	health provider.HealthReporter
}

// worlds are the providers every engine scenario runs on.
var worlds = []struct {
	name string
	make func(t *testing.T) world
}{
	{"exec", execWorld},
	{"fly", flyWorld},
}

// counted counts the calls the engine makes to a provider.
type counted struct {
	provider.Provider
	wakes, recreates atomic.Int32
}

func (c *counted) Wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	c.wakes.Add(1)
	return c.Provider.Wake(ctx, s)
}

func (c *counted) Recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	c.recreates.Add(1)
	return c.Provider.Recreate(ctx, s)
}

func demoCommand(bin, version string) []string {
	return []string{bin, "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}", "--version", version}
}

// execWorld: homes as local processes (the reference the fly world must
// match).
func execWorld(t *testing.T) world {
	bin := testbin.Build(t)
	data := t.TempDir()
	p, err := execprov.New(execprov.Config{Command: demoCommand(bin, "{version}"), DataDir: data, StopGrace: 2 * time.Second, SuspendSignal: true},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Close()
		testbin.KillHomes(data)
	})
	return world{
		prov: &counted{Provider: p},
		target: func(v string, lying bool) registry.Target {
			run := v
			if lying {
				run = "2"
			}
			return registry.Target{Version: v, Command: demoCommand(bin, run)}
		},
	}
}

// flyWorld: homes as Fly Machines on the fake API, each machine fronting a
// real demo home on loopback that runs while the machine is started and
// reports the version of its image's tag (or a lie, for lying targets).
func flyWorld(t *testing.T) world { return flyWorldWith(t, flyfake.Options{}, nil) }

// flyWorldWith is flyWorld on a fake with options fo (OnState is the
// guest's) and a provider config changed by mut.
func flyWorldWith(t *testing.T, fo flyfake.Options, mut func(*fly.Config)) world {
	g := &guest{port: testbin.FreePort(t), lies: map[string]string{}}
	t.Cleanup(g.stop) // after the fake has closed: nothing starts it again
	fo.OnState = g.onState
	srv := flyfake.New(fo)
	t.Cleanup(srv.Close)
	srv.AddMachine(machine, flyfake.MachineSpec{State: "stopped", Image: "registry.fly.io/homes:1",
		Metadata: map[string]string{"wakegate_version": "1"}})
	tok := filepath.Join(t.TempDir(), "token")
	writeFile(t, tok, srv.Token())
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cfg := fly.Config{App: srv.App(), Token: "file:" + tok, BaseURL: srv.URL,
		Endpoint: "http://127.0.0.1:{port}", Image: "registry.fly.io/homes:{version}", VersionFrom: fly.VersionHTTP,
		StopTimeout: time.Second}
	if mut != nil {
		mut(&cfg)
	}
	p, err := fly.New(cfg, fly.Options{HTTPClient: &http.Client{Transport: tr}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return world{
		srv:     srv,
		guest:   g,
		prov:    &counted{Provider: p},
		options: json.RawMessage(fmt.Sprintf(`{"machine": %q, "port": %d}`, machine, g.port)),
		target: func(v string, lying bool) registry.Target {
			if lying {
				g.lie(v, "2")
			}
			return registry.Target{Version: v}
		},
		stick: func(wedge bool) {
			srv.Stick(machine, true)
			srv.Wedge(machine, wedge)
		},
		state: func() string {
			m, _ := srv.Machine(machine)
			return m.State
		},
		apiStarts: func() int {
			n := 0
			for _, c := range srv.Calls() {
				if c.Action == "start" {
					n++
				}
			}
			return n
		},
	}
}

// guest is the program inside the fake machine: a demo home on a fixed
// loopback port, run while the machine is started.
type guest struct {
	port    int
	mu      sync.Mutex
	lies    map[string]string // image tag -> the version the guest reports
	stopRun context.CancelFunc
	done    chan struct{}
}

func (g *guest) lie(tag, v string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lies[tag] = v
}

// onState follows the machine: started runs the guest, any other state but
// starting stops it (a suspended guest does not answer either).
func (g *guest) onState(m flyfake.Machine) {
	switch m.State {
	case "started":
		g.stop()
		tag := m.Image[strings.LastIndexByte(m.Image, ':')+1:]
		g.mu.Lock()
		v := tag
		if l, ok := g.lies[tag]; ok {
			v = l
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		g.stopRun, g.done = cancel, done
		g.mu.Unlock()
		go func() {
			defer close(done)
			_ = demohome.Run(ctx, demohome.Options{Addr: fmt.Sprintf("127.0.0.1:%d", g.port), Target: "alice", Version: v}, io.Discard)
		}()
	case "starting":
	default:
		g.stop()
	}
}

func (g *guest) stop() {
	g.mu.Lock()
	cancel, done := g.stopRun, g.done
	g.stopRun, g.done = nil, nil
	g.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// engineRig is a real engine (bbolt store, the proxy's session table) on a
// world's provider with home h1 at /node/alice on version 1.
type engineRig struct {
	t     *testing.T
	w     world
	store *bolt.Store
	sess  *sessions.Table
	eng   *wake.Engine
	bus   *events.Bus
}

// rigTimes are an engine rig's timings; zero fields: no idle suspend, no
// idle loop, a 10s ready timeout.
type rigTimes struct{ idle, tick, ready time.Duration }

func newEngineRig(t *testing.T, w world, tm rigTimes) *engineRig {
	t.Helper()
	r := &engineRig{t: t, w: w, sess: sessions.New(), bus: events.NewBus(64)}
	var err error
	if r.store, err = bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.store.Close() })
	r.start(tm)
	if tick := tm.tick; tick > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.eng.Run(ctx, tick)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	return r
}

// start starts an engine on the rig's store and provider and registers
// the home on it, as a gateway start does (a home whose record says it
// runs is adopted).
func (r *engineRig) start(tm rigTimes) {
	r.t.Helper()
	eng := wake.New(wake.Options{
		Store: r.store, Providers: map[string]provider.Provider{"p": r.w.engineProvider()}, Sessions: r.sess,
		Instance: "test", WarmTTL: time.Minute, ReadyTimeout: cmp.Or(tm.ready, 10*time.Second), RetryAfter: time.Second,
		MaxConcurrent: 4, FailureBackoff: 50 * time.Millisecond, RelayHeader: demohome.RelayHeader,
		Log: slog.New(slog.DiscardHandler), Events: r.bus,
		Roll: rolls.Options{Mode: rolls.Lazy, IdleAfter: time.Minute},
	})
	r.t.Cleanup(eng.Close)
	r.eng = eng
	if err := r.eng.Register(context.Background(), homes.Spec{ID: home, Target: "alice", Provider: "p",
		Version: "1", IdleTimeout: tm.idle, Settings: provider.Settings{Options: r.w.options}}); err != nil {
		r.t.Fatal(err)
	}
}

// request is what the gateway does for one request: count the session,
// then wait for the home.
func (r *engineRig) request() (string, error) {
	c := r.sess.Begin(home)
	defer r.sess.End(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := r.eng.EnsureAwake(ctx, home)
	if err != nil {
		return "", err
	}
	return a.Endpoint.String(), nil
}

// version asks the running home which version it runs.
func (r *engineRig) version() string {
	r.t.Helper()
	ep, err := r.request()
	if err != nil {
		r.t.Fatalf("wake: %v", err)
	}
	res, err := http.Get(ep + "/version")
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// suspend suspends the home, retrying while the lock of the wake that just
// answered is still held.
func (r *engineRig) suspend() {
	r.t.Helper()
	var err error
	testbin.Eventually(r.t, "suspend", func() bool {
		err = r.eng.Suspend(context.Background(), home)
		return err == nil || !fault.Is(err, fault.Busy)
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *engineRig) record() registry.Home {
	r.t.Helper()
	h, err := r.store.GetHome(context.Background(), home)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func (r *engineRig) events(prefix string) []string {
	var out []string
	for _, ev := range r.bus.Recent() {
		if ev.Home == home && strings.HasPrefix(ev.Type, prefix) {
			out = append(out, ev.Type+":"+ev.Version)
		}
	}
	return out
}

// TestEngineScenarios runs the engine's scenarios on every provider: one
// provider wake for many concurrent cold callers, a warm verdict that
// spares the provider, a roll asserted by the version the home reports
// with a rollback when it lies, and a suspend when the home goes idle.
func TestEngineScenarios(t *testing.T) {
	for _, w := range worlds {
		t.Run(w.name+"/coalesced wake and warm verdict", func(t *testing.T) {
			r := newEngineRig(t, w.make(t), rigTimes{})
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 8 {
				wg.Go(func() {
					_, err := r.request()
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("request: %v", err)
				}
			}
			if n := r.w.prov.wakes.Load(); n != 1 {
				t.Fatalf("%d provider wakes for 8 concurrent cold requests, want 1", n)
			}
			if r.w.apiStarts != nil && r.w.apiStarts() != 1 {
				t.Fatalf("%d starts reached the API, want 1", r.w.apiStarts())
			}
			starts := 0
			if r.w.apiStarts != nil {
				starts = r.w.apiStarts()
			}
			if _, err := r.request(); err != nil {
				t.Fatal(err)
			}
			if n := r.w.prov.wakes.Load(); n != 1 {
				t.Errorf("a warm request woke the provider (%d wakes)", n)
			}
			if r.w.apiStarts != nil && r.w.apiStarts() != starts {
				t.Errorf("a warm request reached the API")
			}
			if h := r.record(); h.Status != registry.StatusRunning || h.Verdict != registry.VerdictHealthy {
				t.Errorf("record %s/%s, want running/healthy", h.Status, h.Verdict)
			}
		})
		t.Run(w.name+"/roll with assert and rollback", func(t *testing.T) {
			r := newEngineRig(t, w.make(t), rigTimes{})
			if v := r.version(); v != "1" {
				t.Fatalf("version %q before any roll", v)
			}
			if _, err := r.eng.SetTarget(context.Background(), r.w.target("2", false)); err != nil {
				t.Fatal(err)
			}
			r.suspend()
			if v := r.version(); v != "2" {
				t.Fatalf("version %q after the roll to 2", v)
			}
			if _, err := r.eng.SetTarget(context.Background(), r.w.target("3", true)); err != nil {
				t.Fatal(err)
			}
			r.suspend()
			if v := r.version(); v != "2" {
				t.Fatalf("version %q after a failed roll to 3, want 2 (rolled back)", v)
			}
			if h := r.record(); h.Version != "2" {
				t.Errorf("record version %q, want 2", h.Version)
			}
			want := []string{"roll.start:2", "roll.done:2", "roll.start:3", "roll.rolled_back:3"}
			if got := r.events("roll."); !equalIgnoring(got, want) {
				t.Errorf("roll events %v, want %v", got, want)
			}
			if n := r.w.prov.recreates.Load(); n != 3 {
				t.Errorf("%d recreates, want 3 (roll, failed roll, rollback)", n)
			}
		})
		t.Run(w.name+"/idle suspend", func(t *testing.T) {
			r := newEngineRig(t, w.make(t), rigTimes{idle: 200 * time.Millisecond, tick: 50 * time.Millisecond})
			if _, err := r.request(); err != nil {
				t.Fatal(err)
			}
			testbin.Eventually(t, "the idle home suspended", func() bool {
				return r.record().Status == registry.StatusSuspended
			})
			res, err := r.w.prov.Status(context.Background(), provider.Spec{ID: home, Target: "alice", Options: r.w.options})
			if err != nil || res.State != provider.StateSuspended {
				t.Errorf("provider status %+v, %v; want suspended", res, err)
			}
		})
	}
}

// TestEngineStuckInStarting: a machine that never gets started fails the
// wake at the ready timeout for every caller; the engine stops it and
// records whether the stop was proven (the API saw the machine stopped),
// which it cannot be when the machine hangs in stopping too.
func TestEngineStuckInStarting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wedged bool
		proven bool
		state  string
	}{{"stops", false, true, "stopped"}, {"wedged", true, false, "stopping"}} {
		t.Run(tc.name, func(t *testing.T) {
			w := flyWorld(t)
			r := newEngineRig(t, w, rigTimes{ready: 1500 * time.Millisecond})
			w.stick(tc.wedged)
			_, err := r.request()
			if fe, ok := fault.As(err); !ok || fe.Code != homefault.CodeWakeTimeout || fe.RetryAfter <= 0 {
				t.Fatalf("request: %v, want %s with a Retry-After", err, homefault.CodeWakeTimeout)
			}
			var stop *homes.WakeStop
			testbin.Eventually(t, "the stop after the failed wake recorded", func() bool {
				stop = r.eng.LastStop(home)
				return stop != nil
			})
			if stop.Proven != tc.proven {
				t.Errorf("stop proven %t (%s), want %t", stop.Proven, stop.Error, tc.proven)
			}
			if got := w.state(); got != tc.state {
				t.Errorf("machine %s after the failed wake, want %s", got, tc.state)
			}
		})
	}
}

// equalIgnoring compares event lists, ignoring events not in want's types.
func equalIgnoring(got, want []string) bool {
	types := map[string]bool{}
	for _, w := range want {
		types[w[:strings.IndexByte(w, ':')]] = true
	}
	var kept []string
	for _, g := range got {
		if types[g[:strings.IndexByte(g, ':')]] {
			kept = append(kept, g)
		}
	}
	return strings.Join(kept, ",") == strings.Join(want, ",")
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
