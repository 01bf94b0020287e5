package sockio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair returns the two ends of a loopback TCP connection.
func pair(t testing.TB) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// arrived waits, through the runtime's poller, until c has something to
// read: data, the peer's close or its reset. Nothing is read, so what
// arrived is left for the code under test.
func arrived(t testing.TB, c *net.TCPConn) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		var n int
		n, perr = unix.Poll(p, 0)
		return perr != nil || n > 0
	})
	if err = errors.Join(err, perr); err != nil {
		t.Fatal(err)
	}
}

// conn returns a Conn over one end of a loopback connection, that end
// and the other, or skips the test where there are no raw calls.
func conn(t *testing.T) (*Conn, *net.TCPConn, *net.TCPConn) {
	t.Helper()
	a, b := pair(t)
	s := New(a)
	if s == nil {
		t.Skip("no raw socket calls on this platform")
	}
	return s, a, b
}

// rw is what a scenario reads and writes with: the connection itself, or
// a Conn over it.
type rw interface {
	io.ReadWriter
}

func ends(t *testing.T, kind string) (rw, *net.TCPConn, *net.TCPConn) {
	if kind == "net" {
		a, b := pair(t)
		return a, a, b
	}
	s, a, b := conn(t)
	return s, a, b
}

func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i/251)
	}
	return p
}

// class names what an error is, as callers tell errors apart.
func class(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, io.EOF):
		return "eof"
	case errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, net.ErrClosed):
		return "closed"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	}
	return fmt.Sprintf("other: %v", err)
}

// outcome is what a scenario saw.
type outcome struct {
	n     string // a count, or how it compares with what was asked
	class string
	data  bool // the bytes arrived whole and in order
}

type scenario struct {
	name string
	want outcome
	run  func(t *testing.T, c rw, local, peer *net.TCPConn) outcome
}

func scenarios() []scenario {
	return []scenario{
		{"write 4 MiB to a slow reader", outcome{"all", "nil", true}, func(t *testing.T, c rw, _, peer *net.TCPConn) outcome {
			want := pattern(4 << 20)
			got := make(chan []byte, 1)
			go func() {
				var buf bytes.Buffer
				p := make([]byte, 7<<10)
				for buf.Len() < len(want) {
					n, err := peer.Read(p)
					buf.Write(p[:n])
					if err != nil {
						break
					}
					if buf.Len()%(512<<10) < 7<<10 {
						time.Sleep(time.Millisecond) // let the sender's buffer fill
					}
				}
				got <- buf.Bytes()
			}()
			n, err := c.Write(want)
			o := outcome{n: count(n, len(want)), class: class(err)}
			o.data = bytes.Equal(<-got, want)
			return o
		}},
		{"read what the peer wrote, then its close", outcome{"11", "eof", true}, func(t *testing.T, c rw, _, peer *net.TCPConn) outcome {
			_, _ = peer.Write([]byte("hello world"))
			_ = peer.Close()
			var buf bytes.Buffer
			p := make([]byte, 3)
			var err error
			for err == nil {
				var n int
				n, err = c.Read(p)
				buf.Write(p[:n])
			}
			return outcome{n: fmt.Sprint(buf.Len()), class: class(err), data: buf.String() == "hello world"}
		}},
		{"read deadline on a silent peer", outcome{"0", "timeout", true}, func(t *testing.T, c rw, local, _ *net.TCPConn) outcome {
			_ = local.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
			n, err := c.Read(make([]byte, 8))
			return outcome{n: fmt.Sprint(n), class: class(err), data: true}
		}},
		{"read deadline already past", outcome{"0", "timeout", true}, func(t *testing.T, c rw, local, peer *net.TCPConn) outcome {
			_, _ = peer.Write([]byte("x")) // waiting data does not beat a past deadline
			arrived(t, local)
			_ = local.SetReadDeadline(time.Unix(1, 0))
			n, err := c.Read(make([]byte, 8))
			return outcome{n: fmt.Sprint(n), class: class(err), data: true}
		}},
		{"write deadline on a peer that never reads", outcome{"some", "timeout", true}, func(t *testing.T, c rw, local, _ *net.TCPConn) outcome {
			p := pattern(64 << 20)
			_ = local.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			n, err := c.Write(p)
			return outcome{n: count(n, len(p)), class: class(err), data: true}
		}},
		{"write to a peer that reset", outcome{"", "reset", true}, func(t *testing.T, c rw, local, peer *net.TCPConn) outcome {
			_ = peer.SetLinger(0)
			_ = peer.Close()
			arrived(t, local)
			var err error
			for i := 0; i < 100 && err == nil; i++ {
				_, err = c.Write([]byte("after the reset"))
			}
			return outcome{class: class(err), data: true}
		}},
		{"read from a peer that reset", outcome{"0", "reset", true}, func(t *testing.T, c rw, local, peer *net.TCPConn) outcome {
			_ = peer.SetLinger(0)
			_ = peer.Close()
			arrived(t, local)
			n, err := c.Read(make([]byte, 8))
			return outcome{n: fmt.Sprint(n), class: class(err), data: true}
		}},
		{"close while a read waits", outcome{"0", "closed", true}, func(t *testing.T, c rw, local, _ *net.TCPConn) outcome {
			time.AfterFunc(20*time.Millisecond, func() { _ = local.Close() })
			n, err := c.Read(make([]byte, 8))
			return outcome{n: fmt.Sprint(n), class: class(err), data: true}
		}},
		{"write after close", outcome{"0", "closed", true}, func(t *testing.T, c rw, local, _ *net.TCPConn) outcome {
			_ = local.Close()
			n, err := c.Write([]byte("late"))
			return outcome{n: fmt.Sprint(n), class: class(err), data: true}
		}},
		{"empty read and write", outcome{"0", "nil", true}, func(t *testing.T, c rw, _, _ *net.TCPConn) outcome {
			n1, err1 := c.Write(nil)
			n2, err2 := c.Read(nil)
			return outcome{n: fmt.Sprint(n1 + n2), class: class(errors.Join(err1, err2)), data: true}
		}},
	}
}

func count(n, asked int) string {
	switch {
	case n == asked:
		return "all"
	case n > 0 && n < asked:
		return "some"
	}
	return fmt.Sprint(n)
}

// TestSameAsNetConn runs each scenario on a *net.TCPConn and on a Conn
// over one: both must see what the scenario expects, so callers that
// match errors (a timeout, a close, a reset) cannot tell them apart.
func TestSameAsNetConn(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			got := map[string]outcome{}
			for _, kind := range []string{"net", "sockio"} {
				c, local, peer := ends(t, kind)
				got[kind] = sc.run(t, c, local, peer)
			}
			if got["net"] != sc.want {
				t.Errorf("net.Conn: %+v, want %+v (the scenario itself is wrong)", got["net"], sc.want)
			}
			if got["sockio"] != got["net"] {
				t.Errorf("sockio: %+v, net.Conn: %+v", got["sockio"], got["net"])
			}
		})
	}
}

// TestErrorShape: errors come as net.Conn's do, a *net.OpError naming the
// operation and both addresses.
func TestErrorShape(t *testing.T) {
	s, a, _ := conn(t)
	_ = a.SetReadDeadline(time.Unix(1, 0))
	_, err := s.Read(make([]byte, 1))
	var oe *net.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("read error %T %v, want a *net.OpError", err, err)
	}
	if oe.Op != "read" || oe.Net != "tcp" || oe.Addr.String() != a.RemoteAddr().String() || oe.Source.String() != a.LocalAddr().String() {
		t.Errorf("read error %+v", oe)
	}
	if !oe.Timeout() {
		t.Errorf("read error %v is not a timeout", err)
	}
}

// TestBothWaysAtOnce: a Read and a Write run at once on each end of a
// connection whose ends are both Conns, moving 8 MiB each way.
func TestBothWaysAtOnce(t *testing.T) {
	a, b := pair(t)
	sa, sb := New(a), New(b)
	if sa == nil || sb == nil {
		t.Skip("no raw socket calls on this platform")
	}
	want := pattern(8 << 20)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, c := range []*Conn{sa, sb} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := c.Write(want); err != nil {
				errs <- fmt.Errorf("write: %w", err)
			}
		}()
		go func() {
			defer wg.Done()
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil {
				errs <- fmt.Errorf("read: %w", err)
				return
			}
			if !bytes.Equal(got, want) {
				errs <- errors.New("the bytes read differ from those written")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestIdle: the peek says idle only for an open connection with nothing
// waiting, and reads nothing.
func TestIdle(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(local, peer *net.TCPConn)
		want bool
		sent bool // the peer sent something: wait until it arrived
	}{
		{"open and quiet", func(*net.TCPConn, *net.TCPConn) {}, true, false},
		{"a byte waits", func(_, peer *net.TCPConn) { _, _ = peer.Write([]byte("x")) }, false, true},
		{"the peer closed", func(_, peer *net.TCPConn) { _ = peer.Close() }, false, true},
		{"the peer reset", func(_, peer *net.TCPConn) { _ = peer.SetLinger(0); _ = peer.Close() }, false, true},
		{"closed here", func(local, _ *net.TCPConn) { _ = local.Close() }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, a, b := conn(t)
			tc.do(a, b)
			if tc.sent {
				arrived(t, a)
			}
			if got := s.Idle(); got != tc.want {
				t.Errorf("Idle() = %v, want %v", got, tc.want)
			}
		})
	}
	// The peek leaves the byte for the reader.
	a, b := pair(t)
	s := New(a)
	if s == nil {
		return
	}
	_, _ = b.Write([]byte("y"))
	arrived(t, a)
	_ = s.Idle()
	p := make([]byte, 4)
	if n, err := s.Read(p); n != 1 || err != nil || p[0] != 'y' {
		t.Errorf("read after the peek: %q, %v", p[:n], err)
	}
}

// BenchmarkPingPong measures a 64-byte request and answer over loopback,
// each end reading and writing through net.Conn or through Conn. Run it
// with GOMAXPROCS=1 and pinned (taskset -c 0) to see the scheduler's
// hand-offs that Conn avoids.
func BenchmarkPingPong(b *testing.B) {
	for _, kind := range []string{"net", "sockio"} {
		b.Run(kind, func(b *testing.B) {
			x, y := pair(b)
			var cx, cy io.ReadWriter = x, y
			if kind == "sockio" {
				sx, sy := New(x), New(y)
				if sx == nil {
					b.Skip("no raw socket calls on this platform")
				}
				cx, cy = sx, sy
			}
			go func() {
				p := make([]byte, 64)
				for {
					if _, err := io.ReadFull(cy, p); err != nil {
						return
					}
					if _, err := cy.Write(p); err != nil {
						return
					}
				}
			}()
			p := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := cx.Write(p); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(cx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTryWrite: TryWrite writes what the socket takes and returns at
// once when its buffer is full, without waiting for the reader; a write
// deadline that has passed fails it as it fails Write; and what it wrote
// arrives in order.
func TestTryWrite(t *testing.T) {
	s, a, b := conn(t)
	if n, err := s.TryWrite([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("TryWrite on an empty buffer = %d, %v; want 5, nil", n, err)
	}
	// Fill the buffers: no reader drains b, so a large write must stop.
	big := pattern(64 << 20)
	done := make(chan struct{})
	var n int
	var err error
	go func() {
		defer close(done)
		n, err = s.TryWrite(big)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("TryWrite waited for the reader")
	}
	if err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("TryWrite into full buffers = %d, %v; want 0 < n < %d, nil", n, err, len(big))
	}
	if n2, err := s.TryWrite([]byte("x")); n2 != 0 || err != nil {
		t.Fatalf("TryWrite with the buffer full = %d, %v; want 0, nil", n2, err)
	}
	_ = a.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := s.TryWrite([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("TryWrite past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	_ = a.SetWriteDeadline(time.Time{})
	want := append([]byte("hello"), big[:n]...)
	got := make([]byte, len(want))
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the reader got %d bytes (%v), not what was written", len(got), err)
	}
}

// TestWriteAwait: WriteAwait writes as Write does and returns only once
// the answer can be read (a peek that does not wait finds it), however
// late the answer comes; a write that fills the buffer finishes as Write
// does; a passed write deadline and a close fail it as they fail Write;
// and what ends the wait is left to the next Read.
func TestWriteAwait(t *testing.T) {
	t.Run("answer", func(t *testing.T) {
		s, _, b := conn(t)
		go func() { // answers each 4-byte request, later and later
			p := make([]byte, 4)
			for i := 0; ; i++ {
				if _, err := io.ReadFull(b, p); err != nil {
					return
				}
				time.Sleep(time.Duration(i%4) * 5 * time.Millisecond)
				if _, err := b.Write(bytes.ToUpper(p)); err != nil {
					return
				}
			}
		}()
		p := make([]byte, 4)
		for i := range 20 {
			req := fmt.Appendf(nil, "r%03d", i)
			if n, waited, err := s.WriteAwait(req); n != 4 || !waited || err != nil {
				t.Fatalf("WriteAwait %d = %d, %v, %v; want 4, true, nil", i, n, waited, err)
			}
			if s.Idle() {
				t.Fatalf("request %d: WriteAwait returned before the answer", i)
			}
			if _, err := io.ReadFull(s, p); err != nil || !bytes.Equal(p, bytes.ToUpper(req)) {
				t.Fatalf("request %d: read %q, %v", i, p, err)
			}
		}
	})
	t.Run("full buffer", func(t *testing.T) {
		s, _, b := conn(t)
		big := pattern(32 << 20)
		got := make(chan []byte, 1)
		go func() {
			// The reader starts late, so that the write finds the buffers
			// full: a reader that keeps pace on another core can take all
			// of it in one write call, which then did not fill them.
			time.Sleep(100 * time.Millisecond)
			all, _ := io.ReadAll(io.LimitReader(b, int64(len(big))))
			got <- all
			_, _ = b.Write([]byte("done"))
		}()
		if n, waited, err := s.WriteAwait(big); n != len(big) || waited || err != nil {
			t.Fatalf("WriteAwait of %d bytes = %d, %v, %v; want all, false (the write waited), nil", len(big), n, waited, err)
		}
		if all := <-got; !bytes.Equal(all, big) {
			t.Fatalf("the reader got %d bytes, not what was written", len(all))
		}
		p := make([]byte, 4)
		if _, err := io.ReadFull(s, p); err != nil || string(p) != "done" {
			t.Fatalf("read after: %q, %v", p, err)
		}
	})
	t.Run("write deadline passed", func(t *testing.T) {
		s, a, b := conn(t)
		_ = a.SetWriteDeadline(time.Now().Add(-time.Second))
		_ = a.SetReadDeadline(time.Now().Add(5 * time.Second)) // a wait would end
		if n, _, err := s.WriteAwait([]byte("x")); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("WriteAwait past the write deadline = %d, %v; want 0, os.ErrDeadlineExceeded", n, err)
		}
		_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if n, _ := b.Read(make([]byte, 1)); n != 0 {
			t.Fatal("a byte was sent past the write deadline")
		}
	})
	t.Run("closed", func(t *testing.T) {
		s, a, _ := conn(t)
		_ = a.Close()
		if _, _, err := s.WriteAwait([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("WriteAwait on a closed connection: %v, want net.ErrClosed", err)
		}
	})
	t.Run("read deadline ends the wait", func(t *testing.T) {
		s, a, b := conn(t)
		_ = a.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
		if n, waited, err := s.WriteAwait([]byte("ping")); n != 4 || !waited || err != nil {
			t.Fatalf("WriteAwait with no answer = %d, %v, %v; want 4, true, nil", n, waited, err)
		}
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read after the wait's deadline: %v, want os.ErrDeadlineExceeded", err)
		}
		p := make([]byte, 4)
		if _, err := io.ReadFull(b, p); err != nil || string(p) != "ping" {
			t.Fatalf("the peer read %q, %v", p, err)
		}
	})
	t.Run("peer closes", func(t *testing.T) {
		s, _, b := conn(t)
		go func() {
			_, _ = io.ReadFull(b, make([]byte, 4))
			_ = b.Close()
		}()
		if n, _, err := s.WriteAwait([]byte("ping")); n != 4 || err != nil {
			t.Fatalf("WriteAwait = %d, %v", n, err)
		}
		if n, err := s.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("Read after the peer's close = %d, %v; want 0, EOF", n, err)
		}
	})
}
