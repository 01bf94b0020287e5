package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/admin"
)

// check-config warns, without failing, when path routing serves homes of
// several owners on one origin and when homes share a relay token
// reference; one owner, or host routing, is no warning.
func TestCheckConfigIsolationWarnings(t *testing.T) {
	const twoHomes = `
listen: 127.0.0.1:0
data_dir: DATA
homes:
  - id: alice
    command: ["sleep", "60", "{port}"]
  - id: bob
    command: ["sleep", "60", "{port}"]
`
	for _, c := range []struct {
		name, extra string
		want        []string // warnings, by a part of each
	}{
		{"owners on one origin", "", []string{"path routing serves homes of 2 owners (alice, bob)"}},
		{"one owner", `
access:
  homes:
    - target: alice
      owner: carol
    - target: bob
      owner: carol
`, nil},
		{"host routing", "hosts:\n  nodes_domain: nodes.example.test\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := checkConfigOut(t, strings.ReplaceAll(twoHomes, "DATA", t.TempDir())+c.extra)
			checkWarnings(t, got, c.want)
		})
	}
	t.Run("shared relay token", func(t *testing.T) {
		cfg := strings.ReplaceAll(twoHomes, "DATA", t.TempDir()) +
			"hosts:\n  nodes_domain: nodes.example.test\n"
		cfg = strings.Replace(cfg, `command: ["sleep", "60", "{port}"]`, "command: [\"sleep\", \"60\", \"{port}\"]\n    relay_token: env:SHARED_RELAY", 2)
		t.Setenv("SHARED_RELAY", "relay-token-0123456789abcdef")
		checkWarnings(t, checkConfigOut(t, cfg), []string{"homes alice, bob share one relay token"})
	})
}

// checkConfigOut runs check-config on cfg and returns its warnings
// (stderr) followed by its verdict (stdout); it must pass.
func checkConfigOut(t *testing.T, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wakegate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check-config", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("check-config exited %d: %s%s", code, out.String(), errb.String())
	}
	return errb.String() + out.String()
}

// checkWarnings checks that out has one warning line per want, each
// holding its part, and ends with "config ok".
func checkWarnings(t *testing.T, out string, want []string) {
	t.Helper()
	var warnings []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "warning: ") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != len(want) || !strings.HasSuffix(strings.TrimSpace(out), "config ok") {
		t.Fatalf("check-config printed %q; want %d warnings and config ok", out, len(want))
	}
	for i, w := range want {
		if !strings.Contains(warnings[i], w) {
			t.Errorf("warning %q; want it to say %q", warnings[i], w)
		}
	}
}

// wakegate status prints each isolation warning once, under the tables,
// after the problems, and keeps calling a healthy instance healthy.
func TestStatusPrintsIsolationWarnings(t *testing.T) {
	var out bytes.Buffer
	printStatus(&out, admin.Status{Healthy: true, Warnings: []string{"path routing serves homes of 2 owners (a, b) on one origin"}})
	got := out.String()
	if !strings.Contains(got, "\nwarning: path routing serves homes of 2 owners (a, b) on one origin\n") ||
		strings.Count(got, "warning: ") != 1 || strings.Contains(got, "UNHEALTHY") {
		t.Errorf("status printed %q; want the warning line and a healthy instance", got)
	}
}
