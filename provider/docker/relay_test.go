package docker_test

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// relay forwards connections from a unix socket of its own to the
// engine's, and lets a test freeze them (bytes held, nothing closed), cut
// them, and refuse new ones, as a network to a remote engine may.
type relay struct {
	sock   string // the relay's socket
	engine string // the engine's
	ln     net.Listener

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	down   bool
	conns  map[net.Conn]bool
}

// newRelay starts a relay to engine host (unix://…), closed with the test.
func newRelay(t *testing.T, host string) *relay {
	t.Helper()
	rl := &relay{sock: filepath.Join(t.TempDir(), "relay.sock"), engine: strings.TrimPrefix(host, "unix://"),
		conns: map[net.Conn]bool{}}
	rl.cond = sync.NewCond(&rl.mu)
	ln, err := net.Listen("unix", rl.sock)
	if err != nil {
		t.Fatal(err)
	}
	rl.ln = ln
	go rl.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		rl.set(false, true)
	})
	return rl
}

func (rl *relay) serve() {
	for {
		c, err := rl.ln.Accept()
		if err != nil {
			return
		}
		rl.mu.Lock()
		down := rl.down
		rl.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("unix", rl.engine)
		if err != nil {
			_ = c.Close()
			continue
		}
		rl.mu.Lock()
		rl.conns[c], rl.conns[up] = true, true
		rl.mu.Unlock()
		go rl.pipe(c, up)
		go rl.pipe(up, c)
	}
}

// pipe copies from src to dst, holding each chunk while the relay is
// frozen.
func (rl *relay) pipe(dst, src net.Conn) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		rl.mu.Lock()
		delete(rl.conns, src)
		delete(rl.conns, dst)
		rl.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		rl.mu.Lock()
		for rl.frozen {
			rl.cond.Wait()
		}
		rl.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a cut: the other side closes too
			return
		}
	}
}

// set freezes (or thaws) the relay's connections and refuses (or
// accepts) new ones; down also cuts every connection open now.
func (rl *relay) set(frozen, down bool) {
	rl.mu.Lock()
	rl.frozen, rl.down = frozen, down
	var cut []net.Conn
	if down {
		for c := range rl.conns {
			cut = append(cut, c)
		}
	}
	rl.cond.Broadcast()
	rl.mu.Unlock()
	for _, c := range cut {
		_ = c.Close()
	}
}
