package cli

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAdminSocketOfAnotherUserRefused serves a fake admin API on a real
// Unix socket in a data folder and hands the socket to uid 61999, as a
// home's user could leave one where the CLI looks: `wakegate status`
// refuses it, names that uid and sends it nothing. Given back to the
// CLI's own user, the same socket is used.
func TestAdminSocketOfAnotherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand a socket to another uid")
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "admin.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ready":true,"homes":[],"apps":[]}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	if err := os.Chown(path, 61999, 61999); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WAKEGATE_ADMIN", "")
	t.Setenv("WAKEGATE_DATA_DIR", dir)

	var out, errb bytes.Buffer
	code := run([]string{"status"}, &out, &errb)
	msg := out.String() + errb.String()
	if code == 0 || !strings.Contains(msg, "61999") {
		t.Errorf("status on a socket of uid 61999: exit %d, %q; want a refusal naming uid 61999", code, msg)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the socket of uid 61999 was asked %d times; want 0", n)
	}
	for _, args := range [][]string{{"status", "--admin", "unix:" + path}} {
		out.Reset()
		errb.Reset()
		if code := run(args, &out, &errb); code == 0 || !strings.Contains(out.String()+errb.String(), "61999") {
			t.Errorf("%v: exit %d, %q; want a refusal naming uid 61999", args, code, out.String()+errb.String())
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the socket of uid 61999 was asked %d times; want 0", n)
	}

	if err := os.Chown(path, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	run([]string{"status"}, &out, &errb)
	if asked.Load() == 0 {
		t.Errorf("the CLI's own socket was not used: %q", out.String()+errb.String())
	}
}
