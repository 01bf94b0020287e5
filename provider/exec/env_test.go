package execprov

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider"
)

// A home's environment is built from nothing: the gateway's secrets (its
// admin token, a JWT secret) never reach it, only PATH, HOME, TMPDIR, the
// locale, the WAKEGATE_* variables of the home (its own relay token among
// them), what inherit_env names and the configured entries. The version
// command gets the same.
func TestHomeEnvironmentIsClean(t *testing.T) {
	t.Setenv("WAKEGATE_TOKEN", "gateway-admin-token-0123456789")
	t.Setenv("EXEC_TEST_JWT_SECRET", "jwt-signing-secret")
	t.Setenv("EXEC_TEST_PASSED", "passed-on-purpose")
	t.Setenv("EXEC_TEST_NOT_NAMED", "kept-back")
	t.Setenv("LC_TIME", "C")
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.InheritEnv = []string{"EXEC_TEST_PASSED", "EXEC_TEST_UNSET_VARIABLE"}
	cfg.VersionCommand = []string{"{self}", "version-env"}
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Target: "alice", Version: "v7", RelayToken: "own-relay-token", Env: []string{"EXEC_TEST_OWN=1"}}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)
	in := info(t, r.Endpoint)
	env := map[string]string{}
	for _, kv := range in.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	want := map[string]string{
		"HOME": filepath.Join(dir, "homes", "h1"), "WAKEGATE_PORT": strconv.Itoa(mustRef(t, r).Port),
		"WAKEGATE_TARGET": "alice", "WAKEGATE_VERSION": "v7", "WAKEGATE_HOME": "h1",
		"WAKEGATE_RELAY_TOKEN": "own-relay-token", "EXEC_TEST_PASSED": "passed-on-purpose",
		"EXEC_TEST_OWN": "1", "EXEC_TEST_EXTRA": "hello", "LC_TIME": "C", "TMPDIR": os.TempDir(),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("home's %s = %q, want %q", k, env[k], v)
		}
	}
	if env["PATH"] == "" {
		t.Error("home has no PATH")
	}
	allowed := map[string]bool{"PATH": true, "LANG": true, "LANGUAGE": true, "TZ": true, "GORACE": true, "EXEC_TEST_HOME": true}
	for k := range want {
		allowed[k] = true
	}
	for k := range env {
		if !allowed[k] && !strings.HasPrefix(k, "LC_") {
			t.Errorf("home's environment has %s, which nobody meant for it", k)
		}
	}
	v, err := e.Version(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref, Version: "v7", RelayToken: "own-relay-token"})
	if err != nil || !strings.HasPrefix(v, "clean relay=own-relay-token ") {
		t.Fatalf("version command saw %q, %v; want a clean environment with the home's relay token", v, err)
	}
}

// inherit_env takes variable names only.
func TestInheritEnvNamesChecked(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.InheritEnv = []string{"GOOD_NAME", "BAD=VALUE"}
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "BAD=VALUE") {
		t.Fatalf("New with inherit_env BAD=VALUE: %v", err)
	}
}
