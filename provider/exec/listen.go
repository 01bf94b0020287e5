package execprov

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wakegate/wakegate/internal/endpoint"
)

// listenAt is where a process listens: a loopback port, or a Unix socket
// (socket set, port 0) for a command that names {socket}.
type listenAt struct {
	port   int
	socket string // absolute path
}

// socketFile is the name of a home's socket in its folder.
const socketFile = ".wakegate.sock"

// UsesSocket reports whether an exec command template names {socket}.
func UsesSocket(cmd []string) bool {
	for _, a := range cmd {
		if strings.Contains(a, "{socket}") {
			return true
		}
	}
	return false
}

// ListensWhereLooked reports whether a home started from command template
// cmd can learn where the gateway will look for it: the template names
// {port}, {socket} or {endpoint}, or the variables that carry them
// (WAKEGATE_PORT, WAKEGATE_SOCKET, for a shell to expand). A home with
// socket activation needs none of them.
func ListensWhereLooked(cmd []string) bool {
	for _, a := range cmd {
		for _, p := range []string{"{port}", "{socket}", "{endpoint}", EnvPort, EnvSocket} {
			if strings.Contains(a, p) {
				return true
			}
		}
	}
	return false
}

// SocketPathOf is where the socket of exec home id is under dataDir
// ({socket}), and an error for operators when that path is too long for a
// Unix socket.
func SocketPathOf(dataDir, id string) (string, error) {
	path := filepath.Join(dataDir, "homes", id, socketFile)
	if err := endpoint.CheckSocketPath(path); err != nil {
		return path, fmt.Errorf("home %s listens on {socket}: %w; use a shorter data_dir (or home id), or {port} instead of {socket}", id, err)
	}
	return path, nil
}

// freePort returns a loopback port for a home to listen on: free a moment
// ago and held by none of this provider's homes. It is picked at random
// below the kernel's ephemeral range, from which every outgoing connection
// and every :0 listener on the machine take their ports, so that no such
// socket can take it between this choice and the home's bind.
func (e *Provider) freePort() (int, error) {
	e.mu.Lock()
	held := make(map[int]bool, len(e.homes))
	for _, h := range e.homes {
		if h.proc != nil && h.proc.port != 0 {
			held[h.proc.port] = true
		}
	}
	e.mu.Unlock()
	lo, hi := endpoint.HomePortLow, endpoint.EphemeralLow()
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if held[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			if err := l.Close(); err != nil {
				return 0, fmt.Errorf("choose port: %w", err)
			}
			return p, nil
		}
	}
	// Every try was taken: fall back to one the kernel picks.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("choose port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("choose port: %w", err)
	}
	return port, nil
}

// endpoint is the upstream base URL of p.
func (p *proc) endpoint() string {
	if p.socket != "" {
		return endpoint.Unix(p.socket)
	}
	return "http://127.0.0.1:" + strconv.Itoa(p.port)
}

// attr is where l listens as a log attribute: port=N or socket=PATH.
func (l listenAt) attr() slog.Attr {
	if l.socket != "" {
		return slog.String("socket", l.socket)
	}
	return slog.Int("port", l.port)
}

// String names where l listens, for logs.
func (l listenAt) String() string {
	if l.socket != "" {
		return "socket " + l.socket
	}
	return "port " + strconv.Itoa(l.port)
}
