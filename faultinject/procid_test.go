package faultinject

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// Homes behind wrappers that exec their program (env, a shell's exec,
// pyenv-style shims), and homes that crash at once.

// logLines returns the lines of out whose slog message is msg.
func logLines(out, msg string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "msg="+msg+" ") || strings.HasSuffix(l, "msg="+msg) {
			got = append(got, l)
		}
	}
	return got
}

// TestWrapperSuspendLeavesNoProcess runs a home behind a wrapper that execs
// its program, lets it idle out, and checks that the suspend really ended
// the program: no process of the home is left, the stop is proven, and no
// "not signalling" is logged. Two rounds: each later wake must start one
// process, not add one.
func TestWrapperSuspendLeavesNoProcess(t *testing.T) {
	bin := testbin.Build(t)
	demo := fmt.Sprintf("exec %s demo-home --addr 127.0.0.1:{port} --target {target} --version {version} --boot-delay 50ms", bin)
	cases := []struct {
		name    string
		command []string
		probe   string
		path    string // a path the home itself answers once it runs
	}{
		{name: "env python3", command: []string{"/usr/bin/env", "python3", "-m", "http.server", "{port}", "--bind", "127.0.0.1"},
			probe: "http", path: "/node/" + fiTarget + "/"},
		{name: "sh exec demo home", command: []string{"/bin/sh", "-c", demo}, path: fiWhoami},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.command[0] == "/usr/bin/env" {
				if _, err := exec.LookPath("python3"); err != nil {
					t.Skip("python3 is not installed")
				}
			}
			home := map[string]any{"idle_timeout": "300ms"}
			wake := map[string]any{}
			if tc.probe != "" {
				home["probe"] = tc.probe
				wake["probe"] = map[string]any{"kind": tc.probe, "path": "/"}
			}
			g := fiStart(t, t.TempDir(), fiConfig(t, fiOptions{exec: map[string]any{"command": tc.command},
				home: home, wake: wake}))
			for round := 1; round <= 2; round++ {
				res, body, err := g.get(http.DefaultClient, tc.path)
				if err != nil {
					t.Fatal(err)
				}
				if res.StatusCode >= http.StatusInternalServerError {
					// The home's own answer (python's 404 for a path it has
					// no file for is one) shows that it runs.
					t.Fatalf("round %d: GET %s = %d %s\n%s", round, tc.path, res.StatusCode, body, g.Output())
				}
				if pids := g.homePIDs(t, fiHome); len(pids) != 1 {
					t.Fatalf("round %d: the home runs %d processes (%v), want 1", round, len(pids), pids)
				}
				testbin.Eventually(t, "the idle suspend", func() bool { return len(logLines(g.Output(), "suspend")) >= round })
				line := logLines(g.Output(), "suspend")[round-1]
				if !strings.Contains(line, "proven=true") {
					t.Fatalf("round %d: the suspend is not proven: %s\n%s", round, line, g.Output())
				}
				if pids := g.homePIDs(t, fiHome); len(pids) != 0 {
					t.Fatalf("round %d: a proven suspend left the home's processes %v running\n%s", round, pids, g.Output())
				}
			}
			if out := g.Output(); strings.Contains(out, "not signalling") {
				t.Fatalf("the provider refused to signal the home's own process:\n%s", out)
			}
		})
	}
}
