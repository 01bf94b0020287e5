package testbin

import (
	"os"
	"strconv"
	"strings"
)

// TCPSocket is one line of the kernel's TCP tables (/proc/net/tcp and
// tcp6) of this network namespace.
type TCPSocket struct {
	LocalPort, RemotePort int
	// State is the kernel's state in hex: "01" ESTABLISHED, "06"
	// TIME_WAIT, "08" CLOSE_WAIT, ...
	State string
}

// TCPSockets lists the TCP sockets of this network namespace; a table
// that cannot be read is left out.
func TCPSockets() []TCPSocket {
	var out []TCPSocket
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 {
				continue
			}
			out = append(out, TCPSocket{LocalPort: hexPort(f[1]), RemotePort: hexPort(f[2]), State: f[3]})
		}
	}
	return out
}

// hexPort reads the port of a /proc/net/tcp address (ADDR:PORT in hex).
func hexPort(a string) int {
	_, p, _ := strings.Cut(a, ":")
	n, _ := strconv.ParseInt(p, 16, 32)
	return int(n)
}
