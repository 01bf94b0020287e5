package execprov

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"

	"github.com/wakegate/wakegate/internal/testbin"
)

// limitsOrSkip skips a test of controller ctl's limit where this machine
// cannot enforce it (no root, no cgroup per home, no controller).
func limitsOrSkip(t *testing.T, cfg Config, ctl string) {
	t.Helper()
	if why := limitOffered(cfg, ctl); why != "" {
		t.Skipf("no %s limit here: %s", ctl, why)
	}
	// Registered before newExec's cleanup, so run after it has killed the
	// homes: their cgroups v1 are empty then, and go.
	t.Cleanup(func() {
		c, err := chooseContainment(ContainAuto, cfg.DataDir)
		if err != nil {
			return
		}
		s := setUpLimits(c)
		s.RemoveHomes(nil)
		cgroup.Remove(c.root)
	})
}

// homeLog is what the provider wrote in home id's log so far.
func homeLog(t *testing.T, e *Provider, id string) string {
	t.Helper()
	files, err := e.LogFiles(id)
	if err != nil {
		t.Fatalf("log files: %v", err)
	}
	var b strings.Builder
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		b.Write(raw)
	}
	return b.String()
}

// A home that allocates beyond its memory_max is killed by the kernel,
// and its exit names the limit: in its log (and so in the reason when the
// provider gives up on it) and in its usage's OOM kills.
func TestMemoryMaxKillsTheHome(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is needed for this test's home")
	}
	dir := testDataDir(t)
	cfg := testConfig(dir)
	limitsOrSkip(t, cfg, "memory")
	// 8 MiB more every 10 ms, each byte written, until the kernel stops it.
	cfg.Command = []string{python, "-c", "import time\nx = []\nwhile True:\n    x.append(b'\\x01' * (8 << 20))\n    time.sleep(0.01)\n"}
	cfg.RestartBudget = 1
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1", Options: json.RawMessage(`{"memory_max": "64MiB"}`)}
	wake(t, e, s)
	// Killed again after its one restart, the home is given up on: its
	// usage still names the limit that ended it.
	testbin.Eventually(t, "the home's log to name its memory_max and the give-up", func() bool {
		l := homeLog(t, e, "h1")
		return strings.Contains(l, "went over its memory_max of 67108864 bytes") && strings.Contains(l, "giving up")
	})
	u, ok := e.Usage("h1")
	if !ok || u.OOMKills < 1 || u.MemoryMaxBytes != 64<<20 {
		t.Fatalf("usage %+v (ok %v): want at least one OOM kill and the 64 MiB limit", u, ok)
	}
}

// A home that spins on the CPU with cpu_max 0.1 is throttled, and its
// usage says so; without a limit, the same home is not.
func TestCPUMaxThrottlesTheHome(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	limitsOrSkip(t, cfg, "cpu")
	cfg.Command = []string{"/bin/sh", "-c", "while :; do :; done"}
	cfg.StopGrace = time.Second
	e := newExec(t, cfg)
	wake(t, e, provider.Spec{ID: "limited", Version: "v1", Options: json.RawMessage(`{"cpu_max": 0.1}`)})
	wake(t, e, provider.Spec{ID: "free", Version: "v1"})
	testbin.Eventually(t, "the limited home's usage to show throttling", func() bool {
		u, ok := e.Usage("limited")
		return ok && u.CPUThrottled > 0 && u.CPUThrottledSeconds > 0 && u.CPUMax == 0.1
	})
	if u, _ := e.Usage("free"); u.CPUThrottled != 0 || u.CPUMax != 0 {
		t.Errorf("a home with no limit is throttled: %+v", u)
	}
	for _, id := range []string{"limited", "free"} {
		if proven, err := e.Stop(context.Background(), provider.Spec{ID: id}); err != nil || !proven {
			t.Fatalf("stop %s: %v, %v", id, proven, err)
		}
	}
}

// The limits are refused where they cannot be enforced (here: a
// subreaper, which gives a home no cgroup), with the way out; bad values
// are refused everywhere.
func TestLimitsRefusedWithoutACgroup(t *testing.T) {
	f := Factory(Config{Containment: ContainSubreaper})
	ps := f.CheckHome(provider.Settings{Options: json.RawMessage(`{"memory_max": "64MiB", "cpu_max": 0.5}`)})
	if len(ps) != 2 || !strings.Contains(ps[0].Msg, "exec.containment is subreaper") {
		t.Fatalf("problems %v: want memory_max and cpu_max refused for the subreaper", ps)
	}
	f = Factory(Config{})
	for opts, field := range map[string]string{
		`{"memory_max": "12 parsecs"}`: "options",
		`{"memory_max": 1000}`:         "options.memory_max",
		`{"cpu_max": -1}`:              "options.cpu_max",
	} {
		ps := f.CheckHome(provider.Settings{Options: json.RawMessage(opts)})
		if len(ps) != 1 || ps[0].Field != field {
			t.Errorf("options %s: problems %v, want one on %s", opts, ps, field)
		}
	}
}
