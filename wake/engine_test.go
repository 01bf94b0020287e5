package wake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/demohome"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	execprov "github.com/wakegate/wakegate/provider/exec"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

const (
	rigHome   = "h1"
	rigTarget = "alice"
	// rigProbePath is where the ws readiness probe upgrades.
	rigProbePath = "/node/" + rigTarget
	rigToken     = "relay-secret"
)

// waitEvents waits until at least n events of the given types were
// published (a wake publishes its event, after its log line, just after it
// releases its callers) and returns every one of those types seen so far.
func (r *rig) waitEvents(n int, types ...string) []events.Event {
	r.t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	// Everything published so far is read first: a check for "no more
	// than n" sees the events that happened before it.
	for drained := false; !drained; {
		select {
		case ev := <-r.sub.C:
			r.seen = append(r.seen, ev)
		default:
			drained = true
		}
	}
	for {
		var got []events.Event
		for _, ev := range r.seen {
			if slices.Contains(types, ev.Type) {
				got = append(got, ev)
			}
		}
		if len(got) >= n {
			return got
		}
		select {
		case ev := <-r.sub.C:
			r.seen = append(r.seen, ev)
		case <-timeout.C:
			r.t.Fatalf("gave up waiting for %d events of %v; saw %+v", n, types, r.seen)
		}
	}
}

// wakeEnds are the event types of a finished wake.
var wakeEnds = []string{events.WakeReady, events.WakeFailed}

// waitTicks waits until the idle loop has finished n more rounds.
func (r *rig) waitTicks(n uint64) {
	r.t.Helper()
	from := r.eng.Stats().IdleTicks
	testbin.Eventually(r.t, fmt.Sprintf("%d idle ticks", n), func() bool { return r.eng.Stats().IdleTicks >= from+n })
}

// rigOptions shape a rig; zero fields take the defaults of newRig.
type rigOptions struct {
	boot         time.Duration // demo home --boot-delay; default 200ms
	readyTimeout time.Duration // default 10s
	warmTTL      time.Duration // default 1m
	idle         time.Duration // home idle timeout; default 0 (never)
	tick         time.Duration // idle loop tick; 0: the loop does not run
	probe        probe.Spec
	maxWakes     int                           // wake.Options.MaxConcurrent; default 4
	backoffMax   time.Duration                 // wake.Options.FailureBackoffMax; default 0 (no cap)
	extraArgs    []string                      // appended to the demo home's command
	admit        func(id string) time.Duration // wake.Options.AdmitWake
	backoff      time.Duration                 // wake.Options.FailureBackoff; default 2s
	command      []string                      // the home's whole command, in place of the demo home's
	// wrapStore, if set, is what the engine gets in place of the store
	// (an observer that passes every call on to it).
	wrapStore func(registry.Store) registry.Store
}

// rig is a real wake engine: a bbolt store in a temp dir, the exec provider
// running demo homes from the wakegate binary, and the proxy's session table.
type rig struct {
	t     *testing.T
	data  string
	store *bolt.Store
	exec  *execprov.Provider
	sess  *sessions.Table
	eng   *wake.Engine
	logs  *testbin.LogBuffer
	bus   *events.Bus
	sub   *events.Subscription
	seen  []events.Event // events read from sub, in order
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	if o.boot == 0 {
		o.boot = 200 * time.Millisecond
	}
	if o.readyTimeout == 0 {
		o.readyTimeout = 10 * time.Second
	}
	if o.warmTTL == 0 {
		o.warmTTL = time.Minute
	}
	if o.maxWakes == 0 {
		o.maxWakes = 4
	}
	if o.backoff == 0 {
		o.backoff = 2 * time.Second
	}
	bin := testbin.Build(t)
	command := append([]string{bin, "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}",
		"--version", "{version}", "--boot-delay", o.boot.String()}, o.extraArgs...)
	if o.command != nil {
		command = o.command
	}
	r := &rig{t: t, data: t.TempDir(), sess: sessions.New(), logs: &testbin.LogBuffer{}, bus: events.NewBus(64)}
	r.sub = r.bus.Subscribe(4096)
	t.Cleanup(r.sub.Close)
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", r.logs)
		}
	})
	var err error
	if r.store, err = bolt.Open(filepath.Join(r.data, "state.db"), bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.store.Close() })
	r.exec, err = execprov.New(execprov.Config{
		Command:   command,
		DataDir:   r.data,
		StopGrace: 2 * time.Second,
		OnChange: func(id string, res provider.Result) {
			if r.eng != nil {
				r.eng.ProviderChanged(id, res)
			}
		},
	}, log.With("provider", "exec"))
	if err != nil {
		t.Fatal(err)
	}
	// The provider is closed before its homes are killed, so that its
	// supervisor does not restart them.
	t.Cleanup(func() {
		_ = r.exec.Close()
		testbin.KillHomes(r.data)
	})
	var store registry.Store = r.store
	if o.wrapStore != nil {
		store = o.wrapStore(r.store)
	}
	r.eng = wake.New(wake.Options{
		Store:             store,
		Providers:         map[string]provider.Provider{"exec": r.exec},
		Sessions:          r.sess,
		Instance:          "test",
		WarmTTL:           o.warmTTL,
		ReadyTimeout:      o.readyTimeout,
		RetryAfter:        2 * time.Second,
		MaxConcurrent:     max(o.maxWakes, 1),
		FailureBackoff:    o.backoff,
		FailureBackoffMax: o.backoffMax,
		Probe:             o.probe,
		RelayHeader:       demohome.RelayHeader,
		Log:               log.With("component", "wake"),
		Events:            r.bus,
		AdmitWake:         o.admit,
	})
	t.Cleanup(r.eng.Close)
	if err := r.eng.Register(context.Background(), homes.Spec{ID: rigHome, Target: rigTarget,
		Provider: "exec", Version: "1", RelayToken: rigToken, IdleTimeout: o.idle}); err != nil {
		t.Fatal(err)
	}
	if o.tick > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.eng.Run(ctx, o.tick)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	return r
}

// homeDir is the working directory of the rig's home processes.
func (r *rig) homeDir() string { return filepath.Join(r.data, "homes", rigHome) }

// ensure wakes the home and fails the test on error.
func (r *rig) ensure() homes.Awake {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := r.eng.EnsureAwake(ctx, rigHome)
	if err != nil {
		r.t.Fatalf("EnsureAwake: %v", err)
	}
	return a
}

func (r *rig) record() registry.Home {
	r.t.Helper()
	h, err := r.store.GetHome(context.Background(), rigHome)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// get sends GET endpoint+path with the relay token and returns status and body.
func get(endpoint, path string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, endpoint+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set(demohome.RelayHeader, rigToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

func stats(t testing.TB, endpoint string) demohome.Stats {
	t.Helper()
	code, body, err := get(endpoint, "/_demo/stats")
	if err != nil || code != http.StatusOK {
		t.Fatalf("stats: %d %v", code, err)
	}
	var s demohome.Stats
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("stats: %v", err)
	}
	return s
}

var logField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)

// fields parses one text-handler log line.
func fields(line string) map[string]string {
	out := map[string]string{}
	for _, m := range logField.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		out[m[1]] = v
	}
	return out
}

func TestEngineConcurrentColdWakeStartsOneProcess(t *testing.T) {
	r := newRig(t, rigOptions{})
	const callers = 500
	var wg sync.WaitGroup
	res := make([]homes.Awake, callers)
	errs := make([]error, callers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := make(chan struct{})
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = r.eng.EnsureAwake(ctx, rigHome)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	ep := res[0].Endpoint.String()
	for i, a := range res {
		if a.Endpoint.String() != ep {
			t.Fatalf("caller %d got endpoint %s, caller 0 got %s", i, a.Endpoint, ep)
		}
	}
	if n := strings.Count(r.logs.String(), `msg="exec: started home"`); n != 1 {
		t.Fatalf("exec started %d processes, want 1", n)
	}
	if pids := testbin.HomePIDs(t, r.homeDir()); len(pids) != 1 {
		t.Fatalf("home processes %v, want exactly one", pids)
	}
	if n := len(r.waitEvents(1, wakeEnds...)); n != 1 {
		t.Fatalf("%d wakes, want 1", n)
	}
	// Every caller can reach the home it was given.
	var failed sync.Map
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, err := get(ep, "/node/"+rigTarget+"/whoami"); err != nil || code != http.StatusOK {
				failed.Store(i, fmt.Sprintf("%d %v", code, err))
			}
		}()
	}
	wg.Wait()
	failed.Range(func(k, v any) bool {
		t.Errorf("request %d: %v", k, v)
		return true
	})
	if !r.eng.Warm(rigHome) {
		t.Fatal("no warm verdict after a successful wake")
	}
	if rec := r.record(); rec.Status != registry.StatusRunning || rec.Verdict != registry.VerdictHealthy ||
		rec.Endpoint != ep || rec.ProviderRef == "" || rec.Target != rigTarget || rec.LastReadyAt.IsZero() {
		t.Fatalf("stored record after wake: %+v", rec)
	}
}

// TestEngineAdmitsOneWakeForItsCallers: the wake rate is asked once per
// wake a request starts, never for the callers that join it, so a stampede
// on a sleeping home spends one wake of its budget; a wake it refuses
// answers wake_rate_limited with its Retry-After.
func TestEngineAdmitsOneWakeForItsCallers(t *testing.T) {
	var asked atomic.Int64
	var refuse atomic.Bool
	r := newRig(t, rigOptions{boot: 300 * time.Millisecond, admit: func(id string) time.Duration {
		if id != rigHome {
			t.Errorf("admit asked for %q", id)
		}
		asked.Add(1)
		if refuse.Load() {
			return 42 * time.Second
		}
		return 0
	}})
	const callers = 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = r.eng.EnsureAwake(ctx, rigHome)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("admit asked %d times for one wake of %d callers; want 1", n, callers)
	}
	// A warm home asks nothing; a sleeping one refused answers 429.
	r.ensure()
	if err := r.eng.Suspend(ctx, rigHome); err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	_, err := r.eng.EnsureAwake(ctx, rigHome)
	fe, ok := fault.As(err)
	if !ok || fe.Code != homefault.CodeWakeRateLimited || fe.RetryAfter != 42*time.Second || fault.Classify(err).Status != http.StatusTooManyRequests {
		t.Fatalf("refused wake: %v; want wake_rate_limited, 429, Retry-After 42s", err)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("admit asked %d times after a warm call and a refused wake; want 2", n)
	}
}

func TestEngineWarmVerdictSkipsProbe(t *testing.T) {
	r := newRig(t, rigOptions{})
	a := r.ensure()
	if a.Waited <= 0 {
		t.Fatalf("cold wake reported Waited %v", a.Waited)
	}
	ep := a.Endpoint.String()
	before := stats(t, ep)
	if before.Paths[rigProbePath] < 1 {
		t.Fatalf("no probe reached %s: %v", rigProbePath, before.Paths)
	}
	gen := r.record().Generation
	for range 20 {
		a := r.ensure()
		if a.Waited != 0 || a.Endpoint.String() != ep {
			t.Fatalf("warm hit: %+v, want endpoint %s and no wait", a, ep)
		}
		if code, _, err := get(ep, "/node/"+rigTarget+"/whoami"); err != nil || code != http.StatusOK {
			t.Fatalf("whoami: %d %v", code, err)
		}
	}
	after := stats(t, ep)
	if after.Paths[rigProbePath] != before.Paths[rigProbePath] {
		t.Fatalf("probes grew from %d to %d across warm hits", before.Paths[rigProbePath], after.Paths[rigProbePath])
	}
	if got := after.Paths["/node/"+rigTarget+"/whoami"]; got != 20 {
		t.Fatalf("whoami count %d, want 20", got)
	}
	if g := r.record().Generation; g != gen {
		t.Fatalf("store written by warm hits: generation %d -> %d", gen, g)
	}
	if n := len(r.waitEvents(1, wakeEnds...)); n != 1 {
		t.Fatalf("%d wakes, want 1", n)
	}
}

func TestEngineReadyTimeoutFailsEveryCaller(t *testing.T) {
	r := newRig(t, rigOptions{boot: 3 * time.Second, readyTimeout: 500 * time.Millisecond})
	const callers = 20
	errs := make([]error, callers)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.eng.EnsureAwake(ctx, rigHome)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		fe, ok := fault.As(err)
		if !ok {
			t.Fatalf("caller %d: %v, want a *fault.Error", i, err)
		}
		if fe.Kind != fault.Failed || fe.RetryAfter <= 0 || fe.Code != homefault.CodeWakeTimeout || fe.Cause == nil {
			t.Fatalf("caller %d: kind %s code %s retry %v cause %v, want failed wake_timeout with Retry-After and a cause",
				i, fe.Kind, fe.Code, fe.RetryAfter, fe.Cause)
		}
	}
	if r.eng.Warm(rigHome) {
		t.Fatal("a failed wake left a warm verdict")
	}
	// The callers went at the ready timeout; the half-woken home is
	// stopped after, and the wake's end event reports that stop.
	evs := r.waitEvents(1, wakeEnds...)
	if pids := testbin.HomePIDs(t, r.homeDir()); len(pids) != 0 {
		t.Fatalf("half-woken home still runs: %v", pids)
	}
	rec := r.record()
	if rec.Status != registry.StatusSuspended || rec.WantRunning || rec.Verdict != registry.VerdictNone {
		t.Fatalf("stored record after failed wake: %+v", rec)
	}
	if len(evs) != 1 || evs[0].Type != events.WakeFailed || evs[0].StopProven == nil || !*evs[0].StopProven {
		t.Fatalf("wake events %+v: want one wake.failed with stop_proven=true", evs)
	}
	// The proven stop reaches the engine's state (for the admin API), not
	// only the event stream and the log.
	hs, err := r.eng.HomeState(context.Background(), rigHome)
	if err != nil || hs.LastStop == nil || !hs.LastStop.Proven || hs.LastStop.At.IsZero() {
		t.Fatalf("HomeState %+v, %v: want LastStop proven", hs, err)
	}
}

// A home's ready signal makes the next probe attempt run at once but never
// declares the home ready: a home that signals ready while its relay path
// answers 404 gets no warm verdict, and its wake fails at the ready timeout.
func TestEngineReadySignalNeverPassesAlone(t *testing.T) {
	// The http probe asks a path the demo home answers 404: it never passes.
	r := newRig(t, rigOptions{readyTimeout: 2 * time.Second,
		probe: probe.Spec{Kind: probe.HTTP, Path: "/node/{target}/never-ready"}})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := r.eng.EnsureAwake(ctx, rigHome)
		done <- err
	}()
	testbin.Eventually(t, "the wake reaches its probe", func() bool {
		phase, _, ok := r.eng.Progress(rigHome)
		return ok && phase == "probing"
	})
	if r.eng.Ready(rigHome, "wrong-token") {
		t.Fatal("Ready accepted a wrong token")
	}
	if id, ok := r.eng.HomeForToken(rigToken); !ok || id != rigHome {
		t.Fatalf("HomeForToken = %q %v", id, ok)
	}
	if !r.eng.Ready(rigHome, rigToken) {
		t.Fatal("Ready with the relay token signalled no wake")
	}
	err := <-done
	if fe, ok := fault.As(err); !ok || fe.Code != homefault.CodeWakeTimeout {
		t.Fatalf("wake of a home that signals but answers 404: %v, want wake_timeout", err)
	}
	if r.eng.Warm(rigHome) {
		t.Fatal("a ready signal alone gave the home a warm verdict")
	}
	if evs := r.waitEvents(1, wakeEnds...); len(evs) != 1 || evs[0].Type != events.WakeFailed {
		t.Fatalf("wake events %+v, want one wake.failed", evs)
	}
}

func TestEngineLeaseKeepsHomeAwake(t *testing.T) {
	r := newRig(t, rigOptions{idle: 200 * time.Millisecond, tick: 20 * time.Millisecond})
	// The lease is taken before the wake, so the home is never idle
	// between its wake and the lease.
	r.sess.Lease(rigHome, 8*time.Second) // long enough for the ticks below on a loaded machine
	r.ensure()
	pids := testbin.HomePIDs(t, r.homeDir())
	if len(pids) != 1 {
		t.Fatalf("home processes %v, want one", pids)
	}
	// Many idle timeouts pass while the lease is live: 35 rounds of the
	// idle loop, each of which would suspend an idle home.
	r.waitTicks(35)
	if got := testbin.HomePIDs(t, r.homeDir()); len(got) != 1 || got[0] != pids[0] {
		t.Fatalf("home processes %v during the lease, want %v", got, pids)
	}
	if rec := r.record(); rec.Status != registry.StatusRunning {
		t.Fatalf("status %s during the lease, want running", rec.Status)
	}
	if evs := r.waitEvents(0, events.Suspend); len(evs) != 0 {
		t.Fatal("a home with a live lease was suspended")
	}
	testbin.Eventually(t, "the home is suspended after its lease expires", func() bool {
		return len(testbin.HomePIDs(t, r.homeDir())) == 0 && r.record().Status == registry.StatusSuspended
	})
	if r.eng.Warm(rigHome) {
		t.Fatal("a suspended home kept its warm verdict")
	}
}

func TestEngineEndLeaseLetsHomeSuspend(t *testing.T) {
	r := newRig(t, rigOptions{idle: 200 * time.Millisecond, tick: 20 * time.Millisecond})
	lease := r.sess.Lease(rigHome, time.Hour)
	r.ensure()
	r.waitTicks(25) // more than two idle timeouts' worth of idle-loop rounds
	if len(testbin.HomePIDs(t, r.homeDir())) != 1 {
		t.Fatal("a home with a live lease is not running")
	}
	if !r.sess.EndLease(rigHome, lease) {
		t.Fatal("EndLease: the lease was not live")
	}
	testbin.Eventually(t, "the home is suspended after its lease ends", func() bool {
		return len(testbin.HomePIDs(t, r.homeDir())) == 0 && r.record().Status == registry.StatusSuspended
	})
}

func TestEngineWakeLogLine(t *testing.T) {
	r := newRig(t, rigOptions{})
	const callers = 8
	res := make([]homes.Awake, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = r.eng.EnsureAwake(context.Background(), rigHome)
		}()
	}
	wg.Wait()
	waited := 0
	for i, a := range res {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if a.Waited > 0 {
			waited++
		}
	}
	if err := r.eng.Suspend(context.Background(), rigHome); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	if pids := testbin.HomePIDs(t, r.homeDir()); len(pids) != 0 {
		t.Fatalf("home still runs after Suspend: %v", pids)
	}
	if a := r.ensure(); a.Waited <= 0 {
		t.Fatalf("wake after suspend reported no wait: %+v", a)
	}
	r.waitEvents(2, wakeEnds...) // each wake's event follows its log line
	lines := r.logs.Lines("wake")
	if len(lines) != 2 {
		t.Fatalf("%d wake lines for 2 wakes:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, line := range lines {
		f := fields(line)
		for _, k := range []string{"home", "outcome", "cause", "joined", "provider_ms", "probe_ms", "total_ms"} {
			if _, ok := f[k]; !ok {
				t.Errorf("wake line lacks %s: %s", k, line)
			}
		}
		if f["home"] != rigHome || f["outcome"] != "ready" {
			t.Errorf("wake line: %s", line)
		}
		for _, k := range []string{"provider_ms", "probe_ms", "total_ms"} {
			if v, err := strconv.ParseFloat(f[k], 64); err != nil || v < 0 {
				t.Errorf("wake line %s=%q is not a duration in ms", k, f[k])
			}
		}
	}
	// Every caller that waited for the first wake started or joined it.
	if j := fields(lines[0])["joined"]; j != strconv.Itoa(waited-1) {
		t.Fatalf("first wake: joined=%s, but %d callers waited for it", j, waited)
	}
	if j := fields(lines[1])["joined"]; j != "0" {
		t.Fatalf("second wake: joined=%s, want 0", j)
	}
	if n := len(r.waitEvents(1, events.Suspend)); n != 1 {
		t.Fatalf("%d suspends, want 1", n)
	}
}

func TestEngineKilledHomeWakesAgain(t *testing.T) {
	r := newRig(t, rigOptions{})
	for round := range 3 {
		a := r.ensure()
		pids := testbin.HomePIDs(t, r.homeDir())
		if len(pids) != 1 {
			t.Fatalf("round %d: home processes %v, want one", round, pids)
		}
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// What a gateway does when its forward finds the home gone. The
		// provider's supervisor restarts the home at the same time and
		// records the new process.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ep, err := r.eng.Redo(ctx, rigHome)
		cancel()
		if err != nil {
			t.Fatalf("round %d: Redo after kill: %v", round, err)
		}
		if code, _, err := get(ep.String(), "/node/"+rigTarget+"/whoami"); err != nil || code != http.StatusOK {
			t.Fatalf("round %d: whoami after Redo: %d %v", round, code, err)
		}
		if got := testbin.HomePIDs(t, r.homeDir()); len(got) != 1 || got[0] == pids[0] {
			t.Fatalf("round %d: home processes %v after the kill of %d", round, got, pids[0])
		}
		if ep.String() == a.Endpoint.String() {
			t.Logf("round %d: the new home reuses port %s", round, ep.Host)
		}
		testbin.Eventually(t, "the stored ref names the live process", func() bool {
			live := testbin.HomePIDs(t, r.homeDir())
			rec := r.record()
			return len(live) == 1 && rec.Endpoint == ep.String() &&
				strings.Contains(rec.ProviderRef, fmt.Sprintf(`"pid":%d,`, live[0]))
		})
	}
}

// A home whose wakes keep failing is backed off: after a failed wake one
// more may start at once, then callers get 503 wake_backoff with a
// Retry-After and no wake is started for them.
func TestEngineBacksOffFailingHome(t *testing.T) {
	r := newRig(t, rigOptions{boot: time.Hour, readyTimeout: 300 * time.Millisecond})
	code := func(err error) string {
		if fe, ok := fault.As(err); ok {
			return fe.Code
		}
		return fmt.Sprint(err)
	}
	try := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := r.eng.EnsureAwake(ctx, rigHome)
		return err
	}
	// A loaded machine may run out of the short ready timeout before the
	// probe (wake_failed): either is a failed wake.
	failed := func(err error) bool {
		return code(err) == homefault.CodeWakeTimeout || code(err) == homefault.CodeWakeFailed
	}
	if err := try(); !failed(err) {
		t.Fatalf("first wake: %v, want a failed wake", err)
	}
	if err := try(); !failed(err) {
		t.Fatalf("second wake (allowed at once after one failure): %v, want a failed wake", err)
	}
	// A wake's event follows its callers' release: wait for both.
	r.waitEvents(2, wakeEnds...)
	starts := len(r.waitEvents(2, events.WakeStart))
	err := try()
	fe, ok := fault.As(err)
	if !ok || fe.Code != homefault.CodeWakeBackoff || fe.Kind != fault.Failed || fe.RetryAfter < time.Second {
		t.Fatalf("third wake: %v, want failed wake_backoff with a Retry-After of at least 1s", err)
	}
	if n := len(r.waitEvents(starts, events.WakeStart)); n != starts {
		t.Fatalf("a backed-off caller started a wake: %d wake starts, had %d", n, starts)
	}
}

// The global cap on wakes running at once holds a second home's wake in
// the queue while the first one has the only slot, and lets it run once
// the first is over.
func TestEngineCapsConcurrentWakes(t *testing.T) {
	r := newRig(t, rigOptions{boot: time.Hour, readyTimeout: 2 * time.Second, maxWakes: 1})
	ctx := context.Background()
	if err := r.eng.Register(ctx, homes.Spec{ID: "h2", Target: "bob", Provider: "exec", Version: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := r.eng.Start(rigHome); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the first wake to hold the slot", func() bool {
		phase, _, ok := r.eng.Progress(rigHome)
		return ok && phase != "queued"
	})
	if err := r.eng.Start("h2"); err != nil {
		t.Fatal(err)
	}
	phase, _, ok := r.eng.Progress("h2")
	if first, _, running := r.eng.Progress(rigHome); !running || first == "queued" {
		t.Skipf("the first wake ended before the check (phase %q): the machine stalled for its whole ready timeout", first)
	}
	if !ok || phase != "queued" {
		t.Fatalf("second home's wake is %q (in flight %v) while the only slot is taken; want queued", phase, ok)
	}
	testbin.Eventually(t, "the second wake to get the slot once the first is over", func() bool {
		phase, _, ok := r.eng.Progress("h2")
		return !ok || phase != "queued"
	})
}

// A home whose first process exits during the wake (a port taken between
// choosing and binding, a crash in boot) is restarted by the provider on a
// new port; the wake follows it there instead of probing the dead endpoint
// until the ready timeout.
func TestEngineWakeFollowsRestartedHome(t *testing.T) {
	r := newRig(t, rigOptions{readyTimeout: 20 * time.Second,
		extraArgs: []string{"--fail-once", "{data_dir}/failed-once"}})
	a := r.ensure()
	if n := len(r.logs.Lines(`"exec: started home"`)); n != 2 {
		t.Fatalf("%d processes started, want 2 (the failed first one and its restart)", n)
	}
	rec := r.record()
	if rec.Endpoint != a.Endpoint.String() {
		t.Fatalf("stored endpoint %s, woken endpoint %s: the restarted process was not recorded", rec.Endpoint, a.Endpoint)
	}
	if code, _, err := get(a.Endpoint.String(), rigProbePath+"/whoami"); err != nil || code != 200 {
		t.Fatalf("the woken endpoint answers %d, %v", code, err)
	}
}

// An operator's start resets the provider's restart budget: a home given up
// on after its budget was spent, started again by an operator, is
// restarted after its next crash instead of being given up on at once.
func TestEngineOperatorStartResetsRestartBudget(t *testing.T) {
	r := newRig(t, rigOptions{boot: 20 * time.Millisecond})
	r.ensure()
	// The budget (3 restarts) is spent: the fourth crash gives up.
	for n := 1; n <= 4; n++ {
		r.crash(n)
	}
	if got := r.exec.History(rigHome)[3].Outcome; got != provider.RestartGaveUp {
		t.Fatalf("fourth crash: %s, want %s", got, provider.RestartGaveUp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.eng.WakeNow(ctx, rigHome, "admin"); err != nil {
		t.Fatalf("operator start: %v", err)
	}
	r.crash(5)
	if got := r.exec.History(rigHome)[4].Outcome; got != provider.RestartDone {
		t.Fatalf("crash after an operator's start: %s, want %s (the budget was not reset)", got, provider.RestartDone)
	}
}

// A home whose process keeps exiting during its wake is given up on by the
// provider (restart budget spent); every caller of the wake gets
// home_failed with the provider's reason as its cause at once instead of
// probing the dead home until the ready timeout (an hour here). The home
// is stored failed with the reason, and a waiting page's poll reports the
// failure and starts no wake.
func TestEngineWakeEndsWhenProviderGivesUp(t *testing.T) {
	r := newRig(t, rigOptions{readyTimeout: time.Hour, extraArgs: []string{"--addr", "not-an-address"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const callers = 4
	errs := make(chan error, callers)
	for range callers {
		go func() {
			_, err := r.eng.EnsureAwake(ctx, rigHome)
			errs <- err
		}()
	}
	for range callers {
		err := <-errs
		fe, ok := fault.As(err)
		if !ok || fe.Code != homefault.CodeHomeFailed || fe.Kind != fault.Failed || fe.Cause == nil ||
			!strings.Contains(fe.Cause.Error(), "giving up") || !strings.Contains(fe.Cause.Error(), "exit status") {
			t.Fatalf("wake of a home that keeps exiting: %v, want home_failed with the provider's reason", err)
		}
		if strings.Contains(fe.Message, "exit status") || strings.Contains(fe.Message, "not-an-address") {
			t.Fatalf("the public sentence carries the operator's detail: %q", fe.Message)
		}
	}
	if r.eng.Warm(rigHome) {
		t.Fatal("a failed wake left a warm verdict")
	}
	// The callers went first; the wake's end follows the stop.
	r.waitEvents(1, wakeEnds...)
	st, err := r.eng.HomeState(ctx, rigHome)
	if err != nil || st.Status != registry.StatusFailed || !strings.Contains(st.Reason, "exit status") {
		t.Fatalf("stored state %+v, %v; want failed with the exit status", st, err)
	}
	starts := len(r.waitEvents(1, events.WakeStart))
	for range 3 {
		if err := r.eng.Start(rigHome); codeOf(err) != homefault.CodeHomeFailed {
			t.Fatalf("a poll of a failed home: %v, want home_failed", err)
		}
	}
	if _, _, ok := r.eng.Progress(rigHome); ok {
		t.Fatal("a poll of a failed home started a wake")
	}
	if n := len(r.waitEvents(starts, events.WakeStart)); n != starts {
		t.Fatalf("polls of a failed home started %d wakes", n-starts)
	}
}

// An operator's wake is not held by the failure backoff, and the backoff
// a run of failures builds up stops doubling at its cap.
func TestEngineOperatorBypassesCappedBackoff(t *testing.T) {
	r := newRig(t, rigOptions{readyTimeout: time.Hour, backoffMax: 3 * time.Second,
		extraArgs: []string{"--addr", "not-an-address"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Five failures in a row: uncapped, the pause would be 2s<<4 = 32s.
	for i := range 5 {
		if _, err := r.eng.WakeNow(ctx, rigHome, "admin"); codeOf(err) != homefault.CodeHomeFailed {
			t.Fatalf("operator's wake %d: %v, want home_failed (not refused by the backoff)", i+1, err)
		}
	}
	_, err := r.eng.EnsureAwake(ctx, rigHome)
	fe, ok := fault.As(err)
	if !ok || fe.Code != homefault.CodeHomeFailed || fe.RetryAfter < time.Second || fe.RetryAfter > 3*time.Second {
		t.Fatalf("a request during the backoff: %v (retry after %v), want home_failed with a Retry-After of at most the 3s cap", err, fe)
	}
}

// codeOf is the public code of err, or its text when it has none.
func codeOf(err error) string {
	if fe, ok := fault.As(err); ok {
		return fe.Code
	}
	return fmt.Sprint(err)
}

// crash kills the rig's home process, its nth crash, and waits until the
// supervisor handled it: restarted it (then until the new process runs) or
// gave up on it.
func (r *rig) crash(n int) {
	t := r.t
	t.Helper()
	pids := testbin.HomePIDs(t, r.homeDir())
	if len(pids) != 1 {
		t.Fatalf("home processes %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, fmt.Sprintf("the supervisor to handle crash %d", n), func() bool {
		return len(r.exec.History(rigHome)) == n
	})
	if h := r.exec.History(rigHome)[n-1]; h.Outcome == provider.RestartDone {
		testbin.Eventually(t, "the restarted process", func() bool {
			got := testbin.HomePIDs(t, r.homeDir())
			return len(got) == 1 && got[0] != pids[0]
		})
	}
}
