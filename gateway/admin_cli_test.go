package gateway_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
)

// TestAdminRecordCLI runs the record commands of the real binary against
// a real gateway: home, app and target get|put|delete|set with --json
// parsed here, If-Match read and sent for the user, a stale --if-match
// refused with exit 1 and a sentence, --force, and usage errors (exit 2).
func TestAdminRecordCLI(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "  auth_failures_per_minute: 1000\n")
	env := []string{"WAKEGATE_ADMIN=" + a.host, "WAKEGATE_TOKEN=" + admToken}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return admRunCLI(t, env, args...)
	}
	must := func(args ...string) string {
		t.Helper()
		code, out, errs := run(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
		return out
	}
	gen := func(kind, id string) uint64 {
		t.Helper()
		args := []string{kind, "get", id, "--json"}
		if kind == "target" {
			args = []string{kind, "get", "--json"}
		}
		return admDecode[struct {
			Generation uint64 `json:"generation"`
		}](t, []byte(must(args...))).Generation
	}

	// Homes: created, read as JSON, replaced with the If-Match read for us.
	if out := must("home", "put", "bob", "target=bob", "idle_timeout=0s"); !strings.Contains(out, "home bob") {
		t.Errorf("home put: %s", out)
	}
	h := admDecode[admin.HomeView](t, []byte(must("home", "get", "bob", "--json")))
	if h.ID != "bob" || h.Target != "bob" || h.IdleTimeout != "0s" || h.Generation == 0 {
		t.Fatalf("home get --json: %+v", h)
	}
	first := h.Generation
	must("home", "put", "bob", "target=bob", "probe=tcp")
	if g := gen("home", "bob"); g <= first {
		t.Fatalf("generation %d after a replace, was %d", g, first)
	}
	// A write that names the generation read before a change made since
	// is refused, says what happened, and writes nothing.
	code, out, errs := run("home", "put", "bob", "--if-match", strconv.FormatUint(first, 10), "target=bob", "probe=http")
	if code != 1 || !strings.Contains(errs, "changed since it was read") || !strings.Contains(errs, "--force") ||
		!strings.Contains(errs, "wakegate home get bob") {
		t.Fatalf("stale --if-match: exit %d\n%s%s", code, out, errs)
	}
	if v := admDecode[admin.HomeView](t, []byte(must("home", "get", "bob", "--json"))); v.Probe.Kind != "tcp" {
		t.Fatalf("a stale write changed the home: probe %q", v.Probe.Kind)
	}
	must("home", "put", "bob", "--force", "target=bob", "probe=http")
	must("home", "put", "bob", "--json", "--file", writeJSONFile(t, `{"target":"bob","probe":"ws"}`))
	if out := must("home", "delete", "bob"); !strings.Contains(out, "home bob removed") {
		t.Errorf("home delete: %s", out)
	}
	if code, _, errs := run("home", "get", "bob"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("get of a removed home: exit %d %s", code, errs)
	}

	// A home's detail for people, after a wake: its phase timings.
	must("home", "wake", "demo")
	out = must("home", "get", "demo")
	for _, want := range []string{"home demo", "verdict: healthy", "sessions: 0 requests", "PROVIDER", "PROBE", "admin", "ready", "roll: no_target"} {
		if !strings.Contains(out, want) {
			t.Errorf("home get demo lacks %q:\n%s", want, out)
		}
	}

	// Apps.
	must("app", "put", "later", "home=demo", "path=/apps/later")
	if v := admDecode[admin.AppView](t, []byte(must("app", "get", "later", "--json"))); v.Slug != "later" || v.Source != "api" {
		t.Fatalf("app get --json: %+v", v)
	}
	must("app", "put", "later", "home=demo", "path=/apps/later", "failure_threshold:=5")
	must("app", "refresh", "demo", "--wait", "ready")
	if out := must("app", "get", "demo"); !strings.Contains(out, "phase: ready") || !strings.Contains(out, "route: published") ||
		!strings.Contains(out, "Phase changes") {
		t.Errorf("app get demo:\n%s", out)
	}
	must("app", "delete", "later")

	// The target.
	if code, _, errs := run("target", "get"); code != 1 || !strings.Contains(errs, "no_target") {
		t.Errorf("target get with none: exit %d %s", code, errs)
	}
	must("target", "set", "2")
	tg := gen("target", "")
	must("target", "set", "3")
	if code, out, errs := run("target", "set", "4", "--if-match", strconv.FormatUint(tg, 10)); code != 1 || !strings.Contains(errs, "the target changed since it was read") {
		t.Errorf("stale target set: exit %d\n%s%s", code, out, errs)
	}
	if out := must("target", "get"); !strings.Contains(out, "target version 3") {
		t.Errorf("target get: %s", out)
	}

	// status: app phases, route state and the wake's timings.
	out = must("status")
	for _, want := range []string{"PHASE", "ROUTE", "published", "PROVIDER", "PROBE", "TOTAL", " ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	for _, bad := range [][]string{{"home", "put"}, {"home", "get", "a", "b"}, {"target", "set"}, {"target", "get", "x"},
		{"home", "put", "x", "--force", "--if-match", "3"}, {"home", "put", "x", "--if-match", "zero"}, {"app", "put", "x", "oops"},
		{"home", "put", "x", "n:={bad"}, {"logs"}, {"logs", "demo", "--lines", "-1"}} {
		if code, out, errs := run(bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s%s", bad, code, out, errs)
		}
	}
}

// TestAdminLogsCLI prints a real home's last log lines and follows new
// ones with the real binary.
func TestAdminLogsCLI(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	env := []string{"WAKEGATE_ADMIN=" + a.host, "WAKEGATE_TOKEN=" + admToken}
	if code, out, errs := admRunCLI(t, env, "home", "wake", "demo"); code != 0 {
		t.Fatalf("wake: %d\n%s%s", code, out, errs)
	}
	testbin.Eventually(t, "the home's start line from wakegate logs", func() bool {
		code, out, _ := admRunCLI(t, env, "logs", "demo", "--lines", "5")
		return code == 0 && strings.Contains(out, "listening addr=")
	})
	if code, _, errs := admRunCLI(t, env, "logs", "nobody"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("logs of an unknown home: exit %d %s", code, errs)
	}

	cmd := exec.Command(testbin.Build(t), "logs", "demo", "--follow", "--lines", "0")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	logFile := homeFile(a.data, "demo", "home.log")
	br := bufio.NewReader(stdout)
	// The stream may open after the first append: append until a line
	// arrives.
	lines := make(chan string, 1)
	go func() {
		defer close(lines)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSpace(s)
		}
	}()
	testbin.Eventually(t, "a followed line", func() bool {
		appendLog(t, logFile, "followed line\n")
		select {
		case l := <-lines:
			if l != "followed line" {
				t.Fatalf("followed %q", l)
			}
			return true
		default:
			return false
		}
	})
}

// writeJSONFile writes s to a temporary file and returns its path.
func writeJSONFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdminCLIEscapesHomeText has a home write terminal controls into its
// log (a title change, a colour, a bidi override) and checks `wakegate
// logs`, plain and followed, shows them as visible escapes, never raw.
func TestAdminCLIEscapesHomeText(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	env := []string{"WAKEGATE_ADMIN=" + a.host, "WAKEGATE_TOKEN=" + admToken}
	if code, out, errs := admRunCLI(t, env, "home", "wake", "demo"); code != 0 {
		t.Fatalf("wake: %d\n%s%s", code, out, errs)
	}
	logFile := homeFile(a.data, "demo", "home.log")
	appendLog(t, logFile, "\x1b]0;OWNED\a hostile \x1b[2J\u202eevil\u009b\n")
	const want = `\x1b]0;OWNED\x07 hostile \x1b[2J\u202eevil\u009b`
	check := func(what, out string) {
		t.Helper()
		if strings.ContainsAny(out, "\x1b\a\u202e\u009b") {
			t.Errorf("%s printed raw controls: %q", what, out)
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s: want the line shown as %s, got %q", what, want, out)
		}
	}
	testbin.Eventually(t, "the hostile line from wakegate logs", func() bool {
		code, out, _ := admRunCLI(t, env, "logs", "demo", "--lines", "5")
		return code == 0 && strings.Contains(out, "hostile")
	})
	_, out, _ := admRunCLI(t, env, "logs", "demo", "--lines", "5")
	check("logs", out)

	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.Build(t), "logs", "demo", "--follow", "--lines", "3")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	br := bufio.NewReader(stdout)
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("logs --follow ended before the hostile line: %v", err)
		}
		if strings.Contains(l, "hostile") {
			check("logs --follow", l)
			break
		}
	}
}
