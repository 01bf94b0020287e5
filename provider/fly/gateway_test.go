package fly_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/provider/fly/flyfake"
)

// gatewayConfig is a gateway config with providers.fly on srv and home
// alice on machine m1, whose guest listens on port.
func gatewayConfig(t *testing.T, srv *flyfake.Server, port int, options string) string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(srv.Token()), 0o600); err != nil {
		t.Fatal(err)
	}
	if options == "" {
		options = fmt.Sprintf("{machine: %s, port: %d}", machine, port)
	}
	return fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
providers:
  fly:
    app: %s
    token: "file:%s"
    base_url: "%s"
    endpoint: "http://127.0.0.1:{port}"
    version_from: http
homes:
  - id: alice
    target: alice
    version: "1"
    provider: fly
    idle_timeout: 0s
    options: %s
`, srv.App(), tok, srv.URL, options)
}

// TestGatewayWakesFlyHome runs the real binary with providers.fly on the
// fake API: a request to /node/alice/ starts the machine through the API
// and is answered by the home behind it.
func TestGatewayWakesFlyHome(t *testing.T) {
	g := &guest{port: testbin.FreePort(t), lies: map[string]string{}}
	t.Cleanup(g.stop)
	srv := flyfake.New(flyfake.Options{OnState: g.onState})
	t.Cleanup(srv.Close)
	srv.AddMachine(machine, flyfake.MachineSpec{State: "suspended", Image: "registry.fly.io/homes:1"})
	p := testbin.ServeEnv(t, t.TempDir(), nil, gatewayConfig(t, srv, g.port, ""))
	res, err := http.Get("http://" + p.Addr + "/node/alice/whoami")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /node/alice/whoami: %d\n%s", res.StatusCode, p.Output())
	}
	if m, _ := srv.Machine(machine); m.State != "started" {
		t.Errorf("machine %s after the request, want started", m.State)
	}
	var starts int
	for _, c := range srv.Calls() {
		if c.Action == "start" {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("%d start calls, want 1: %v", starts, srv.Calls())
	}
}

// TestGatewayConfigChecksFlyHomes: the provider's section and a home's
// options are checked at load, each problem naming its field and line.
func TestGatewayConfigChecksFlyHomes(t *testing.T) {
	srv := flyfake.New(flyfake.Options{})
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, options, want string
	}{
		{"no machine", "{port: 8080}", "options.machine"},
		{"unknown option", "{machine: m1, image: x}", "options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := strings.NewReplacer("%ADDR%", "127.0.0.1:0", "%DATA%", t.TempDir()).Replace(gatewayConfig(t, srv, 1, tc.options))
			_, err := all.Load("fly.yaml", []byte(cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fly.yaml:") {
				t.Fatalf("load: %v; want a problem with %s and its line", err, tc.want)
			}
		})
	}
	cfg := strings.NewReplacer("%ADDR%", "127.0.0.1:0", "%DATA%", t.TempDir()).Replace(gatewayConfig(t, srv, 1, ""))
	bad := strings.Replace(cfg, "version_from: http", "version_from: guess", 1)
	if _, err := all.Load("fly.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "version_from") {
		t.Fatalf("load with a bad section: %v; want version_from named", err)
	}
	if _, err := all.Load("fly.yaml", []byte(cfg)); err != nil {
		t.Fatalf("load: %v", err)
	}
}

// TestGatewayRestartRefreshesFlyHome runs the real binary twice on the
// same data: the first wakes the home; its machine is stopped while no
// gateway runs; the second start reads the machine (a refresh in the
// background, logged with cause adopt) and records the home suspended
// instead of starting the machine again. A request then wakes it.
func TestGatewayRestartRefreshesFlyHome(t *testing.T) {
	g := &guest{port: testbin.FreePort(t), lies: map[string]string{}}
	t.Cleanup(g.stop)
	srv := flyfake.New(flyfake.Options{OnState: g.onState})
	t.Cleanup(srv.Close)
	srv.AddMachine(machine, flyfake.MachineSpec{State: "stopped", Image: "registry.fly.io/homes:1"})
	dir := t.TempDir()
	cfg := gatewayConfig(t, srv, g.port, "")
	get := func(p *testbin.Proc) {
		t.Helper()
		res, err := http.Get("http://" + p.Addr + "/node/alice/whoami")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /node/alice/whoami: %d\n%s", res.StatusCode, p.Output())
		}
	}
	first := testbin.ServeEnv(t, dir, nil, cfg)
	get(first)
	first.Stop()
	if m, _ := srv.Machine(machine); m.State != "started" {
		t.Fatalf("machine %s after the first gateway stopped, want it left started", m.State)
	}
	srv.SetState(machine, "stopped")
	srv.Reset()

	second := testbin.ServeEnv(t, dir, nil, cfg)
	testbin.Eventually(t, "the refresh at start", func() bool {
		return strings.Contains(second.Output(), "msg=refresh")
	})
	out := second.Output()
	for _, w := range []string{"cause=adopt", "before=running", "provider=stopped", "after=suspended"} {
		if !strings.Contains(out, w) {
			t.Errorf("the refresh line lacks %s:\n%s", w, out)
		}
	}
	for _, c := range srv.Calls() {
		if c.Action != "get" {
			t.Errorf("call %s at start: only reads were expected", c)
		}
	}
	if m, _ := srv.Machine(machine); m.State != "stopped" {
		t.Errorf("machine %s after the start, want it left stopped", m.State)
	}
	get(second)
	if m, _ := srv.Machine(machine); m.State != "started" {
		t.Errorf("machine %s after the request, want started", m.State)
	}
}
