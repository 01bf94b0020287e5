package edge_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/edge"
)

// shortDir is a directory whose paths fit a Unix socket address.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wge")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestAdminSocketPeer proves that the admin socket is private to the
// gateway's user (mode 0600), that a connection of that user is accepted
// with the peer the kernel names, and that the peer reaches the request's
// context.
func TestAdminSocketPeer(t *testing.T) {
	path := filepath.Join(shortDir(t), "admin.sock")
	ln, err := edge.ListenAdminSocket(path, -1, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("socket mode %v; want 0600", m)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sc net.Conn
	select {
	case sc = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted")
	}
	if sc == nil {
		t.Fatal("accept failed")
	}
	defer sc.Close()
	p, ok := admin.PeerFrom(edge.AdminConnContext(context.Background(), sc))
	if !ok || p.UID != os.Getuid() || p.PID != os.Getpid() {
		t.Errorf("peer %+v (found %v); want uid %d, pid %d", p, ok, os.Getuid(), os.Getpid())
	}
	if _, ok := admin.PeerFrom(edge.AdminConnContext(context.Background(), c)); ok {
		t.Error("a connection that the socket did not accept carries a peer")
	}
}

// TestAdminSocketPath proves what ListenAdminSocket does with what is at
// its path: a stale socket (no process answers) is replaced, a live one or
// a file that is no socket is left alone with an error, and a path too
// long for a socket address is refused before anything is created.
func TestAdminSocketPath(t *testing.T) {
	dir := shortDir(t)
	log := slog.New(slog.DiscardHandler)
	path := filepath.Join(dir, "a.sock")

	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = stale.Close()
	ln, err := edge.ListenAdminSocket(path, -1, log)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	defer ln.Close()

	if _, err := edge.ListenAdminSocket(path, -1, log); err == nil || !strings.Contains(err.Error(), "another process answers") {
		t.Errorf("over a live socket: %v; want another process answers", err)
	}

	file := filepath.Join(dir, "f.sock")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := edge.ListenAdminSocket(file, -1, log); err == nil || !strings.Contains(err.Error(), "no socket") {
		t.Errorf("over a file: %v; want no socket", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Errorf("the file in the way was changed: %q", b)
	}

	long := filepath.Join(dir, strings.Repeat("x", 120))
	if _, err := edge.ListenAdminSocket(long, -1, log); err == nil || !strings.Contains(err.Error(), "shorter path") {
		t.Errorf("a long path: %v; want shorter path", err)
	}
	if _, err := os.Lstat(long); err == nil {
		t.Error("a socket was created at a path too long for it")
	}
}
