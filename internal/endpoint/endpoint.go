// Package endpoint maps a home's endpoint to what a client dials.
//
// An endpoint is either an http(s) URL (http://127.0.0.1:40123) or a Unix
// socket, written unix:///abs/path.sock in records, events and the admin
// API. HTTP clients (net/http, the upstream forwarder, the WebSocket
// relay and probes) only know host:port URLs, so a socket endpoint is
// given to them as an http URL whose host stands in for the socket
// (HTTP); every dialer of a home goes through Dial (or Dialer), which maps
// that host back to the socket, and the Host header sent to the home is
// StandInHost (HostHeader). Nothing changes for an http endpoint: Dial
// dials addr itself after one suffix comparison, once per new connection.
package endpoint

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Scheme is the scheme of a socket endpoint.
const Scheme = "unix"

// StandInHost is the Host header sent to a home on a Unix socket.
const StandInHost = "localhost"

// MaxSocketPath is the longest socket path Linux accepts: sun_path holds
// 108 bytes with the terminating NUL.
const MaxSocketPath = 107

// hostSuffix ends the stand-in host of a socket; the reserved .invalid
// top-level domain never resolves, so a stand-in that escaped a dialer
// would fail rather than reach anything.
const hostSuffix = ".sock.invalid"

// Unix returns the endpoint of the socket at path, which must be absolute.
func Unix(path string) string { return Scheme + "://" + path }

// SocketPath returns the path of a socket endpoint ("unix:///a/b.sock"),
// and whether ep is one.
func SocketPath(ep string) (string, bool) {
	p, ok := strings.CutPrefix(ep, Scheme+"://")
	if !ok || !filepath.IsAbs(p) {
		return "", false
	}
	return p, true
}

// CheckSocketPath reports a path that cannot be a socket's.
func CheckSocketPath(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("socket path %q is not absolute", path)
	}
	if len(path) > MaxSocketPath {
		return fmt.Errorf("socket path %s is %d bytes, more than the %d a Unix socket allows", path, len(path), MaxSocketPath)
	}
	return nil
}

// HTTP returns the URL HTTP clients use for ep: ep itself unless it is a
// socket endpoint, whose path (and the rest of ep after the socket, which
// there is none of) becomes the stand-in http://<hex>.sock.invalid.
func HTTP(ep string) string {
	p, ok := SocketPath(ep)
	if !ok {
		return ep
	}
	return "http://" + hex.EncodeToString([]byte(p)) + hostSuffix
}

// Record is HTTP undone: the endpoint as records show it (unix:///path)
// for a socket's stand-in URL (with no path), u itself otherwise.
func Record(u string) string {
	host, ok := strings.CutPrefix(u, "http://")
	if !ok || !strings.HasSuffix(host, hostSuffix) {
		return u
	}
	if network, path := Target("tcp", host); network == "unix" {
		return Unix(path)
	}
	return u
}

// IsStandIn reports whether host (with or without a port) is the
// stand-in of a socket.
func IsStandIn(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.HasSuffix(host, hostSuffix)
}

// HostHeader is the Host header to send for a URL host: StandInHost for
// a socket's stand-in, host itself otherwise.
func HostHeader(host string) string {
	if strings.HasSuffix(host, hostSuffix) {
		return StandInHost
	}
	return host
}

// Target maps what a client would dial (network, "host:port") to what to
// dial: ("unix", path) for a socket's stand-in host, the pair itself
// otherwise.
func Target(network, addr string) (string, string) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	enc, ok := strings.CutSuffix(host, hostSuffix)
	if !ok {
		return network, addr
	}
	p, err := hex.DecodeString(enc)
	if err != nil {
		return network, addr // dials the .invalid name, which fails
	}
	return "unix", string(p)
}

// Dialer dials like d, through Dial.
func Dialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return Dial(ctx, d, network, addr)
	}
}

// Dial dials (network, addr) with d through Target. A socket is reached
// only if its path names a socket itself, not a symbolic link: the folder
// of a home's socket belongs to the home, which could otherwise point the
// gateway (root) at another home's socket or at the admin socket, whose
// root peers need no token. The socket's inode is opened without
// following a link and connected to through /proc/self/fd, so nothing can
// be swapped in between.
func Dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	network, addr = Target(network, addr)
	if network != "unix" {
		return d.DialContext(ctx, network, addr)
	}
	fail := func(err error) error {
		return &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: addr, Net: "unix"}, Err: err}
	}
	fd, err := unix.Open(addr, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fail(os.NewSyscallError("open", err))
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fail(os.NewSyscallError("fstat", err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fail(fmt.Errorf("%s is not a socket (a link or another file in its place): %w", addr, syscall.ECONNREFUSED))
	}
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
