package faultinject

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpRelay forwards loopback connections to an upstream address until it is
// frozen: then it stops forwarding in both directions without closing
// anything, as a partition that drops packets does, until healed.
type tcpRelay struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	frozen bool
	thawed chan struct{} // closed by heal
	conns  []net.Conn
	wg     sync.WaitGroup
}

// startRelay relays 127.0.0.1:<free port> to upstream until the test ends.
func startRelay(t *testing.T, upstream string) *tcpRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln, upstream: upstream, thawed: make(chan struct{})}
	close(r.thawed)
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

// addr is where clients connect.
func (r *tcpRelay) addr() string { return r.ln.Addr().String() }

// freeze stops forwarding; heal resumes it.
func (r *tcpRelay) freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.frozen {
		r.frozen, r.thawed = true, make(chan struct{})
	}
}

func (r *tcpRelay) heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		r.frozen = false
		close(r.thawed)
	}
}

// gate returns a channel closed once forwarding is allowed.
func (r *tcpRelay) gate() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.thawed
}

func (r *tcpRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		<-r.gate() // a frozen link takes no new connection through either
		u, err := net.Dial("tcp", r.upstream)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, u)
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pipe(u, c)
		go r.pipe(c, u)
	}
}

// pipe copies from src to dst, holding each chunk while the relay is
// frozen.
func (r *tcpRelay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-r.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// close heals (so no pipe waits) and closes everything.
func (r *tcpRelay) close() {
	r.heal()
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
