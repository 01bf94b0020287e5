package execprov

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/members"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// memberCommand is the test home as a member, listening after boot.
func memberCommand(boot time.Duration) string {
	return fmt.Sprintf(`["{self}", "home", "-port={port}", "-data={data_dir}", "-listen-after=%s"]`, boot)
}

// groupOptions are the options of a group of three: db (listens after
// 500 ms, probed by tcp), the entry app (the section's command, after db)
// and worker (after db and app, env WORKER=worker).
func groupOptions(worker string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"members": [
		{"name": "db", "command": %s, "probe": "tcp"},
		{"name": "worker", "command": %s, "env": [%q], "depends_on": ["db", "app"], "probe": "/version"},
		{"name": "app", "entry": true, "depends_on": ["db"], "probe": "/version"}]}`,
		memberCommand(500*time.Millisecond), memberCommand(0), worker))
}

func groupSpec(opts json.RawMessage) provider.Spec {
	return provider.Spec{ID: "g1", Target: "g1", Version: "v1", RelayToken: "relay-secret", Options: opts}
}

// memberProc is member name's process as the provider knows it.
func memberProc(t *testing.T, e *Provider, id string) *proc {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.homes[id]
	if h == nil || h.proc == nil {
		t.Fatalf("member %s has no process", id)
	}
	return h.proc
}

func envOf(hi homeInfo, key string) (string, bool) {
	for _, kv := range hi.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// TestGroupWakeOrderEnvStop: a wake starts db, waits until it listens,
// then the entry, then the worker; each member finds the members it
// depends on in WAKEGATE_MEMBER_<NAME>_ADDR, only the entry has the relay
// token; a stop ends every member in the reverse order, proven.
func TestGroupWakeOrderEnvStop(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	s := groupSpec(groupOptions("WORKER=1"))
	ctx := context.Background()
	r, err := e.Wake(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	db, worker, app := memberProc(t, e, "g1@db"), memberProc(t, e, "g1@worker"), memberProc(t, e, "g1")
	if r.Endpoint != app.endpoint() {
		t.Fatalf("endpoint %s, want the entry's %s", r.Endpoint, app.endpoint())
	}
	// db listened before the entry started: the entry's start time (in
	// clock ticks since boot, 100 a second) is after db's by at least
	// db's 500 ms before it listens.
	if app.Start < db.Start+50 || worker.Start < app.Start {
		t.Fatalf("start ticks db %d, app %d, worker %d: want app 50 after db, worker after app", db.Start, app.Start, worker.Start)
	}
	t.Logf("start ticks: db %d, app %d, worker %d", db.Start, app.Start, worker.Start)
	wi, ai := info(t, worker.endpoint()), info(t, app.endpoint())
	dbAddr := fmt.Sprintf("127.0.0.1:%d", db.port)
	for _, c := range []struct {
		who  string
		hi   homeInfo
		key  string
		want string
	}{
		{"app", ai, members.AddrVar("db"), dbAddr},
		{"worker", wi, members.AddrVar("db"), dbAddr},
		{"worker", wi, members.AddrVar("app"), fmt.Sprintf("127.0.0.1:%d", app.port)},
		{"app", ai, EnvRelayToken, "relay-secret"},
		{"worker", wi, "WORKER", "1"},
		{"worker", wi, EnvHome, "g1@worker"},
	} {
		if v, _ := envOf(c.hi, c.key); v != c.want {
			t.Errorf("%s: %s=%q, want %q", c.who, c.key, v, c.want)
		}
	}
	if v, ok := envOf(wi, EnvRelayToken); ok {
		t.Errorf("worker has the relay token %q: only the entry may", v)
	}
	if _, ok := envOf(ai, members.AddrVar("worker")); ok {
		t.Error("app has worker's address, on which it does not depend")
	}
	again, err := e.Wake(ctx, s)
	if err != nil || !again.WasRunning || again.Endpoint != r.Endpoint {
		t.Fatalf("second wake: %+v, %v; want the running group", again, err)
	}
	st, err := e.Status(ctx, s)
	if err != nil || st.State != provider.StateRunning || !strings.Contains(st.Reason, "db running") {
		t.Fatalf("status %+v, %v", st, err)
	}
	s.Ref = r.Ref
	proven, err := e.Stop(ctx, s)
	if err != nil || !proven {
		t.Fatalf("stop: %v, proven %v", err, proven)
	}
	for _, p := range []*proc{db, worker, app} {
		if _, err := procid.Lookup(p.Identity); err == nil {
			t.Errorf("pid %d runs on after the stop", p.PID)
		}
	}
	logs := ""
	for _, id := range []string{"g1", "g1@worker", "g1@db"} {
		b, _ := os.ReadFile(filepath.Join(dir, "homes", id, "home.log"))
		logs += string(b)
	}
	t.Logf("logs:\n%s", logs)
}

// TestGroupMemberFails: a member that exits at start fails the wake with
// its name and cause in the operator's hint, and nothing of the group is
// left running.
func TestGroupMemberFails(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	opts := json.RawMessage(`{"members": [
		{"name": "db", "command": ["/bin/sh", "-c", "echo no database today >&2; exit 3"], "probe": "tcp"},
		{"name": "app", "entry": true, "depends_on": ["db"]}]}`)
	_, err := e.Wake(context.Background(), groupSpec(opts))
	pe, ok := provider.AsError(err)
	if !ok || pe.Reason != members.ReasonExited || !strings.Contains(pe.Hint, "member db") ||
		!strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "no database today") {
		t.Fatalf("wake: %v (hint %q), want member db's exit in the error and the hint", err, pe.Hint)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, h := range e.homes {
		if h.proc != nil {
			t.Errorf("home %s runs pid %d after the failed wake", id, h.proc.PID)
		}
	}
}

// TestGroupMemberGone: a member that exits between wakes makes the group
// failed in its status, naming it, and the next wake starts the whole
// group again.
func TestGroupMemberGone(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	changes := make(chan provider.Result, 4)
	cfg.OnChange = func(id string, r provider.Result) {
		if id == "g1" {
			changes <- r
		}
	}
	e := newExec(t, cfg)
	s := groupSpec(groupOptions("WORKER=1"))
	ctx := context.Background()
	if _, err := e.Wake(ctx, s); err != nil {
		t.Fatal(err)
	}
	db, app := memberProc(t, e, "g1@db"), memberProc(t, e, "g1")
	if _, err := get(db.endpoint(), "/exit?code=4"); err == nil {
		t.Fatal("db answered its exit")
	}
	r := <-changes
	if !strings.Contains(r.Reason, "member db exited") || r.Endpoint != app.endpoint() {
		t.Fatalf("report %+v, want member db's exit about the entry", r)
	}
	st, err := e.Status(ctx, s)
	if err != nil || st.State != provider.StateFailed || !strings.Contains(st.Reason, "member db is not running") {
		t.Fatalf("status %+v, %v; want failed naming db", st, err)
	}
	w, err := e.Wake(ctx, s)
	if err != nil || w.WasRunning {
		t.Fatalf("wake after db's exit: %+v, %v", w, err)
	}
	for _, id := range []string{"g1", "g1@db", "g1@worker"} {
		if p := memberProc(t, e, id); p == db || p == app {
			t.Errorf("%s runs the process of before", id)
		}
	}
	if _, err := procid.Lookup(app.Identity); err == nil {
		t.Error("the old entry runs on beside the new group")
	}
}

// TestGroupRoll: a roll makes the entry again, and of the other members
// only the one whose command changed; a member whose command, env and
// dependencies' addresses are the same keeps running.
func TestGroupRoll(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	opts := func(mark string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"members": [
			{"name": "db", "command": %s, "probe": "tcp"},
			{"name": "cache", "command": ["{self}", "home", "-port={port}", "-data={data_dir}", "-mark=%s"], "probe": "tcp"},
			{"name": "app", "entry": true, "depends_on": ["db"]}]}`, memberCommand(0), mark))
	}
	ctx := context.Background()
	if _, err := e.Wake(ctx, groupSpec(opts("1"))); err != nil {
		t.Fatal(err)
	}
	roll := func(version, mark string, kept, made []string) {
		t.Helper()
		before := map[string]*proc{}
		for _, id := range append(slices.Clone(kept), made...) {
			before[id] = memberProc(t, e, id)
		}
		s := groupSpec(opts(mark))
		s.Version = version
		r, err := e.Recreate(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		testbin.Eventually(t, "the new entry answering "+version, func() bool {
			v, err := get(r.Endpoint, "/version")
			return err == nil && strings.TrimSpace(v) == version
		})
		for _, id := range kept {
			if p := memberProc(t, e, id); p != before[id] {
				t.Errorf("roll to %s: %s was restarted (pid %d -> %d), though nothing of it changed", version, id, before[id].PID, p.PID)
			}
		}
		for _, id := range made {
			if p := memberProc(t, e, id); p == before[id] {
				t.Errorf("roll to %s: %s keeps pid %d, want it made again", version, id, p.PID)
			}
		}
	}
	roll("v2", "1", []string{"g1@db", "g1@cache"}, []string{"g1"})
	roll("v3", "2", []string{"g1@db"}, []string{"g1@cache", "g1"})
	if args := info(t, memberProc(t, e, "g1@cache").endpoint()).Args; !slices.Contains(args, "-mark=2") {
		t.Errorf("cache runs %v, want its new command", args)
	}
}

// TestGroupConfigErrors: a group's options are refused by field.
func TestGroupConfigErrors(t *testing.T) {
	f := Factory(Config{})
	for _, tc := range []struct{ name, opts, field, msg string }{
		{"unknown depends_on", `{"members": [{"name": "app", "entry": true, "depends_on": ["db"]}]}`,
			"options.members[0].depends_on[0]", `no member is named "db"`},
		{"cycle", `{"members": [{"name": "db", "command": ["x"], "depends_on": ["app"]}, {"name": "app", "entry": true, "depends_on": ["db"]}]}`,
			"options.members", "cycle: db -> app -> db"},
		{"two entries", `{"members": [{"name": "db", "entry": true}, {"name": "app", "entry": true}]}`,
			"options.members[1].entry", "members[0] is the entry already"},
		{"no entry", `{"members": [{"name": "db", "command": ["x"]}]}`, "options.members", "no member is the entry"},
		{"duplicate", `{"members": [{"name": "db", "command": ["x"]}, {"name": "db", "entry": true}]}`,
			"options.members[1].name", "members[0] already"},
		{"no command", `{"members": [{"name": "db"}, {"name": "app", "entry": true}]}`, "options.members[0].command", "required"},
		{"bad env", `{"members": [{"name": "app", "entry": true, "env": ["NOEQUALS"]}]}`, "options.members[0].env[0]", "KEY=VALUE"},
		{"bad probe", `{"members": [{"name": "app", "entry": true, "probe": "health"}]}`, "options.members[0].probe", `"tcp" or an HTTP path`},
		{"relative dir", `{"members": [{"name": "app", "entry": true, "working_dir": "x"}]}`, "options.members[0].working_dir", "absolute"},
		{"socket", `{"members": [{"name": "app", "entry": true, "command": ["x", "{socket}"]}]}`, "options.members[0].command", "{port}"},
	} {
		ps := f.CheckHome(provider.Settings{Options: []byte(tc.opts)})
		if !slices.ContainsFunc(ps, func(p provider.Problem) bool { return p.Field == tc.field && strings.Contains(p.Msg, tc.msg) }) {
			t.Errorf("%s: problems %+v, want %s: …%s…", tc.name, ps, tc.field, tc.msg)
		}
	}
	ps := f.CheckHome(provider.Settings{Command: []string{"x"}, Options: []byte(`{"members": [{"name": "app", "entry": true}]}`)})
	if !slices.ContainsFunc(ps, func(p provider.Problem) bool {
		return p.Field == "command" && strings.Contains(p.Msg, "members[].command")
	}) {
		t.Errorf("a home command beside members: %+v", ps)
	}
	if ps := f.CheckHome(provider.Settings{Options: groupOptions("W=1")}); len(ps) != 0 {
		t.Fatalf("a valid group: %+v", ps)
	}
}

// TestGroupQuiesce: a gateway that shuts down after another one (same
// data) ran a group stops every member with the home, though it never
// woke the group itself.
func TestGroupQuiesce(t *testing.T) {
	dir := testDataDir(t)
	e1 := newExec(t, testConfig(dir))
	if _, err := e1.Wake(context.Background(), groupSpec(groupOptions("WORKER=1"))); err != nil {
		t.Fatal(err)
	}
	var procs []*proc
	for _, id := range []string{"g1", "g1@db", "g1@worker"} {
		procs = append(procs, memberProc(t, e1, id))
	}
	e1.Close() // the homes run on
	e2 := newExec(t, testConfig(dir))
	qs := e2.Quiesce(context.Background(), []string{"g1"})
	for _, q := range qs {
		if q.Err != nil || !q.Proven {
			t.Errorf("quiesce %s: proven %v, %v", q.ID, q.Proven, q.Err)
		}
	}
	if len(qs) != 3 {
		t.Errorf("quiesced %+v, want the home and its two members", qs)
	}
	for _, p := range procs {
		if _, err := procid.Lookup(p.Identity); err == nil {
			t.Errorf("pid %d runs on after the quiesce", p.PID)
		}
	}
}

// TestGroupSuspendResume: with suspend_signal, a suspend stops every
// member's process (SIGSTOP) and the next wake resumes the same ones.
func TestGroupSuspendResume(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.SuspendSignal = true
	e := newExec(t, cfg)
	s := groupSpec(groupOptions("WORKER=1"))
	ctx := context.Background()
	if _, err := e.Wake(ctx, s); err != nil {
		t.Fatal(err)
	}
	var procs []*proc
	for _, id := range []string{"g1", "g1@db", "g1@worker"} {
		procs = append(procs, memberProc(t, e, id))
	}
	if err := e.Suspend(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if st := testbin.ProcState(p.PID); st != 'T' {
			t.Errorf("pid %d is in state %c after the suspend, want T", p.PID, st)
		}
	}
	if st, err := e.Status(ctx, s); err != nil || st.State != provider.StateSuspended {
		t.Errorf("status %+v, %v; want suspended", st, err)
	}
	r, err := e.Wake(ctx, s)
	if err != nil || r.WasRunning {
		t.Fatalf("wake after the suspend: %+v, %v", r, err)
	}
	for i, id := range []string{"g1", "g1@db", "g1@worker"} {
		if p := memberProc(t, e, id); p != procs[i] || testbin.ProcState(p.PID) == 'T' {
			t.Errorf("%s: pid %d in state %c, want pid %d resumed", id, p.PID, testbin.ProcState(p.PID), procs[i].PID)
		}
	}
}

// TestGroupAdopted: a gateway started again on the same data adopts the
// running group's members at its first wake instead of starting them.
func TestGroupAdopted(t *testing.T) {
	dir := testDataDir(t)
	e1 := newExec(t, testConfig(dir))
	s := groupSpec(groupOptions("WORKER=1"))
	r1, err := e1.Wake(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"g1", "g1@db", "g1@worker"}
	var pids []int
	for _, id := range ids {
		pids = append(pids, memberProc(t, e1, id).PID)
	}
	e1.Close() // the homes run on
	e2 := newExec(t, testConfig(dir))
	s.Ref = r1.Ref
	r2, err := e2.Wake(context.Background(), s)
	if err != nil || !r2.WasRunning || r2.Endpoint != r1.Endpoint {
		t.Fatalf("wake by the next gateway: %+v, %v; want the running group adopted", r2, err)
	}
	for i, id := range ids {
		if p := memberProc(t, e2, id); p.PID != pids[i] || p.cmd != nil {
			t.Errorf("%s: pid %d (started here: %v), want pid %d adopted", id, p.PID, p.cmd != nil, pids[i])
		}
	}
}
