package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

func TestParseRunAs(t *testing.T) {
	tests := []struct {
		spec     string
		uid, gid int
		err      string
	}{
		{spec: "65534:65534", uid: 65534, gid: 65534},
		{spec: "65532", uid: 65532, gid: 65532},
		{spec: "nobody", uid: 65534, gid: 65534},
		{spec: "4242:nogroup", uid: 4242, gid: 65534},
		{spec: "", err: "want USER or USER:GROUP"},
		{spec: "65534:", err: "want USER or USER:GROUP"},
		{spec: "root", err: "names root"},
		{spec: "0:0", err: "names root"},
		{spec: "no-such-user-here", err: "no user no-such-user-here"},
		{spec: "65534:no-such-group-here", err: "no group no-such-group-here"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			r, err := parseRunAs(tt.spec)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), runAsEnv) {
					t.Fatalf("parseRunAs(%q) = %+v, %v; want an error naming %s and saying %q", tt.spec, r, err, runAsEnv, tt.err)
				}
				return
			}
			if err != nil || r.uid != tt.uid || r.gid != tt.gid {
				t.Fatalf("parseRunAs(%q) = %d:%d, %v; want %d:%d", tt.spec, r.uid, r.gid, err, tt.uid, tt.gid)
			}
		})
	}
}

// TestServeBecomesItsUser: a gateway started as root with WAKEGATE_USER
// gives a root-owned data_dir (a new volume) to that user, drops every id
// and group to it, and serves; what it writes is that user's.
func TestServeBecomesItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing users needs root")
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	// The user must reach data_dir once it is no longer root.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(filepath.Join(data, "homes"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(data, "homes", "left-by-root")
	if err := os.WriteFile(old, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := testbin.ServeEnv(t, dir, []string{runAsEnv + "=65534:65534"}, fmt.Sprintf(`
listen: "%%ADDR%%"
data_dir: "%%DATA%%"
apps:
  - slug: up
    upstream: %s
`, up.URL))
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", gw.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch f := strings.Fields(v); k {
		case "Uid", "Gid":
			if len(f) != 4 || f[0] != "65534" || f[1] != "65534" || f[2] != "65534" || f[3] != "65534" {
				t.Errorf("%s: %q, want 65534 real, effective, saved and filesystem", k, v)
			}
		case "Groups":
			if len(f) != 0 {
				t.Errorf("supplementary groups %q, want none", v)
			}
		}
	}
	for _, p := range []string{data, filepath.Join(data, "state.db"), old} {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 65534 || s.Gid != 65534 {
			t.Errorf("%s is %d:%d, want 65534:65534", p, s.Uid, s.Gid)
		}
	}
	if !strings.Contains(gw.Output(), "running as an unprivileged user") {
		t.Errorf("no start line says whom the gateway runs as:\n%s", gw.Output())
	}
	testbin.Eventually(t, "the app to answer through the gateway", func() bool {
		res, err := http.Get("http://" + gw.Addr + "/apps/up/")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
}
