package wake_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	"github.com/wakegate/wakegate/rolls"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// rollRig is a real engine with rolls on: a bbolt store, the exec provider
// running demo homes (--version {version}) from bin, and two homes, h1 at
// /node/alice and h2 at /node/bob, both on version "1".
type rollRig struct {
	t     testing.TB
	bin   string
	data  string
	store *bolt.Store
	exec  *execprov.Provider
	sess  *sessions.Table
	eng   *wake.Engine
	logs  *testbin.LogBuffer
	bus   *events.Bus
	ops   *rollOps
}

// rollOps records, in order, the target writes and recreates the engine makes
// through the real store and provider.
type rollOps struct {
	mu  sync.Mutex
	ops []string
}

func (o *rollOps) add(op string) {
	o.mu.Lock()
	o.ops = append(o.ops, op)
	o.mu.Unlock()
}

func (o *rollOps) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ops)
}

// rollStore is the bolt store, with target writes recorded.
type rollStore struct {
	registry.Store
	ops *rollOps
}

func (s rollStore) PutTarget(ctx context.Context, t registry.Target, c registry.Cond) (registry.Target, error) {
	st, err := s.Store.PutTarget(ctx, t, c)
	if err == nil {
		s.ops.add("target " + st.Version + " bad=" + st.BadVersion)
	}
	return st, err
}

// rollProvider is the exec provider, with recreates recorded.
type rollProvider struct {
	provider.Provider
	ops *rollOps
}

func (p rollProvider) Recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	p.ops.add("recreate " + s.ID + " " + s.Version)
	return p.Provider.Recreate(ctx, s)
}

// rollHomes maps the rig's home ids to their targets.
var rollHomes = map[string]string{"h1": "alice", "h2": "bob"}

// rollCommand is the demo-home command template run from bin.
func rollCommand(bin, version string) []string {
	return []string{bin, "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}",
		"--version", version, "--boot-delay", "100ms"}
}

// newRollRig starts a rig whose default exec command runs bin (the built
// binary when bin is "").
func newRollRig(t testing.TB, bin string, mode rolls.Mode) *rollRig {
	t.Helper()
	if bin == "" {
		bin = testbin.Build(t)
	}
	r := &rollRig{t: t, bin: bin, data: t.TempDir(), sess: sessions.New(), logs: &testbin.LogBuffer{},
		bus: events.NewBus(64), ops: &rollOps{}}
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
		Command: rollCommand(bin, "{version}"), DataDir: r.data, StopGrace: 2 * time.Second,
		OnChange: func(id string, res provider.Result) {
			if r.eng != nil {
				r.eng.ProviderChanged(id, res)
			}
		},
	}, log.With("provider", "exec"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.exec.Close()
		testbin.KillHomes(r.data)
	})
	r.eng = wake.New(wake.Options{
		Store: rollStore{r.store, r.ops}, Providers: map[string]provider.Provider{"exec": rollProvider{r.exec, r.ops}}, Sessions: r.sess,
		Instance: "test", WarmTTL: time.Minute, ReadyTimeout: 10 * time.Second, RetryAfter: time.Second,
		MaxConcurrent: 4, FailureBackoff: 50 * time.Millisecond, RelayHeader: demohome.RelayHeader,
		Log: log.With("component", "wake"), Events: r.bus,
		Roll: rolls.Options{Mode: mode, IdleAfter: time.Minute},
	})
	t.Cleanup(r.eng.Close)
	for _, id := range []string{"h1", "h2"} {
		if err := r.eng.Register(context.Background(), homes.Spec{ID: id, Target: rollHomes[id],
			Provider: "exec", Version: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// request is what the gateway does for one request: count the session,
// then wait for the home. It returns the endpoint, or the wake error.
func (r *rollRig) request(id string) (string, error) {
	c := r.sess.Begin(id)
	defer r.sess.End(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := r.eng.EnsureAwake(ctx, id)
	if err != nil {
		return "", err
	}
	return a.Endpoint.String(), nil
}

// version asks home id's current process which version it runs, through a
// request like the gateway's.
func (r *rollRig) version(id string) string {
	r.t.Helper()
	ep, err := r.request(id)
	if err != nil {
		r.t.Fatalf("wake %s: %v", id, err)
	}
	code, body, err := get(ep, "/version")
	if err != nil || code != http.StatusOK {
		r.t.Fatalf("GET %s/version: %d %v", ep, code, err)
	}
	return body
}

// suspend suspends home id, retrying while the lock of the wake that just
// answered is still held (it is released after the callers are answered).
func (r *rollRig) suspend(id string) {
	r.t.Helper()
	var err error
	testbin.Eventually(r.t, "suspend "+id, func() bool {
		err = r.eng.Suspend(context.Background(), id)
		return err == nil || !fault.Is(err, fault.Busy)
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rollRig) record(id string) registry.Home {
	r.t.Helper()
	h, err := r.store.GetHome(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func (r *rollRig) setTarget(version string, cmd []string) registry.Target {
	r.t.Helper()
	t, err := r.eng.SetTarget(context.Background(), registry.Target{Version: version, Command: cmd})
	if err != nil {
		r.t.Fatal(err)
	}
	return t
}

// index returns the position of the first log line at or after from that
// contains every part, or -1.
func rollIndex(lines []string, from int, parts ...string) int {
	for i := from; i < len(lines); i++ {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(lines[i], p)
		}
		if ok {
			return i
		}
	}
	return -1
}

func rollEvents(b *events.Bus, home string) []string {
	var out []string
	for _, ev := range b.Recent() {
		if ev.Home == home && strings.HasPrefix(ev.Type, "roll.") {
			out = append(out, ev.Type+":"+ev.Version+"<-"+ev.PriorVersion)
		}
	}
	return out
}

func TestRollStaleIdleHomeRollsOnNextWake(t *testing.T) {
	r := newRollRig(t, "", rolls.Lazy)
	if got := r.version("h1"); got != "1" {
		t.Fatalf("before any target the home runs %q, want 1", got)
	}
	r.suspend("h1")
	r.setTarget("2", nil)
	if got, err := r.eng.Target(context.Background()); err != nil || got.Version != "2" || got.BadVersion != "" {
		t.Fatalf("Target = %+v, %v", got, err)
	}
	// The request that meets the stale, sleeping home is answered by the
	// rolled home.
	if got := r.version("h1"); got != "2" {
		t.Fatalf("after the roll the home runs %q, want 2", got)
	}
	rec := r.record("h1")
	if rec.Version != "2" || rec.Status != registry.StatusRunning || rec.Verdict != registry.VerdictHealthy {
		t.Fatalf("record after roll: version %q status %q verdict %q", rec.Version, rec.Status, rec.Verdict)
	}
	if rec.Target != "alice" {
		t.Fatalf("a roll changed the target to %q", rec.Target)
	}
	st := r.eng.RollStats()
	if st.Started.Load() != 1 || st.Rolled.Load() != 1 || st.RolledBack.Load() != 0 {
		t.Fatalf("stats: started %d rolled %d rolled back %d", st.Started.Load(), st.Rolled.Load(), st.RolledBack.Load())
	}
	if ev := rollEvents(r.bus, "h1"); !slices.Equal(ev, []string{"roll.start:2<-1", "roll.done:2<-1"}) {
		t.Fatalf("roll events %v", ev)
	}
	// Equal target again: no write, the record keeps its generation.
	before, _ := r.store.GetTarget(context.Background())
	after := r.setTarget("2", nil)
	if after.Generation != before.Generation {
		t.Fatalf("an equal target was written again: generation %d -> %d", before.Generation, after.Generation)
	}
	// A rolled home wakes again on its new version.
	r.suspend("h1")
	if got := r.version("h1"); got != "2" || st.Started.Load() != 1 {
		t.Fatalf("after suspend and wake: version %q, rolls started %d", got, st.Started.Load())
	}
}

func TestRollSessionKeepsHomeOffTheRoll(t *testing.T) {
	r := newRollRig(t, "", rolls.Lazy)
	if got := r.version("h1"); got != "1" {
		t.Fatalf("runs %q", got)
	}
	r.setTarget("2", nil)
	// A user on the running home (a lease counts like a WebSocket).
	lease := r.sess.Lease("h1", time.Minute)
	r.eng.Drop("h1")
	if got := r.version("h1"); got != "1" {
		t.Fatalf("a home with a session was rolled: runs %q", got)
	}
	st := r.eng.RollStats()
	if st.Started.Load() != 0 || st.SkippedBusy.Load() != 1 {
		t.Fatalf("stats: started %d skipped busy %d", st.Started.Load(), st.SkippedBusy.Load())
	}
	r.sess.EndLease("h1", lease)
	r.eng.Drop("h1")
	if got := r.version("h1"); got != "2" {
		t.Fatalf("after the session ended the home runs %q, want 2", got)
	}
}

func TestRollFailedStartRollsBackAndBrakes(t *testing.T) {
	r := newRollRig(t, "", rolls.Lazy)
	missing := filepath.Join(t.TempDir(), "no-such-program")
	r.setTarget("2", rollCommand(missing, "{version}"))

	if got := r.version("h1"); got != "1" {
		t.Fatalf("after a failed roll the home runs %q, want the prior version 1", got)
	}
	tg, err := r.store.GetTarget(context.Background())
	if err != nil || tg.BadVersion != "2" {
		t.Fatalf("stored target %+v, %v: want bad version 2", tg, err)
	}
	// The brake was stored before the rollback began.
	want := []string{"target 2 bad=", "recreate h1 2", "target 2 bad=2", "recreate h1 1"}
	if ops := r.ops.list(); !slices.Equal(ops, want) {
		t.Fatalf("store and provider operations %q, want %q", ops, want)
	}
	alerts := r.logs.Lines("roll")
	i := rollIndex(alerts, 0, "level=ERROR", "alert=roll.rolled_back", "home=h1", "bad_version=2", "restored_version=1")
	if i < 0 {
		t.Fatalf("no roll.rolled_back alert in %q", alerts)
	}
	if f := fields(alerts[i]); len(f["err"]) < 10 || strings.Contains(f["err"], "{") || !strings.Contains(f["err"], "no-such-program") {
		t.Fatalf("alert err is not readable text: %q", f["err"])
	}
	if f := fields(alerts[i]); !strings.Contains(f["hint"], "no home rolls onto 2 again until another target is set") {
		t.Fatalf("alert hint does not say the brake holds: %q", f["hint"])
	}
	if ev := rollEvents(r.bus, "h1"); !slices.Equal(ev, []string{"roll.start:2<-1", "roll.rolled_back:2<-1"}) {
		t.Fatalf("roll events %v", ev)
	}
	rec := r.record("h1")
	if rec.Version != "1" || rec.Status != registry.StatusRunning || rec.Verdict != registry.VerdictHealthy {
		t.Fatalf("record after rollback: %+v", rec)
	}

	// No other home rolls onto the bad target.
	if got := r.version("h2"); got != "1" {
		t.Fatalf("h2 runs %q after the target went bad, want 1", got)
	}
	st := r.eng.RollStats()
	if st.Started.Load() != 1 || st.RolledBack.Load() != 1 || st.SkippedBad.Load() != 1 {
		t.Fatalf("stats: started %d rolled back %d skipped bad %d", st.Started.Load(), st.RolledBack.Load(), st.SkippedBad.Load())
	}

	// The same target registered again (a gateway restarted on the same
	// config) keeps the brake: h2 still does not roll onto it.
	if tg := r.setTarget("2", rollCommand(missing, "{version}")); tg.BadVersion != "2" {
		t.Fatalf("registering the same target again lifted the brake: %+v", tg)
	}
	r.eng.Drop("h2")
	if got := r.version("h2"); got != "1" {
		t.Fatalf("h2 runs %q after the same target was registered again, want 1", got)
	}

	// A newer target lifts the brake: rolls resume, running homes included.
	if tg := r.setTarget("3", nil); tg.BadVersion != "" {
		t.Fatalf("a new target kept the brake: %+v", tg)
	}
	for _, id := range []string{"h1", "h2"} {
		r.eng.Drop(id)
		if got := r.version(id); got != "3" {
			t.Fatalf("%s runs %q after the newer target, want 3", id, got)
		}
	}
	if st.Rolled.Load() != 2 {
		t.Fatalf("rolled %d, want 2", st.Rolled.Load())
	}
}

func TestRollVersionMismatchIsAFailedRoll(t *testing.T) {
	r := newRollRig(t, "", rolls.Lazy)
	// The release starts and answers, but reports another version.
	r.setTarget("2", rollCommand(r.bin, "{version}-other"))
	if got := r.version("h1"); got != "1" {
		t.Fatalf("after a mismatched roll the home runs %q, want 1", got)
	}
	if tg, _ := r.store.GetTarget(context.Background()); tg.BadVersion != "2" {
		t.Fatalf("target %+v: want bad version 2", tg)
	}
	alerts := r.logs.Lines("roll")
	i := rollIndex(alerts, 0, "alert=roll.rolled_back", "bad_version=2", "restored_version=1")
	if i < 0 {
		t.Fatalf("no roll.rolled_back alert in %q", alerts)
	}
	if f := fields(alerts[i]); !strings.Contains(f["err"], `"2-other"`) {
		t.Fatalf("alert err does not name the version seen: %q", f["err"])
	}
	if f := fields(alerts[i]); !strings.Contains(f["hint"], `says it is version "2-other"`) || !strings.Contains(f["hint"], "no home rolls onto 2 again") {
		t.Fatalf("alert hint does not name the version seen and the brake: %q", f["hint"])
	}
	// The mismatched process was started and replaced by the rollback.
	if n := len(rollStarted(r.logs, "h1")); n != 2 {
		t.Fatalf("%d processes started for h1, want 2 (release, rollback)", n)
	}
}

func rollStarted(l *testbin.LogBuffer, home string) []string {
	var out []string
	for _, line := range l.Lines(`"exec: started home"`) {
		if strings.Contains(line, "home="+home+" ") {
			out = append(out, line)
		}
	}
	return out
}

func TestRollIncidentWhenRollbackFails(t *testing.T) {
	// The homes run from a copy of the binary, so the prior version can be
	// made unable to start by removing it.
	bin := filepath.Join(t.TempDir(), "wakegate-copy")
	rlCopy(t, testbin.Build(t), bin)
	r := newRollRig(t, bin, rolls.Lazy)
	if got := r.version("h1"); got != "1" {
		t.Fatalf("runs %q", got)
	}
	r.suspend("h1")
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	r.setTarget("2", rollCommand(filepath.Join(t.TempDir(), "no-such-program"), "{version}"))

	_, err := r.request("h1")
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Failed || fe.Code != homefault.CodeRollIncident {
		t.Fatalf("caller got %v, want a failed roll_incident", err)
	}
	rec := r.record("h1")
	if rec.Status != registry.StatusUnknown || rec.Verdict != registry.VerdictDegraded || rec.Version != "1" {
		t.Fatalf("record after incident: status %q verdict %q version %q", rec.Status, rec.Verdict, rec.Version)
	}
	if tg, _ := r.store.GetTarget(context.Background()); tg.BadVersion != "2" {
		t.Fatalf("target %+v: want bad version 2", tg)
	}
	alerts := r.logs.Lines("roll")
	i := rollIndex(alerts, 0, "level=ERROR", "alert=roll.incident", "home=h1", "bad_version=2", "prior_version=1")
	if i < 0 {
		t.Fatalf("no roll.incident alert in %q", alerts)
	}
	if f := fields(alerts[i]); !strings.Contains(f["err"], "rollback") || !strings.Contains(f["err"], "wakegate-copy") {
		t.Fatalf("incident err does not say both failures: %q", f["err"])
	}
	if f := fields(alerts[i]); !strings.Contains(f["hint"], "register a fixed target") {
		t.Fatalf("incident alert has no hint: %q", f["hint"])
	}
	if st := r.eng.RollStats(); st.Incidents.Load() != 1 {
		t.Fatalf("incidents %d", st.Incidents.Load())
	}

	// The prior version can start again: a later wake heals the verdict.
	rlCopy(t, testbin.Build(t), bin)
	var ep string
	testbin.Eventually(t, "a wake after the incident", func() bool {
		ep, err = r.request("h1")
		return err == nil
	})
	if code, body, err := get(ep, "/version"); err != nil || code != http.StatusOK || body != "1" {
		t.Fatalf("healed home: %d %q %v", code, body, err)
	}
	rec = r.record("h1")
	if rec.Status != registry.StatusRunning || rec.Verdict != registry.VerdictHealthy {
		t.Fatalf("record after healing wake: status %q verdict %q", rec.Status, rec.Verdict)
	}
}

func rlCopy(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o700); err != nil {
		t.Fatal(err)
	}
}

func TestRollOffNeverRolls(t *testing.T) {
	r := newRollRig(t, "", rolls.Off)
	r.setTarget("2", nil)
	if got := r.version("h1"); got != "1" {
		t.Fatalf("with rolls off the home runs %q, want 1", got)
	}
	if st := r.eng.RollStats(); st.Started.Load() != 0 {
		t.Fatalf("rolls started %d", st.Started.Load())
	}
}

func TestRollSetTargetRejectsBadInput(t *testing.T) {
	r := newRollRig(t, "", rolls.Lazy)
	if _, err := r.eng.SetTarget(context.Background(), registry.Target{}); err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("empty version: %v", err)
	}
	if _, err := r.eng.SetTarget(context.Background(), registry.Target{Version: "2", Command: []string{""}}); err == nil || !strings.Contains(err.Error(), "command") {
		t.Fatalf("empty program: %v", err)
	}
	if _, err := r.eng.Target(context.Background()); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Target with none set: %v", err)
	}
}

// An operator's roll of an awake, idle, stale home rolls it at once; the
// refusals name why a roll cannot run.
func TestRollOnRequest(t *testing.T) {
	r := newRollRig(t, "", rolls.Lazy)
	ctx := context.Background()
	code := func(err error) string {
		if fe, ok := fault.As(err); ok {
			return fe.Code
		}
		return fmt.Sprint(err)
	}
	if got := r.version("h1"); got != "1" {
		t.Fatalf("runs %q", got)
	}
	if _, err := r.eng.Roll(ctx, "h1"); code(err) != "no_target" {
		t.Fatalf("roll without a target: %v, want no_target", err)
	}
	r.setTarget("2", nil)
	lease := r.sess.Lease("h1", time.Hour)
	if _, err := r.eng.Roll(ctx, "h1"); code(err) != "home_busy" {
		t.Fatalf("roll of a home with a lease: %v, want home_busy", err)
	}
	r.sess.EndLease("h1", lease)
	rec, err := r.eng.Roll(ctx, "h1")
	if err != nil || rec.Version != "2" {
		t.Fatalf("roll: %+v, %v; want version 2", rec, err)
	}
	if got := r.version("h1"); got != "2" {
		t.Fatalf("after the roll the home answers %q, want 2", got)
	}
	if _, err := r.eng.Roll(ctx, "h1"); code(err) != "roll_not_needed" {
		t.Fatalf("second roll: %v, want roll_not_needed", err)
	}
	if _, err := r.eng.Roll(ctx, "nope"); code(err) != "home_not_found" {
		t.Fatalf("roll of an unknown home: %v, want home_not_found", err)
	}
}

// A home with no recorded version is never stale: it is woken, never
// rolled, whatever the target, and an operator's roll is refused.
func TestRollNeverRollsHomeWithNoVersion(t *testing.T) {
	addr, _ := lcListener(t)
	store := lcStore(t)
	e := wake.New(wake.Options{
		Store:     store,
		Providers: map[string]provider.Provider{"static": &provider.Static{Endpoints: map[string]string{"h3": "http://" + addr}}},
		Sessions:  sessions.New(), Instance: "test",
		WarmTTL: time.Minute, ReadyTimeout: 10 * time.Second, RetryAfter: time.Second,
		MaxConcurrent: 4, FailureBackoff: time.Second,
		Probe: probe.Spec{Kind: probe.TCP}, RelayHeader: demohome.RelayHeader,
		Log:  slog.New(slog.DiscardHandler),
		Roll: rolls.Options{Mode: rolls.Lazy},
	})
	t.Cleanup(e.Close)
	ctx := context.Background()
	if err := e.Register(ctx, homes.Spec{ID: "h3", Target: "carol", Provider: "static"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetTarget(ctx, registry.Target{Version: "2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EnsureAwake(ctx, "h3"); err != nil {
		t.Fatalf("wake: %v", err)
	}
	_, err := e.Roll(ctx, "h3")
	if fe, ok := fault.As(err); !ok || fe.Code != "roll_not_needed" {
		t.Fatalf("operator roll of a home with no version: %v, want roll_not_needed", err)
	}
	if st := e.RollStats(); st.Started.Load() != 0 {
		t.Fatalf("%d rolls started for a home with no version", st.Started.Load())
	}
	rec, err := store.GetHome(ctx, "h3")
	if err != nil || rec.Version != "" || rec.Status != registry.StatusRunning {
		t.Fatalf("record %+v, %v: want no version and running", rec, err)
	}
}
