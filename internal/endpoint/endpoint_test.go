package endpoint

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSocketEndpointRoundTrip(t *testing.T) {
	sock := "/srv/wakegate/homes/alice/.wakegate.sock"
	ep := Unix(sock)
	if ep != "unix:///srv/wakegate/homes/alice/.wakegate.sock" {
		t.Fatalf("Unix = %q", ep)
	}
	if p, ok := SocketPath(ep); !ok || p != sock {
		t.Fatalf("SocketPath = %q, %v", p, ok)
	}
	u, err := url.Parse(HTTP(ep) + "/node/alice/x?y=1")
	if err != nil || u.Scheme != "http" || !IsStandIn(u.Host) || HostHeader(u.Host) != StandInHost {
		t.Fatalf("HTTP(%q) = %v (%v)", ep, u, err)
	}
	if n, a := Target("tcp", u.Host+":80"); n != "unix" || a != sock {
		t.Fatalf("Target = %s %s", n, a)
	}
	if r := Record(HTTP(ep)); r != ep {
		t.Fatalf("Record(HTTP(%q)) = %q", ep, r)
	}
	if r := Record("http://127.0.0.1:1"); r != "http://127.0.0.1:1" {
		t.Fatalf("Record of a tcp endpoint = %q", r)
	}
	// Nothing else changes.
	for _, s := range []string{"http://127.0.0.1:8080", "https://h.example", "unix://relative", ""} {
		if HTTP(s) != s {
			t.Errorf("HTTP(%q) = %q", s, HTTP(s))
		}
	}
	if n, a := Target("tcp", "127.0.0.1:8080"); n != "tcp" || a != "127.0.0.1:8080" || HostHeader("127.0.0.1:8080") != "127.0.0.1:8080" {
		t.Errorf("a tcp address was changed: %s %s", n, a)
	}
}

func TestCheckSocketPath(t *testing.T) {
	if err := CheckSocketPath("/" + strings.Repeat("a", MaxSocketPath-1)); err != nil {
		t.Errorf("%d bytes refused: %v", MaxSocketPath, err)
	}
	err := CheckSocketPath("/" + strings.Repeat("a", MaxSocketPath))
	if err == nil || !strings.Contains(err.Error(), "108 bytes") {
		t.Errorf("108 bytes: %v", err)
	}
	if CheckSocketPath("rel.sock") == nil {
		t.Error("a relative path passes")
	}
}

// TestDialerReachesSocket dials a real socket through its stand-in.
func TestDialerReachesSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	u, _ := url.Parse(HTTP(Unix(sock)))
	c, err := Dialer(&net.Dialer{})(context.Background(), "tcp", u.Host+":80")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.RemoteAddr().Network() != "unix" {
		t.Errorf("dialled %s", c.RemoteAddr().Network())
	}
}

// TestDialRefusesALink: a home that replaces its socket by a link to
// another socket (another home's, the admin socket) is not followed.
func TestDialRefusesALink(t *testing.T) {
	dir := t.TempDir()
	admin := filepath.Join(dir, "admin.sock")
	ln, err := net.Listen("unix", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	home := filepath.Join(dir, "home.sock")
	if err := os.Symlink(admin, home); err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{}
	u, _ := url.Parse(HTTP(Unix(home)))
	if c, err := Dial(context.Background(), d, "tcp", u.Host+":80"); err == nil {
		c.Close()
		t.Fatal("the link was followed to another socket")
	} else if !strings.Contains(err.Error(), "not a socket") && !errors.Is(err, syscall.ELOOP) {
		t.Errorf("error %v does not say why", err)
	}
	// A plain file in its place is refused too, as refused.
	if err := os.Remove(home); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(home, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), d, "tcp", u.Host+":80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a file in the socket's place: %v", err)
	}
	// A missing socket is ENOENT, for the probes' watch.
	if err := os.Remove(home); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), d, "tcp", u.Host+":80"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("a missing socket: %v", err)
	}
}
