package docker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/docker"
)

// TestGroupConfigErrors: a group's options are refused by field: a
// depends_on naming no member, a cycle, two entries or none, a duplicate
// name, a member without an image, and a home image beside the members'.
func TestGroupConfigErrors(t *testing.T) {
	f := docker.Factory()
	for _, tc := range []struct{ name, opts, field, msg string }{
		{"unknown depends_on", `{"members": [{"name": "db", "image": "pg"}, {"name": "app", "image": "a", "entry": true, "depends_on": ["cache"]}]}`,
			"options.members[1].depends_on[0]", `no member is named "cache"`},
		{"cycle", `{"members": [{"name": "db", "image": "pg", "depends_on": ["app"]}, {"name": "app", "image": "a", "entry": true, "depends_on": ["db"]}]}`,
			"options.members", "cycle: db -> app -> db"},
		{"two entries", `{"members": [{"name": "db", "image": "pg", "entry": true}, {"name": "app", "image": "a", "entry": true}]}`,
			"options.members[1].entry", "members[0] is the entry already"},
		{"no entry", `{"members": [{"name": "db", "image": "pg"}]}`, "options.members", "no member is the entry"},
		{"duplicate name", `{"members": [{"name": "db", "image": "pg"}, {"name": "db", "image": "a", "entry": true}]}`,
			"options.members[1].name", "members[0] already"},
		{"no image", `{"members": [{"name": "db"}, {"name": "app", "image": "a", "entry": true}]}`, "options.members[0].image", "required"},
		{"bad env", `{"members": [{"name": "app", "image": "a", "entry": true, "env": ["NOEQUALS"]}]}`, "options.members[0].env[0]", "KEY=VALUE"},
		{"home image", `{"image": "x", "members": [{"name": "app", "image": "a", "entry": true}]}`, "options.image", "members[].image"},
		{"existing container", `{"container": "c", "members": [{"name": "app", "image": "a", "entry": true}]}`, "options.members", "options.container"},
		{"existing entry", `{"container": "c", "members": [{"name": "app", "container": "x", "entry": true}]}`,
			"options.members[0].container", `the entry is options.container, "c"`},
		{"existing member without container", `{"container": "c", "members": [{"name": "app", "container": "c", "entry": true}, {"name": "db"}]}`,
			"options.members[1].container", "required in a group of existing containers"},
		{"existing member with env", `{"container": "c", "members": [{"name": "app", "container": "c", "entry": true, "env": ["A=1"]}]}`,
			"options.members[0].image", "set on the container"},
		{"container in a made group", `{"members": [{"name": "app", "image": "a", "container": "x", "entry": true}]}`,
			"options.members[0].container", "only a group of existing containers"},
	} {
		ps := f.CheckHome(provider.Settings{Options: []byte(tc.opts)})
		found := false
		for _, p := range ps {
			found = found || p.Field == tc.field && strings.Contains(p.Msg, tc.msg)
		}
		if !found {
			t.Errorf("%s: problems %+v, want %s: …%s…", tc.name, ps, tc.field, tc.msg)
		}
	}
	ok := `{"members": [{"name": "db", "image": "pg"}, {"name": "worker", "image": "w", "depends_on": ["db", "app"]},` +
		` {"name": "app", "image": "a", "entry": true, "depends_on": ["db"]}]}`
	if ps := f.CheckHome(provider.Settings{Options: []byte(ok)}); len(ps) != 0 {
		t.Fatalf("a valid group: %+v", ps)
	}
	ok = `{"container": "c", "port": 80, "members": [{"name": "db", "container": "d"}, {"name": "app", "container": "c", "entry": true, "depends_on": ["db"]}]}`
	if ps := f.CheckHome(provider.Settings{Options: []byte(ok)}); len(ps) != 0 {
		t.Fatalf("a valid group of existing containers: %+v", ps)
	}
}

// groupSpec is home id as a group: member db (image dbImage, serving on
// 9000) and the entry app (image {version}, the section's command),
// which depends on db.
func groupSpec(t *testing.T, id, dbImage string) provider.Spec {
	t.Helper()
	opts, err := json.Marshal(map[string]any{"pids_max": 77, "members": []map[string]any{
		{"name": "db", "image": dbImage, "command": []string{"demo-home", "--addr", "0.0.0.0:9000", "--target", "db", "--version", "db"}},
		{"name": "app", "image": imageRepo + ":{version}", "entry": true, "depends_on": []string{"db"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return provider.Spec{ID: id, Target: id, Version: "1", Options: opts}
}

// nanos is a time of container ref's state (StartedAt, FinishedAt) in
// nanoseconds.
func (e *engine) nanos(t *testing.T, ref, field string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(e.inspectF(t, ref, "{{.State."+field+".UnixNano}}"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGroupWakeAndStopInOrder: a wake starts db, waits for its health
// check, and only then makes and starts the entry app, which reaches db by
// its member name on the home's network; db runs under the home's limits.
// A stop stops app, then db, and is proven once both are down.
func TestGroupWakeAndStopInOrder(t *testing.T) {
	e := podman(t)
	e.healthImage(t, "db-checked", "dial", "127.0.0.1:9000")
	p, name := newProvider(t, e, docker.Config{})
	s := groupSpec(t, "g1", imageRepo+":db-checked")
	db, app := name+"-g1_db", name+"-g1"

	type result struct {
		r   provider.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := p.Wake(ctx(t), s)
		done <- result{r, err}
	}()
	testbin.Eventually(t, "db serving while its health check has not run", func() bool {
		_, open := e.inContainer(t, db, "dial", "127.0.0.1:9000")
		return open
	})
	for _, c := range e.containers(t, name) {
		if c.Home == "g1" {
			t.Fatalf("the entry %+v exists before db is healthy", c)
		}
	}
	if out, err := e.podman("healthcheck", "run", db); err != nil {
		t.Fatalf("healthcheck run: %v %s", err, out)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	waitVersion(t, p, s, "1")
	if a, d := e.nanos(t, app, "StartedAt"), e.nanos(t, db, "StartedAt"); a <= d {
		t.Fatalf("app started at %d, db at %d: want db first", a, d)
	}
	if out, open := e.inContainer(t, app, "dial", "db:9000"); !open {
		t.Fatalf("app cannot reach db by name: %s", out)
	}
	if out, _ := e.inContainer(t, db, "status"); !strings.Contains(out, "pids.max: 77") || !strings.Contains(out, "NoNewPrivs: 1") {
		t.Fatalf("db's process: %s, want the home's pids limit and no new privileges", out)
	}
	if st, err := p.Status(ctx(t), s); err != nil || st.State != provider.StateRunning ||
		!strings.Contains(st.Reason, "db running") || !strings.Contains(st.Reason, "app running") {
		t.Fatalf("status %+v %v, want running with both members named", st, err)
	}

	if proven, err := p.Stop(ctx(t), s); err != nil || !proven {
		t.Fatalf("stop: proven %v, %v", proven, err)
	}
	for _, ref := range []string{db, app} {
		if st := e.inspectF(t, ref, "{{.State.Status}}"); st != "exited" {
			t.Fatalf("%s is %s after the stop, want exited", ref, st)
		}
	}
	if a, d := e.nanos(t, app, "FinishedAt"), e.nanos(t, db, "FinishedAt"); a > d {
		t.Fatalf("app finished at %d, db at %d: want app stopped first", a, d)
	}
	if st, err := p.Status(ctx(t), s); err != nil || st.State != provider.StateStopped || !strings.Contains(st.Reason, "db exited") {
		t.Fatalf("status after the stop %+v %v, want stopped naming db", st, err)
	}
	if err := p.Remove(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	if cs := e.containers(t, name); len(cs) != 0 {
		t.Fatalf("containers after the remove: %+v", cs)
	}
}

// TestGroupMemberFails: a member whose program exits at once fails the
// wake with its container's name and its exit in the operator's hint.
func TestGroupMemberFails(t *testing.T) {
	e := podman(t)
	p, name := newProvider(t, e, docker.Config{})
	s := groupSpec(t, "g2", imageBroken)
	_, err := p.Wake(ctx(t), s)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Reason != docker.ReasonExited {
		t.Fatalf("wake with a broken member: %v, want %s", err, docker.ReasonExited)
	}
	if !strings.Contains(pe.Hint, "container "+name+"-g2_db") || !strings.Contains(pe.Hint, "exited with code") {
		t.Fatalf("hint %q, want the member's container and its exit", pe.Hint)
	}
}

// TestGroupMemberUnhealthy: a member whose health check fails fails the
// wake before its dependants start, with the member's container and the
// check's output in the operator's hint.
func TestGroupMemberUnhealthy(t *testing.T) {
	e := podman(t)
	e.healthImage(t, "db-sick", "write", "/no-such-folder/x")
	p, name := newProvider(t, e, docker.Config{})
	s := groupSpec(t, "g4", imageRepo+":db-sick")
	db := name + "-g4_db"
	done := make(chan error, 1)
	go func() {
		_, err := p.Wake(ctx(t), s)
		done <- err
	}()
	testbin.Eventually(t, "db serving while its health check has not run", func() bool {
		_, open := e.inContainer(t, db, "dial", "127.0.0.1:9000")
		return open
	})
	if out, err := e.podman("healthcheck", "run", db); err == nil {
		t.Fatalf("healthcheck run passed (%s), want a failure", out)
	}
	err := <-done
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Reason != docker.ReasonUnhealthy {
		t.Fatalf("wake with an unhealthy member: %v, want %s", err, docker.ReasonUnhealthy)
	}
	if !strings.Contains(pe.Hint, "container "+db) || !strings.Contains(pe.Hint, "not written: open /no-such-folder/x") {
		t.Fatalf("hint %q, want the member's container and the check's output", pe.Hint)
	}
	for _, c := range e.containers(t, name) {
		if c.Home == "g4" {
			t.Fatalf("the entry %+v was made although db is unhealthy", c)
		}
	}
}

// TestGroupRoll: a roll to version 2 replaces the entry and leaves db,
// whose image did not change, running as it was; a db image that changes
// replaces db too.
func TestGroupRoll(t *testing.T) {
	e := podman(t)
	p, name := newProvider(t, e, docker.Config{})
	s := groupSpec(t, "g3", imageRepo+":1")
	db := name + "-g3_db"
	if _, err := p.Wake(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p, s, "1")
	dbID := e.inspectF(t, db, "{{.Id}}")

	s.Version = "2"
	if _, err := p.Recreate(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p, s, "2")
	if now := e.inspectF(t, db, "{{.Id}} {{.State.Status}}"); now != dbID+" running" {
		t.Fatalf("db after a roll of the entry: %s, want %s running", now, dbID)
	}

	s2 := groupSpec(t, "g3", imageRepo+":3")
	s2.Version = "2"
	if _, err := p.Recreate(ctx(t), s2); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p, s2, "2")
	if now := e.inspectF(t, db, "{{.Id}} {{.Config.Image}}"); strings.HasPrefix(now, dbID) || !strings.HasSuffix(now, ":3") {
		t.Fatalf("db after its image changed: %s, want a new container of image 3", now)
	}
}

// TestGatewayWakesGroup: through the gateway, 100 concurrent first
// requests to a three-member group (db; the entry app, after db; a worker,
// after both) are all answered by the app, each member started once; the
// idle suspend then stops all three.
func TestGatewayWakesGroup(t *testing.T) {
	r := newRig(t)
	serve := func(port string) string {
		return fmt.Sprintf(`[demo-home, --addr, "0.0.0.0:%s", --target, x, --version, x]`, port)
	}
	r.serve(t, r.config("", "", fmt.Sprintf(`  - id: g1
    provider: docker
    version: "1"
    idle_timeout: 6s
    options:
      members:
        - {name: db, image: "%[1]s:1", command: %[2]s}
        - {name: worker, image: "%[1]s:1", command: %[3]s, depends_on: [db, app]}
        - {name: app, image: "%[1]s:{version}", entry: true, depends_on: [db]}
`, imageRepo, serve("9000"), serve("9001"))))
	const callers = 100
	codes := make(chan string, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			code, body := r.get(t, "/node/g1/")
			codes <- fmt.Sprint(code, strings.Contains(body, "version: <code>1</code>"))
		})
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != "200 true" {
			t.Fatalf("a caller got %s, want 200 from the app\n%s", c, r.gw.Output())
		}
	}
	out := r.gw.Output()
	if n := strings.Count(out, `msg="docker: member started"`); n != 2 {
		t.Fatalf("%d member starts logged, want 2 (db, worker)\n%s", n, out)
	}
	if n := strings.Count(out, `msg="docker: container created"`); n != 1 {
		t.Fatalf("%d entry containers made, want 1\n%s", n, out)
	}
	for _, ref := range []string{r.name + "-g1_db", r.name + "-g1_worker", r.name + "-g1"} {
		if rc := r.e.inspectF(t, ref, "{{.RestartCount}} {{.State.Status}}"); rc != "0 running" {
			t.Fatalf("%s: %s, want running, started once", ref, rc)
		}
	}
	testbin.Eventually(t, "the idle suspend stopping every member", func() bool {
		for _, c := range r.e.containers(t, r.name) {
			if c.State != "exited" {
				return false
			}
		}
		return len(r.e.containers(t, r.name)) == 3
	})
}

// TestGroupMemberVolume: a member's named volume keeps what the member
// wrote when a roll makes the member again from another image; a bad
// volume is refused by its field.
func TestGroupMemberVolume(t *testing.T) {
	bad := `{"members": [{"name": "db", "image": "pg", "volumes": ["data"]}, {"name": "app", "image": "a", "entry": true}]}`
	ps := docker.Factory().CheckHome(provider.Settings{Options: []byte(bad)})
	if len(ps) != 1 || ps[0].Field != "options.members[0].volumes[0]" || !strings.Contains(ps[0].Msg, "NAME:/path") {
		t.Fatalf("a volume without a path: %+v, want options.members[0].volumes[0]", ps)
	}

	e := podman(t)
	p, name := newProvider(t, e, docker.Config{})
	vol := name + "-dbdata"
	t.Cleanup(func() { _, _ = e.podman("volume", "rm", "--force", vol) })
	spec := func(dbImage string) provider.Spec {
		opts, err := json.Marshal(map[string]any{"members": []map[string]any{
			{"name": "db", "image": dbImage, "volumes": []string{vol + ":/data"},
				"command": []string{"demo-home", "--addr", "0.0.0.0:9000", "--target", "db", "--version", "db"}},
			{"name": "app", "image": imageRepo + ":{version}", "entry": true, "depends_on": []string{"db"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return provider.Spec{ID: "g5", Target: "g5", Version: "1", Options: opts}
	}
	db := name + "-g5_db"
	s := spec(imageRepo + ":1")
	if _, err := p.Wake(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	if out, ok := e.inContainer(t, db, "write", "/data/kept"); !ok {
		t.Fatalf("db cannot write its volume: %s", out)
	}
	before := e.inspectF(t, db, "{{.Id}}")
	s = spec(imageRepo + ":3")
	if _, err := p.Recreate(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	if now := e.inspectF(t, db, "{{.Id}}"); now == before {
		t.Fatalf("db is container %s still, want one made again from image 3", now)
	}
	if out, ok := e.inContainer(t, db, "read", "/data/kept"); !ok || out != "x" {
		t.Fatalf("db after the roll reads %q (%v), want what it wrote before", out, ok)
	}
}

// TestGatewayMemberKilled: a member killed while its group runs is
// noticed from the engine (the home recorded failed, naming the member),
// and the next request wakes the group again: the member runs, the entry
// answers.
func TestGatewayMemberKilled(t *testing.T) {
	r := newRig(t)
	cfg := r.config("", "", fmt.Sprintf(`  - id: g1
    provider: docker
    version: "1"
    idle_timeout: 0s
    options:
      members:
        - {name: db, image: "%[1]s:1", command: [demo-home, --addr, "0.0.0.0:9000", --target, db, --version, db]}
        - {name: app, image: "%[1]s:{version}", entry: true, depends_on: [db]}
`, imageRepo))
	r.serve(t, noBackoff(cfg))
	if code, v := r.version(t, "g1"); code != http.StatusOK || v != "1" {
		t.Fatalf("first request: %d %q\n%s", code, v, r.gw.Output())
	}
	r.killMember(t, "g1", "db", r.name+"-g1_db")
	if h := r.home(t, "g1"); h.Status != "running" {
		t.Fatalf("the home is %s after the wake, want running", h.Status)
	}
}

// noBackoff is cfg with no failure backoff to wait out after a group
// failed: the request after a member's kill is the first wake since.
func noBackoff(cfg string) string {
	return strings.Replace(cfg, "  ready_timeout: 20s\n", "  ready_timeout: 20s\n  failure_backoff: 1ms\n", 1)
}

// killMember kills member (container ctr) of the running group home,
// waits until the home is recorded failed with the member's exit, and
// has the next request wake the group again: answered by the entry, the
// member running.
func (r *rig) killMember(t *testing.T, home, member, ctr string) {
	t.Helper()
	if out, err := r.e.podman("kill", "--signal", "KILL", ctr); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	testbin.Eventually(t, "the group recorded failed", func() bool { return r.home(t, home).Status == "failed" })
	if h := r.home(t, home); !strings.Contains(h.Reason, "member "+member+": the container exited with code 137") {
		t.Fatalf("home get says %q, want member %s's exit", h.Reason, member)
	}
	if code, v := r.version(t, home); code != http.StatusOK || v != "1" {
		t.Fatalf("the request after the kill: %d %q, want the group woken\n%s", code, v, r.gw.Output())
	}
	if st := r.e.inspectF(t, ctr, "{{.State.Status}}"); st != "running" {
		t.Fatalf("%s is %s after the wake, want running", member, st)
	}
}
