package execprov

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// failureOf wakes home id with command cmd on a provider that never
// restarts, and returns the reason it gives up with.
func failureOf(t *testing.T, cfg Config, id string, cmd []string) string {
	t.Helper()
	reasons := make(chan string, 4)
	cfg.RestartBudget = -1
	cfg.OnChange = func(hid string, r provider.Result) {
		if hid == id && r.State == provider.StateFailed {
			reasons <- r.Reason
		}
	}
	e := newExec(t, cfg)
	_, _ = e.Wake(t.Context(), provider.Spec{ID: id, Command: cmd})
	select {
	case r := <-reasons:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("the home was never given up on")
		return ""
	}
}

// A home whose command exits 127 (a program not found) or 126 (found, but
// the home's user cannot run it) fails with the cause named, not only
// with its last log lines.
func TestExit126And127NameTheCause(t *testing.T) {
	cfg := testConfig(testDataDir(t))
	got := failureOf(t, cfg, "missing", []string{"/bin/sh", "-c", "exec no-such-program-anywhere {port}"})
	if !strings.Contains(got, "exit status 127") || !strings.Contains(got, "no-such-program-anywhere is not found on the PATH the home sees") {
		t.Errorf("reason of a missing program: %s", got)
	}
	notExec := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = failureOf(t, cfg, "noexec", []string{"/bin/sh", "-c", "exec " + notExec})
	if !strings.Contains(got, "exit status 126") || !strings.Contains(got, "not executable (no x bit)") {
		t.Errorf("reason of a program that is not executable: %s", got)
	}
	if os.Geteuid() != 0 {
		return
	}
	ucfg, _ := usersExec(t)
	dir := filepath.Join(t.TempDir(), "root-only")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	closed := filepath.Join(dir, "shim")
	if err := os.WriteFile(closed, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got = failureOf(t, ucfg, "closed", []string{"/bin/sh", "-c", "exec " + closed + " {port}"})
	if !strings.Contains(got, "exit status 126") || !strings.Contains(got, "closed to the home's own user") ||
		!strings.Contains(got, filepath.Dir(closed)) {
		t.Errorf("reason of a program closed to the home's user: %s", got)
	}
}
