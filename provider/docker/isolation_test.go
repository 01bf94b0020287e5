package docker_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/docker"
)

// inContainer runs the tests' probe inside container ref (podman exec)
// and returns its output and whether it exited 0.
func (e *engine) inContainer(t *testing.T, ref string, args ...string) (string, bool) {
	t.Helper()
	out, err := e.podman(append([]string{"exec", ref, "/probe"}, args...)...)
	return out, err == nil
}

// inspectF is podman inspect's answer for ref with a Go template.
func (e *engine) inspectF(t *testing.T, ref, format string) string {
	t.Helper()
	out, err := e.podman("inspect", "--format", format, ref)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// networks lists the names of the networks labelled with gateway name.
func (e *engine) networks(t *testing.T, name string) []string {
	t.Helper()
	out, err := e.podman("network", "ls", "--format", "{{.Name}}", "--filter", "label=wakegate.gateway="+name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// homeCtr returns the container of home id among gateway name's.
func (e *engine) homeCtr(t *testing.T, name, id string) ctr {
	t.Helper()
	for _, c := range e.containers(t, name) {
		if c.Home == id {
			return c
		}
	}
	t.Fatalf("no container of home %s among %+v", id, e.containers(t, name))
	return ctr{}
}

// procStatus is the status lines of the container's own main process,
// read from the host: what the home's program runs with.
func (e *engine) procStatus(t *testing.T, ref string) map[string]string {
	t.Helper()
	pid := e.inspectF(t, ref, "{{.State.Pid}}")
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatal(err)
	}
	return statusLines(string(b))
}

// statusLines reads "Key: value" lines, with runs of blanks as one space.
func statusLines(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[strings.TrimSpace(k)] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// TestHomesCannotReachEachOther: two homes of one gateway each serve
// through the gateway, and neither's container can open the other's port:
// not at its address on a container network, not through the host's end of
// its own network at the other's published port. The probe reaches its own
// container's port, so a refusal is the isolation, not a broken probe.
func TestHomesCannotReachEachOther(t *testing.T) {
	r := newRig(t)
	r.serve(t, r.config("", "", "  - {id: c1, provider: docker, version: \"1\", idle_timeout: 0s}\n"+
		"  - {id: c2, provider: docker, version: \"1\", idle_timeout: 0s}\n"))
	for _, h := range []string{"c1", "c2"} {
		if code, v := r.version(t, h); code != http.StatusOK || v != "1" {
			t.Fatalf("%s through the gateway: %d %q\n%s", h, code, v, r.gw.Output())
		}
	}
	c1, c2 := r.e.homeCtr(t, r.name, "c1"), r.e.homeCtr(t, r.name, "c2")
	addrs := func(ref, field string) []string {
		return strings.Fields(r.e.inspectF(t, ref, "{{range .NetworkSettings.Networks}}{{."+field+"}} {{end}}"))
	}
	ip1, ip2, gw1 := addrs(c1.ID, "IPAddress"), addrs(c2.ID, "IPAddress"), addrs(c1.ID, "Gateway")
	if len(ip1) == 0 || len(ip2) == 0 || len(gw1) == 0 {
		t.Fatalf("addresses: c1 %v c2 %v, c1's gateway %v", ip1, ip2, gw1)
	}
	if out, ok := r.e.inContainer(t, c1.ID, "dial", ip1[0]+":8080"); !ok {
		t.Fatalf("c1 cannot open its own port %s:8080: %s", ip1[0], out)
	}
	for _, ip := range ip2 {
		if out, ok := r.e.inContainer(t, c1.ID, "dial", ip+":8080"); ok {
			t.Errorf("c1 opened c2's port at %s:8080: %s", ip, out)
		}
	}
	hostPort := r.e.inspectF(t, c2.ID, `{{range (index .NetworkSettings.Ports "8080/tcp")}}{{.HostPort}}{{end}}`)
	for _, gw := range gw1 {
		if out, ok := r.e.inContainer(t, c1.ID, "dial", gw+":"+hostPort); ok {
			t.Errorf("c1 opened c2's published port at %s:%s: %s", gw, hostPort, out)
		}
	}
	for _, h := range []string{"c1", "c2"} {
		if code, v := r.version(t, h); code != http.StatusOK || v != "1" {
			t.Fatalf("%s through the gateway afterwards: %d %q", h, code, v)
		}
	}
	if nets := r.e.networks(t, r.name); len(nets) != 2 {
		t.Errorf("networks of the gateway: %v, want one per home", nets)
	}
}

// TestHomeNetworkLifecycle: a home's network is made with its first
// container, labelled, found again (not made twice) by a provider started
// later, kept across stops and rolls, and removed with the home, even
// when its container is gone already.
func TestHomeNetworkLifecycle(t *testing.T) {
	e := podman(t)
	p, name := newProvider(t, e, docker.Config{})
	s := provider.Spec{ID: "n1", Target: "n1", Version: "1"}
	if _, err := p.Wake(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	want := []string{name + "-n1"}
	if nets := e.networks(t, name); fmt.Sprint(nets) != fmt.Sprint(want) {
		t.Fatalf("networks after the first wake: %v, want %v", nets, want)
	}
	if l := e.podmanOut(t, "network", "inspect", "--format", `{{index .Labels "wakegate.home"}}`, want[0]); l != "n1" {
		t.Fatalf("the network's home label: %q", l)
	}
	// A gateway started again on the same engine adopts what is there.
	p2, err := docker.New(docker.Config{Host: e.host, Name: name, Image: imageRepo + ":{version}",
		Command: []string{"demo-home", "--addr", "0.0.0.0:{port}", "--target", "{target}", "--version", "{version}"}},
		docker.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p2.Close() }()
	if _, err := p2.Wake(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Stop(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	s2 := s
	s2.Version = "2"
	if _, err := p2.Recreate(ctx(t), s2); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p2, s2, "2")
	if nets := e.networks(t, name); fmt.Sprint(nets) != fmt.Sprint(want) {
		t.Fatalf("networks after a restart, a stop and a roll: %v, want %v", nets, want)
	}
	if err := p2.Remove(ctx(t), s2); err != nil {
		t.Fatal(err)
	}
	if cs, nets := e.containers(t, name), e.networks(t, name); len(cs) != 0 || len(nets) != 0 {
		t.Fatalf("after the removal: containers %+v, networks %v", cs, nets)
	}
	// A network left behind without its container goes with the home.
	if _, err := p2.Wake(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	c := e.one(t, name)
	if _, err := e.podman("rm", "--force", "--time", "0", c.ID); err != nil {
		t.Fatal(err)
	}
	if err := p2.Remove(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	if nets := e.networks(t, name); len(nets) != 0 {
		t.Fatalf("a network without its container outlived the home's removal: %v", nets)
	}
}

// podmanOut is podman's output, failing the test on an error.
func (e *engine) podmanOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.podman(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestContainerHardenedByDefault: a home's container, as its own program
// and a process run in it see it, has no capability, cannot gain
// privileges, and has the provider's pids limit, not the engine's.
func TestContainerHardenedByDefault(t *testing.T) {
	e := podman(t)
	p, name := newProvider(t, e, docker.Config{})
	s := provider.Spec{ID: "d1", Target: "d1", Version: "1"}
	if _, err := p.Wake(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p, s, "1")
	c := e.one(t, name)
	main := e.procStatus(t, c.ID)
	if main["NoNewPrivs"] != "1" || main["CapEff"] != "0000000000000000" || main["CapBnd"] != "0000000000000000" {
		t.Errorf("the home's program: NoNewPrivs %q CapEff %q CapBnd %q, want 1 and no capability",
			main["NoNewPrivs"], main["CapEff"], main["CapBnd"])
	}
	out, ok := e.inContainer(t, c.ID, "status")
	in := statusLines(out)
	if !ok || in["NoNewPrivs"] != "1" || in["CapEff"] != "0000000000000000" || in["pids.max"] != "1024" {
		t.Errorf("inside the container: %q, want NoNewPrivs 1, CapEff 0 and pids.max 1024", out)
	}
}

// TestContainerOptions: a home's options add the capabilities it names
// (and no other), set its pids, memory and CPU limits, its user, and a
// read-only root with a writable /tmp.
func TestContainerOptions(t *testing.T) {
	e := podman(t)
	p, name := newProvider(t, e, docker.Config{PidsMax: 200})
	caps := provider.Spec{ID: "caps", Target: "caps", Version: "1",
		Options: json.RawMessage(`{"cap_add": ["NET_BIND_SERVICE"], "pids_max": 64, "memory_max": "64MiB", "cpu_max": 0.5}`)}
	if _, err := p.Wake(ctx(t), caps); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p, caps, "1")
	c := e.homeCtr(t, name, "caps")
	out, _ := e.inContainer(t, c.ID, "status")
	in := statusLines(out)
	// NET_BIND_SERVICE is capability 10.
	if in["CapEff"] != "0000000000000400" || in["NoNewPrivs"] != "1" || in["pids.max"] != "64" {
		t.Errorf("with cap_add and pids_max: %q, want CapEff 0x400, NoNewPrivs 1, pids.max 64", out)
	}
	if got := e.inspectF(t, c.ID, "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}"); got != "67108864 500000000" {
		t.Errorf("memory and CPU limits: %q, want 67108864 500000000", got)
	}

	ro := provider.Spec{ID: "ro", Target: "ro", Version: "1",
		Options: json.RawMessage(`{"read_only": true, "user": "65534:65534"}`)}
	if _, err := p.Wake(ctx(t), ro); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, p, ro, "1")
	c = e.homeCtr(t, name, "ro")
	if out, ok := e.inContainer(t, c.ID, "write", "/x"); ok {
		t.Errorf("a read-only home wrote /x: %s", out)
	}
	if out, ok := e.inContainer(t, c.ID, "write", "/tmp/x"); !ok {
		t.Errorf("a read-only home cannot write /tmp: %s", out)
	}
	if main := e.procStatus(t, c.ID); !strings.HasPrefix(main["Uid"], "65534 ") || main["NoNewPrivs"] != "1" {
		t.Errorf("the home's program runs as %q (NoNewPrivs %q), want uid 65534", main["Uid"], main["NoNewPrivs"])
	}
	out, _ = e.inContainer(t, c.ID, "status")
	if in := statusLines(out); in["pids.max"] != "200" {
		t.Errorf("the section's pids_max: %q, want pids.max 200", out)
	}
}

// TestSettingsChangeRemakesStoppedContainer: a stopped container made
// with other isolation settings (an older gateway's, or before the
// options changed) is made again at the next wake; a running one is left
// as it is until it stops.
func TestSettingsChangeRemakesStoppedContainer(t *testing.T) {
	e := podman(t)
	p, name := newProvider(t, e, docker.Config{})
	s := provider.Spec{ID: "m1", Target: "m1", Version: "1"}
	r1, err := p.Wake(ctx(t), s)
	if err != nil {
		t.Fatal(err)
	}
	tight := s
	tight.Options = json.RawMessage(`{"pids_max": 50}`)
	if r, err := p.Wake(ctx(t), tight); err != nil || r.Ref != r1.Ref {
		t.Fatalf("wake with new limits while it runs: %+v %v, want the running container", r, err)
	}
	if _, err := p.Stop(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	r2, err := p.Wake(ctx(t), tight)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Ref == r1.Ref {
		t.Fatalf("a stopped container with the old limits was started again, want a new one")
	}
	waitVersion(t, p, tight, "1")
	out, _ := e.inContainer(t, e.one(t, name).ID, "status")
	if in := statusLines(out); in["pids.max"] != "50" {
		t.Errorf("after the change: %q, want pids.max 50", out)
	}
}
