package h1serve

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/tlsfront"
)

// wire is how a test reaches its servers: plain TCP, or TLS with a
// self-signed certificate for the name "h1.test".
type wire struct {
	name   string
	server *tls.Config // nil: plain TCP
	client *tls.Config
}

var plainWire = wire{name: "plain"}

func newTLSWire(t testing.TB) wire {
	t.Helper()
	cert, roots, err := tlsfront.SelfSigned("h1.test")
	if err != nil {
		t.Fatal(err)
	}
	return wire{
		name:   "tls",
		server: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
		client: &tls.Config{RootCAs: roots, ServerName: "h1.test"},
	}
}

// dial opens a client connection to addr, its handshake done.
func (w wire) dial(addr string) (net.Conn, error) {
	if w.server == nil {
		return net.Dial("tcp", addr)
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	return tls.DialWithDialer(d, "tcp", addr, w.client)
}

// handshaken is ln as the loop gets it: on TLS, each connection's
// handshake done first.
func (w wire) handshaken(ln net.Listener) net.Listener {
	if w.server == nil {
		return ln
	}
	return handshakeListener{Listener: ln, conf: w.server}
}

// handshakeListener does each connection's TLS handshake before Accept
// returns it (one at a time: enough for tests).
type handshakeListener struct {
	net.Listener
	conf *tls.Config
}

func (l handshakeListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := tls.Server(c, l.conf)
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			_ = c.Close()
			continue
		}
		_ = tc.SetDeadline(time.Time{})
		return tc, nil
	}
}

// TestTLSServedOnTheLoop: HTTP/1.1 over a TLS connection whose handshake
// is done is served by the loop, with Request.TLS the handshake's state,
// also on the requests that follow on the connection.
func TestTLSServedOnTheLoop(t *testing.T) {
	w := newTLSWire(t)
	s, addr := startFastOn(t, http.HandlerFunc(caseHandler), w)
	c, err := w.dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i := range 3 {
		if _, err := io.WriteString(c, "GET /tls HTTP/1.1\r\nHost: h1.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		if want := `tls 304 name="h1.test" alpn="" done=true`; string(b) != want {
			t.Fatalf("request %d: %q, want %q", i, b, want)
		}
	}
	if st := s.Stats(); st.Requests != 3 || st.HandedOff != 0 {
		t.Fatalf("stats %+v, want 3 requests on the loop and no hand-off", st)
	}
}

// TestTLSHandOffs: what the loop does not serve over TLS reaches net/http
// whole. A connection that negotiated HTTP/2 goes as the *tls.Conn
// itself, before the loop reads a byte; one whose handshake is not done
// goes untouched, and net/http does it; a request handed off mid-way
// still carries the connection's TLS state.
func TestTLSHandOffs(t *testing.T) {
	w := newTLSWire(t)
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		tlsOn := r.TLS != nil && r.TLS.HandshakeComplete && r.TLS.ServerName == "h1.test"
		_, _ = io.WriteString(rw, r.Proto+" tls="+map[bool]string{true: "yes", false: "no"}[tlsOn]+" body="+string(b))
	})

	t.Run("h2", func(t *testing.T) {
		s, addr := startFastOn(t, h, w)
		// The transport adds h2 to the client's ALPN list: a copy of its own.
		tr := &http.Transport{TLSClientConfig: w.client.Clone(), ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		res, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if string(b) != "HTTP/2.0 tls=yes body=" {
			t.Fatalf("answer %q, want HTTP/2.0 with the TLS state", b)
		}
		if st := s.Stats(); st.Requests != 0 || st.HandedOff != 1 {
			t.Fatalf("stats %+v, want the connection handed off", st)
		}
	})

	t.Run("handshake not done", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		std := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		hand := s.Handoff(ln.Addr())
		done := make(chan struct{}, 2)
		go func() { _ = std.Serve(hand); done <- struct{}{} }()
		go func() { _ = s.Serve(tls.NewListener(ln, w.server)); done <- struct{}{} }()
		defer func() { _ = s.Close(); _ = std.Close(); <-done; <-done }()
		c, err := w.dial(ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if b := ask(t, c, "POST / HTTP/1.1\r\nHost: h1.test\r\nContent-Length: 2\r\n\r\nok"); b != "HTTP/1.1 tls=yes body=ok" {
			t.Fatalf("answer %q", b)
		}
		if st := s.Stats(); st.Requests != 0 || st.HandedOff != 1 {
			t.Fatalf("stats %+v, want the connection handed off untouched", st)
		}
	})

	t.Run("mid-way", func(t *testing.T) {
		s, addr := startFastOn(t, h, w)
		c, err := w.dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		msg := "POST /a HTTP/1.1\r\nHost: h1.test\r\nContent-Length: 3\r\n\r\none" +
			"POST /b HTTP/1.1\r\nHost: h1.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n"
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		var got []string
		for range 2 {
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			got = append(got, string(b))
		}
		if want := "HTTP/1.1 tls=yes body=one|HTTP/1.1 tls=yes body=two"; strings.Join(got, "|") != want {
			t.Fatalf("answers %q, want %q", got, want)
		}
		if st := s.Stats(); st.Requests != 1 || st.HandedOff != 1 {
			t.Fatalf("stats %+v, want one request on the loop, then the hand-off", st)
		}
	})
}
