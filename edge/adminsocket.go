package edge

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/admin"
)

// The admin socket is the admin API on a Unix socket in data_dir. The
// kernel names the process at the other end of each connection
// (SO_PEERCRED); the socket accepts only the gateway's own user, root and,
// when admin.socket_group is set, that group's members, and lets their
// requests through without a token: such a peer can read the gateway's
// token and files anyway. A home that runs as a user of its own cannot
// connect at all, whatever it floods or guesses.

// maxSocketPath is the longest path a Unix socket address holds on Linux.
const maxSocketPath = 107

// ListenAdminSocket removes a stale socket at path (one that no process
// answers), listens there with mode 0600 (0660 and group gid when gid is
// not -1), and returns a listener whose connections carry their checked
// peer. A socket a live process answers is left alone: an error.
func ListenAdminSocket(path string, gid int, log *slog.Logger) (net.Listener, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	if len(abs) > maxSocketPath {
		return nil, fmt.Errorf("admin socket %s: the path has %d bytes, a Unix socket takes at most %d; set admin.socket to a shorter path", abs, len(abs), maxSocketPath)
	}
	if fi, err := os.Lstat(abs); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("admin socket %s: a file that is no socket is in the way; remove it or set admin.socket to another path", abs)
		}
		if c, err := net.DialTimeout("unix", abs, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("admin socket %s: another process answers there (another gateway on this data_dir?)", abs)
		}
		if err := os.Remove(abs); err != nil {
			return nil, fmt.Errorf("admin socket %s: remove the stale socket: %w", abs, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", abs, err)
	}
	ln, err := net.Listen("unix", abs)
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", abs, err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(true)
	// Until the chmod, the mode is what the umask left: a peer that
	// connects in between still meets the peer check (the umask is not
	// narrowed here because it is the whole process's).
	mode := os.FileMode(0o600)
	if gid >= 0 {
		mode = 0o660
		if err := os.Chown(abs, -1, gid); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("admin socket %s: give it to group %d: %w", abs, gid, err)
		}
	}
	if err := os.Chmod(abs, mode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("admin socket %s: %w", abs, err)
	}
	return &peerListener{UnixListener: ul, uid: os.Getuid(), gid: gid, log: log}, nil
}

// peerListener accepts the admin socket's connections whose peer may use
// it and closes the others, with a warning.
type peerListener struct {
	*net.UnixListener
	uid, gid int
	log      *slog.Logger
}

// peerConn is an accepted connection and its checked peer.
type peerConn struct {
	net.Conn
	peer admin.Peer
}

// Accept returns the next connection whose peer is allowed.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		p, err := peerOf(c)
		switch {
		case err != nil:
			l.log.Warn("admin socket: connection refused: its peer cannot be read", "err", err)
		case !l.allowed(p):
			l.log.Warn("admin socket: connection refused: the peer's user may not use the admin API",
				"peer_uid", p.UID, "peer_gid", p.GID, "peer_pid", p.PID,
				"hint", "only root, the gateway's own user and the members of admin.socket_group may connect")
		default:
			return &peerConn{Conn: c, peer: p}, nil
		}
		_ = c.Close()
	}
}

// allowed reports whether p may use the admin API: root, the gateway's
// own user, or a member of the configured group.
func (l *peerListener) allowed(p admin.Peer) bool {
	if p.UID == 0 || p.UID == l.uid {
		return true
	}
	return l.gid >= 0 && (p.GID == l.gid || inGroup(p.PID, l.gid))
}

// peerOf reads the credentials of c's peer from the kernel.
func peerOf(c *net.UnixConn) (admin.Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return admin.Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return admin.Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return admin.Peer{}, fmt.Errorf("peer credentials: %w", serr)
	}
	return admin.Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}

// inGroup reports whether process pid has gid among its supplementary
// groups (/proc/PID/status); false when that cannot be read.
func inGroup(pid, gid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Groups:"); ok {
			for _, g := range strings.Fields(rest) {
				if g == strconv.Itoa(gid) {
					return true
				}
			}
			return false
		}
	}
	return false
}

// AdminConnContext gives a request on the admin socket its peer, which
// admin.Server lets through without a token.
func AdminConnContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerConn); ok {
		return admin.WithPeer(ctx, pc.peer)
	}
	return ctx
}
