package docker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/docker"
)

// newProvider builds the provider on the test engine with cfg's blanks
// filled in.
func newProvider(t *testing.T, e *engine, cfg docker.Config) (*docker.Provider, string) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = gatewayName()
	}
	cfg.Host = e.host
	if cfg.Image == "" {
		cfg.Image = imageRepo + ":{version}"
	}
	if cfg.Command == nil {
		cfg.Command = []string{"demo-home", "--addr", "0.0.0.0:{port}", "--target", "{target}", "--version", "{version}"}
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 2 * time.Second
	}
	e.cleanup(t, cfg.Name)
	p, err := docker.New(cfg, docker.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, cfg.Name
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestSuspendPause: with suspend: pause the engine freezes the container
// (the engine says paused, the provider suspended) and a wake resumes the
// same container at the same endpoint.
func TestSuspendPause(t *testing.T) {
	e := podman(t)
	p, name := newProvider(t, e, docker.Config{Suspend: docker.SuspendPause})
	s := provider.Spec{ID: "p1", Target: "p1", Version: "1"}
	r1, err := p.Wake(ctx(t), s)
	if err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p, s, "1")
	if err := p.Suspend(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	if c := e.one(t, name); c.State != "paused" {
		t.Fatalf("container %+v after a pause suspend, want paused", c)
	}
	if st, err := p.Status(ctx(t), s); err != nil || st.State != provider.StateSuspended {
		t.Fatalf("status %+v %v, want suspended", st, err)
	}
	r2, err := p.Wake(ctx(t), s)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Ref != r1.Ref || r2.Endpoint != r1.Endpoint {
		t.Fatalf("wake after the pause: %+v, want the same container and endpoint as %+v", r2, r1)
	}
	if c := e.one(t, name); c.State != "running" {
		t.Fatalf("container %+v after the wake, want running", c)
	}
	waitVersion(t, p, s, "1")
	// A stop of a paused container is proven too.
	if err := p.Suspend(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	if proven, err := p.Stop(ctx(t), s); err != nil || !proven {
		t.Fatalf("stop of a paused container: proven %v, %v", proven, err)
	}
	if c := e.one(t, name); c.State != "exited" {
		t.Fatalf("container %+v after the stop, want exited", c)
	}
}

// waitVersion waits until the home answers its version, and checks it.
func waitVersion(t *testing.T, p *docker.Provider, s provider.Spec, want string) {
	t.Helper()
	var v string
	testbin.Eventually(t, "the home to answer its version", func() bool {
		var err error
		v, err = p.Version(ctx(t), s)
		return err == nil
	})
	if v != want {
		t.Fatalf("version %q; want %q", v, want)
	}
}

// TestPullPolicies: pull: never refuses an image the engine lacks with a
// hint; pull: missing uses the image the engine has without pulling; pull:
// always pulls, and a pull that cannot reach a registry is not_found with
// a hint.
func TestPullPolicies(t *testing.T) {
	e := podman(t)
	s := provider.Spec{ID: "h", Target: "h", Version: "1"}

	never, name := newProvider(t, e, docker.Config{Pull: docker.PullNever, Image: imageRepo + ":absent-{version}"})
	_, err := never.Wake(ctx(t), s)
	pe, ok := provider.AsError(err)
	if !ok || pe.Reason != provider.ReasonBadConfig || !strings.Contains(pe.Hint, "pull") || !strings.Contains(err.Error(), "absent-1") {
		t.Fatalf("pull never, image absent: %v (%+v)", err, pe)
	}
	if cs := e.containers(t, name); len(cs) != 0 {
		t.Fatalf("containers made without their image: %+v", cs)
	}

	missing, _ := newProvider(t, e, docker.Config{Pull: docker.PullMissing})
	if _, err := missing.Wake(ctx(t), s); err != nil {
		t.Fatalf("pull missing, image present: %v", err)
	}

	always, _ := newProvider(t, e, docker.Config{Pull: docker.PullAlways})
	_, err = always.Wake(ctx(t), s)
	pe, ok = provider.AsError(err)
	if !ok || pe.Reason != provider.ReasonNotFound || !strings.Contains(pe.Hint, "could not pull") {
		t.Fatalf("pull always with no registry: %v (%+v)", err, pe)
	}
}

// TestEngineMissing: a socket with no engine is unavailable, with the
// hint naming the socket and what to do, at the provider and in the
// gateway's log; the public answer is a code and a sentence that name
// neither.
func TestEngineMissing(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	p, err := docker.New(docker.Config{Host: "unix://" + sock, Image: "x:{version}"}, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	_, err = p.Wake(ctx(t), provider.Spec{ID: "h", Version: "1"})
	pe, ok := provider.AsError(err)
	if !ok || pe.Reason != provider.ReasonUnavailable || !strings.Contains(pe.Hint, sock) || !strings.Contains(pe.Hint, "start the engine") {
		t.Fatalf("wake with no engine: %v (%+v)", err, pe)
	}

	gw := testbin.Serve(t, fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
providers:
  docker: {host: "unix://%s", image: "localhost/none:{version}"}
homes:
  - {id: d1, provider: docker, version: "1"}
`, sock))
	res, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + gw.Addr + "/node/d1/")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_, _ = fmt.Fprint(&b, readAll(res))
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(b.String(), `"code":"wake_failed"`) ||
		!strings.Contains(b.String(), "request_id") {
		t.Fatalf("public answer with no engine: %d %s", res.StatusCode, b.String())
	}
	for _, leak := range []string{sock, "docker", "engine", "unix"} {
		if strings.Contains(b.String(), leak) {
			t.Errorf("public answer names %q: %s", leak, b.String())
		}
	}
	testbin.Eventually(t, "the log names the socket and the fix", func() bool {
		out := gw.Output()
		return strings.Contains(out, sock) && strings.Contains(out, "start the engine")
	})
}

func readAll(res *http.Response) string {
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestEngineErrorHints: the engine's answers that only a Docker daemon
// gives (Podman's service publishes no fixed host ports here) are told
// apart by their message and status: a port taken on the host, a name
// taken by a container of someone else's.
func TestEngineErrorHints(t *testing.T) {
	for _, c := range []struct {
		err    error
		reason string
		hint   string
	}{
		{cerrdefs.ErrUnknown.WithMessage("driver failed programming external connectivity: Bind for 127.0.0.1:8080 failed: port is already allocated"),
			docker.ReasonPortInUse, "free it"},
		{cerrdefs.ErrConflict.WithMessage(`Conflict. The container name "/wakegate-h" is already in use by container "abc"`),
			provider.ReasonConflict, "without this gateway's labels"},
		{cerrdefs.ErrNotFound.WithMessage("No such image: registry.example/app:9"), provider.ReasonNotFound, "no such image"},
		{cerrdefs.ErrPermissionDenied.WithMessage("denied"), provider.ReasonRefused, "credentials"},
	} {
		err := docker.EngineError("wake", "h", c.err)
		pe, ok := provider.AsError(err)
		if !ok || pe.Reason != c.reason || !strings.Contains(pe.Hint, c.hint) || !errors.Is(err, c.err) {
			t.Errorf("%v: reason %q hint %q, want %q and a hint with %q", c.err, pe.Reason, pe.Hint, c.reason, c.hint)
		}
	}
}

// TestChecks: the section's and a home's settings are checked field by
// field, as the config loader and the admin API report them.
func TestChecks(t *testing.T) {
	f := docker.Factory()
	var node yaml.Node
	if err := yaml.Unmarshal([]byte("{host: http://x, port: 70000, pull: sometimes, suspend: freeze, network: none, env: [NOEQ], name: 'Bad Name', imag: x}"), &node); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range f.CheckSection(node.Content[0]) {
		got[p.Field] = true
	}
	for _, want := range []string{"host", "port", "pull", "suspend", "network", "env[0]", "name", "imag"} {
		if !got[want] {
			t.Errorf("section: no problem for %s (got %v)", want, got)
		}
	}
	got = map[string]bool{}
	for _, p := range f.CheckHome(provider.Settings{Dir: "/srv",
		Options: []byte(`{"volumes": ["data", "v:rel", "v:/d:rx"], "memory": "lots", "cpus": -1, "env": ["X"]}`)}) {
		got[p.Field] = true
	}
	for _, want := range []string{"working_dir", "options.volumes[0]", "options.volumes[1]", "options.volumes[2]",
		"options.memory", "options.cpus", "options.env[0]"} {
		if !got[want] {
			t.Errorf("home: no problem for %s (got %v)", want, got)
		}
	}
	if ps := f.CheckHome(provider.Settings{Options: []byte(`{"image": "a:{version}", "volumes": ["data:/data", "/srv/x:/x:ro"], "memory": "512m", "cpus": 1.5}`)}); len(ps) != 0 {
		t.Errorf("good options refused: %v", ps)
	}
	if ps := f.CheckHome(provider.Settings{Options: []byte(`{"memory_max": "256MiB", "cpu_max": 0.5, "pids_max": 100, ` +
		`"cap_add": ["net_bind_service", "CAP_CHOWN"], "user": "1000:1000", "read_only": true}`)}); len(ps) != 0 {
		t.Errorf("good isolation options refused: %v", ps)
	}
	got = map[string]bool{}
	for _, p := range f.CheckHome(provider.Settings{Options: []byte(`{"memory_max": "12k", "cpu_max": -1, "pids_max": -2, ` +
		`"cap_add": ["NET_BIND"], "user": "a b", "memory": "1g", "cpus": 1}`)}) {
		got[p.Field] = true
	}
	for _, want := range []string{"options.memory_max", "options.cpu_max", "options.pids_max", "options.cap_add[0]",
		"options.user", "options.memory", "options.cpus"} {
		if !got[want] {
			t.Errorf("home: no problem for %s (got %v)", want, got)
		}
	}
	if err := yaml.Unmarshal([]byte("{pids_max: -5, cap_add: [ALL], user: ':1'}"), &node); err != nil {
		t.Fatal(err)
	}
	got = map[string]bool{}
	for _, p := range f.CheckSection(node.Content[0]) {
		got[p.Field] = true
	}
	for _, want := range []string{"pids_max", "cap_add[0]", "user"} {
		if !got[want] {
			t.Errorf("section: no problem for %s (got %v)", want, got)
		}
	}
	if ps := f.CheckHome(provider.Settings{Options: []byte(`{"region": "x"}`)}); len(ps) != 1 || ps[0].Field != "options" {
		t.Errorf("unknown option: %v", ps)
	}
}

// TestWakeRemakesStaleContainer: a stopped container labelled with
// another version than the wake's is made again from the wake's image; a
// running one is left as it is, for the version assert to judge.
func TestWakeRemakesStaleContainer(t *testing.T) {
	e := podman(t)
	p, name := newProvider(t, e, docker.Config{})
	s := provider.Spec{ID: "s1", Target: "s1", Version: "1"}
	r1, err := p.Wake(ctx(t), s)
	if err != nil {
		t.Fatal(err)
	}
	s2 := s
	s2.Version = "2"
	if r, err := p.Wake(ctx(t), s2); err != nil || r.Ref != r1.Ref {
		t.Fatalf("wake of version 2 while 1 runs: %+v %v, want the running container %s", r, err, r1.Ref)
	}
	if proven, err := p.Stop(ctx(t), s); err != nil || !proven {
		t.Fatalf("stop: %v %v", proven, err)
	}
	r2, err := p.Wake(ctx(t), s2)
	if err != nil {
		t.Fatal(err)
	}
	if c := e.one(t, name); r2.Ref == r1.Ref || c.ID != r2.Ref || c.Version != "2" || c.State != "running" {
		t.Fatalf("after a wake of version 2 on a stopped 1: %+v (wake %+v), want a new container of 2", c, r2)
	}
	waitVersion(t, p, s2, "2")
}
