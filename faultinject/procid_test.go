package faultinject

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
		procs   int    // processes a running home has
	}{
		{name: "env python3", command: []string{"/usr/bin/env", "python3", "-m", "http.server", "{port}", "--bind", "127.0.0.1"},
			probe: "http", path: "/node/" + fiTarget + "/", procs: 1},
		{name: "sh exec demo home", command: []string{"/bin/sh", "-c", demo}, path: fiWhoami, procs: 1},
		// A wrapper that forks instead: the home runs as the shell's child
		// in the shell's process group, which the stop must empty.
		{name: "sh forks demo home", command: []string{"/bin/sh", "-c", strings.TrimPrefix(demo, "exec ") + "; exit 0"}, path: fiWhoami, procs: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.command[0] == "/usr/bin/env" {
				if _, err := exec.LookPath("python3"); err != nil {
					t.Skip("python3 is not installed")
				}
			}
			home := map[string]any{"idle_timeout": "300ms"}
			// A bound on a hang, not a speed claim: an interpreter's start
			// on a busy machine takes seconds.
			wake := map[string]any{"ready_timeout": "30s", "wake_timeout": "40s"}
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
				if pids := g.homePIDs(t, fiHome); len(pids) != tc.procs {
					t.Fatalf("round %d: the home runs %d processes (%v), want %d", round, len(pids), pids, tc.procs)
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

// crashConfig is a gateway whose one home exits with status 3 at once until
// the file "fixed" exists in its directory; then it runs the demo home.
func crashConfig(t *testing.T) string {
	bin := testbin.Build(t)
	script := fmt.Sprintf(`if [ -e {data_dir}/fixed ]; then exec %s demo-home --addr 127.0.0.1:{port} --target {target} --version {version} --boot-delay 50ms; fi; echo "config file missing" >&2; exit 3`, bin)
	return fiConfig(t, fiOptions{admin: true,
		exec: map[string]any{"command": []string{"/bin/sh", "-c", script}},
		wake: map[string]any{"ready_timeout": "30s", "wake_timeout": "40s", "failure_backoff": "2s"}})
}

// fiAnswer is a public error body.
type fiAnswer struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestCrashLoopFailsEveryCallerAtOnce starts a home that exits with status
// 3 at once, sends concurrent API callers and a waiting page's poll, and
// checks that each gets home_failed long before the 30 s ready timeout,
// that the stored status says failed with the exit status, that the poll
// starts no new wake, and that once the home is fixed an operator's wake
// succeeds at once despite the failure backoff.
func TestCrashLoopFailsEveryCallerAtOnce(t *testing.T) {
	g := fiStart(t, t.TempDir(), crashConfig(t))
	const callers = 8
	type answer struct {
		status int
		code   string
		took   time.Duration
		err    error
	}
	answers := make([]answer, callers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range callers {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, g.url+fiWhoami, nil)
			req.Header.Set("Accept", "application/json")
			res, err := http.DefaultClient.Do(req)
			a := answer{took: time.Since(start), err: err}
			if err == nil {
				var body fiAnswer
				a.err = json.NewDecoder(res.Body).Decode(&body)
				res.Body.Close()
				a.status, a.code = res.StatusCode, body.Error.Code
			}
			answers[i] = a
		})
	}
	wg.Wait()
	var slowest time.Duration
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("caller %d: %v", i, a.err)
		}
		if a.status != http.StatusServiceUnavailable || a.code != "home_failed" {
			t.Fatalf("caller %d: %d %q, want 503 home_failed\n%s", i, a.status, a.code, g.Output())
		}
		// The ready timeout is 30 s: an answer after it would be the
		// timeout's, not the provider's give-up.
		if a.took >= 30*time.Second {
			t.Fatalf("caller %d answered after %s, not before the ready timeout", i, a.took)
		}
		slowest = max(slowest, a.took)
	}
	t.Logf("%d callers got home_failed; the slowest after %s", callers, slowest)

	// The stored status says failed, with the exit status, for operators,
	// once the wake has ended (its callers go before it stops the home).
	testbin.Eventually(t, "the wake's log line", func() bool { return len(logLines(g.Output(), "wake")) >= 1 })
	code, body := g.adminDo(t, http.MethodGet, "/admin/homes/"+fiHome)
	var view struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(body), &view); code != http.StatusOK || err != nil {
		t.Fatalf("home view: %d %v %s", code, err, body)
	}
	if view.Status != "failed" || !strings.Contains(view.Reason, "exit status 3") || !strings.Contains(view.Reason, "config file missing") {
		t.Fatalf("home view: status %q, reason %q; want failed with the exit status and the home's last words", view.Status, view.Reason)
	}
	if !strings.Contains(g.Output(), "exit status 3") {
		t.Fatalf("the log does not give the exit status:\n%s", g.Output())
	}
	if code, out := fiRun(t, g.dir, "status", "--admin", g.admin, "--token", fiToken); code != 1 ||
		!strings.Contains(out, "home "+fiHome+" failed: ") || !strings.Contains(out, "exit status 3") {
		t.Fatalf("wakegate status of a failed home: exit %d\n%s", code, out)
	}

	// The waiting page's poll reports the failure and starts no wake.
	wakes := len(logLines(g.Output(), "wake"))
	for range 3 {
		res, err := http.Get(g.url + "/_wakegate/wake/node/" + fiTarget)
		if err != nil {
			t.Fatal(err)
		}
		var poll struct {
			Ready bool   `json:"ready"`
			Code  string `json:"code"`
			Error string `json:"error"`
		}
		err = json.NewDecoder(res.Body).Decode(&poll)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if poll.Ready || poll.Code != "home_failed" || poll.Error == "" {
			t.Fatalf("poll of a failed home: %+v", poll)
		}
		if strings.Contains(poll.Error, "exit status") || strings.Contains(poll.Error, "config file") {
			t.Fatalf("the public answer carries the operator's detail: %q", poll.Error)
		}
	}
	if _, _, ok := progressOf(t, g); ok {
		t.Fatal("a poll of a failed home started a wake")
	}
	if n := len(logLines(g.Output(), "wake")); n != wakes {
		t.Fatalf("polls of a failed home ran %d wakes", n-wakes)
	}

	// Fixed: an operator's wake is not held by the backoff.
	if err := os.WriteFile(filepath.Join(g.homeDir(fiHome), "fixed"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	code, body = g.adminDo(t, http.MethodPost, "/admin/homes/"+fiHome+"/wake")
	if code != http.StatusOK {
		t.Fatalf("operator's wake of the fixed home: %d %s\n%s", code, body, g.Output())
	}
	t.Logf("the operator's wake of the fixed home took %s", time.Since(t0))
	res, out, err := g.get(http.DefaultClient, fiWhoami)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET after the operator's wake: %v %v %s", res, err, out)
	}
}

// progressOf reports the wake in flight from the admin API's home view.
func progressOf(t *testing.T, g *fiGateway) (string, int64, bool) {
	t.Helper()
	code, body := g.adminDo(t, http.MethodGet, "/admin/homes/"+fiHome)
	if code != http.StatusOK {
		t.Fatalf("home view: %d %s", code, body)
	}
	var v struct {
		Wake *struct {
			Phase     string `json:"phase"`
			ElapsedMS int64  `json:"elapsed_ms"`
		} `json:"wake"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Wake == nil {
		return "", 0, false
	}
	return v.Wake.Phase, v.Wake.ElapsedMS, true
}
