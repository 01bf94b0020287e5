package execprov

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider"
)

// Socket activation (systemd's protocol, sd_listen_fds(3)): the gateway
// binds a home's listening socket before it starts the home, and passes it
// as descriptor 3. Connections made while the home boots wait in the
// socket's accept queue instead of being refused, so a wake dials at once;
// and the port, bound by the gateway and kept across stops, can never be
// taken by another process between its choice and the home's bind.

// Environment of a socket-activated home, as systemd sets it.
const (
	// EnvListenFDs is how many sockets are passed, from descriptor 3.
	EnvListenFDs = "LISTEN_FDS"
	// EnvListenPID is the pid the sockets are meant for: a process that
	// reads another pid here (a child that inherited the environment)
	// must leave them alone.
	EnvListenPID = "LISTEN_PID"
	// EnvListenFDNames names the passed sockets, colon separated.
	EnvListenFDNames = "LISTEN_FDNAMES"
	// activatedName is the name of the passed socket in LISTEN_FDNAMES.
	activatedName = "http"
)

// listenPIDShell sets LISTEN_PID to the pid of the home's process itself,
// which os/exec cannot know before the process exists: the shell exports
// its own pid ($$) and execs the home's program, which keeps that pid.
// "$0" is the program, "$@" its arguments.
const listenPIDShell = `LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"`

// shellPath is the shell that sets LISTEN_PID.
const shellPath = "/bin/sh"

// homeActivated reports whether a home with options opts is started with
// socket activation: its option socket_activation, or the provider's
// default.
func (e *Provider) homeActivated(opts []byte) bool {
	var o HomeOptions
	if provider.DecodeOptions(opts, &o) == nil && o.SocketActivation != nil {
		return *o.SocketActivation
	}
	return e.cfg.SocketActivation
}

// activationSocket returns h's listening socket, bound on loopback the
// first time (on the port of h's last process when it is free, so that a
// home keeps its port across a gateway restart where it can) and kept
// until the provider closes.
func (e *Provider) activationSocket(h *home, prefer int) (*os.File, int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h.socket != nil {
		return h.socket, h.socketPort, nil
	}
	if e.closed {
		return nil, 0, errClosed
	}
	var l net.Listener
	if prefer > 0 {
		l, _ = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(prefer)) // taken meanwhile: any port will do
	}
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, 0, fmt.Errorf("bind the home's socket: %w", err)
		}
	}
	// The copy the home inherits (and the provider keeps) is blocking,
	// as a server that was handed a socket expects; the listener itself
	// goes, the socket stays open through the copy.
	f, err := l.(*net.TCPListener).File()
	port := l.Addr().(*net.TCPAddr).Port
	if cerr := l.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, 0, fmt.Errorf("bind the home's socket: %w", err)
	}
	h.socket, h.socketPort = f, port
	return f, port, nil
}

// activate makes cmd a socket-activated start of a home: its socket as
// descriptor 3, the LISTEN_* variables, and LISTEN_PID's placeholder for a
// traced start (startTraced), or, with viaShell, the program run through
// the shell that sets LISTEN_PID.
func activate(cmd *exec.Cmd, sock *os.File, viaShell bool) error {
	if cmd.Err != nil {
		return fmt.Errorf("start %s: %w", cmd.Args[0], cmd.Err)
	}
	if cmd.Path == "" {
		return errors.New("empty command")
	}
	cmd.ExtraFiles = []*os.File{sock} // the first extra file is descriptor 3
	cmd.Env = append(cmd.Env, EnvListenFDs+"=1", EnvListenFDNames+"="+activatedName)
	if viaShell {
		return throughShell(cmd)
	}
	cmd.Env = withPIDSlot(cmd.Env)
	return nil
}

// throughShell makes cmd run its program through the shell that sets
// LISTEN_PID.
func throughShell(cmd *exec.Cmd) error {
	if _, err := os.Stat(shellPath); err != nil {
		return fmt.Errorf("socket activation needs %s to set LISTEN_PID: %w", shellPath, err)
	}
	cmd.Args = append([]string{"sh", "-c", listenPIDShell, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = shellPath
	return nil
}

// tracedStart reports whether cmd is a socket-activated start that
// startTraced must make (activate without the shell).
func tracedStart(cmd *exec.Cmd) bool {
	return len(cmd.Env) > 0 && cmd.Env[len(cmd.Env)-1] == pidSlotEntry
}

// shellCopy is cmd, a traced start that was refused, made again to run
// through the shell: the same program, arguments, environment (without
// the placeholder), folder, output, descriptors and attributes.
func shellCopy(cmd *exec.Cmd) (*exec.Cmd, error) {
	attr := *cmd.SysProcAttr
	attr.Ptrace = false
	c := &exec.Cmd{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env[: len(cmd.Env)-1 : len(cmd.Env)-1], Dir: cmd.Dir,
		Stdout: cmd.Stdout, Stderr: cmd.Stderr, ExtraFiles: cmd.ExtraFiles, SysProcAttr: &attr}
	return c, throughShell(c)
}

// FailQueued resets every connection waiting in the accept queue of home
// s's socket, and listens again on the same port, so that it stays the
// home's. A shutdown of a listening socket drops its queue with a reset to
// each connection, even while the home's process still holds its copy of
// the socket (a boot that hangs): a close would not. The shutdown also
// gives up the port of a socket bound to port 0, so the socket is bound
// to it again; if another process took the port meanwhile, the socket is
// dropped and the home's next start binds a new one. A home that is not
// socket-activated has nothing queued.
func (e *Provider) FailQueued(s provider.Spec) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.homes[s.ID]
	if h == nil || h.socket == nil {
		return nil
	}
	raw, err := h.socket.SyscallConn()
	if err != nil {
		return fmt.Errorf("exec fail queued %s: %w", s.ID, err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = relisten(int(fd), h.socketPort) }); err != nil {
		serr = err
	}
	if serr != nil {
		h.socket.Close()
		h.socket = nil
		return fmt.Errorf("exec fail queued %s: %w", s.ID, serr)
	}
	return nil
}

// relisten resets the queue of listening socket fd and makes it listen
// again on loopback port port.
func relisten(fd, port int) error {
	if err := unix.Shutdown(fd, unix.SHUT_RD); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil && !errors.Is(err, unix.EINVAL) {
		// EINVAL: the socket kept its port (it was bound to it by
		// number); anything else: the port is gone.
		return fmt.Errorf("bind again: %w", err)
	}
	// The kernel caps the backlog at net.core.somaxconn, as for the
	// first listen.
	if err := unix.Listen(fd, 1<<16-1); err != nil {
		return fmt.Errorf("listen again: %w", err)
	}
	return nil
}

// closeSockets closes the listening sockets the provider holds for its
// socket-activated homes; e.mu is held. Homes that run on keep theirs.
func (e *Provider) closeSocketsLocked() {
	for _, h := range e.homes {
		if h.socket != nil {
			h.socket.Close()
			h.socket = nil
		}
	}
}

var _ provider.QueueFailer = (*Provider)(nil)
