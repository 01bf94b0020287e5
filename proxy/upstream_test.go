package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/proxy/h1client"

	"github.com/wakegate/wakegate/internal/testbin"
)

// newTestForwarder returns a forwarder with its own pool (at most 4 idle
// connections per host), falling back to a Transport of its own.
func newTestForwarder(t *testing.T) *h1client.Forwarder {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{}
	f := h1client.NewForwarder(h1client.NewPool(d.DialContext, 4, time.Minute), 0, tr, nil)
	t.Cleanup(func() {
		f.Pool().Close()
		tr.CloseIdleConnections()
	})
	return f
}

// idle is how many connections p's forwarder holds idle.
// waitIdle waits, up to 5 seconds, for the pool to hold n idle
// connections.
func waitIdle(t *testing.T, p *h1client.Pool, n int) {
	t.Helper()
	testbin.Eventually(t, fmt.Sprintf("%d idle connections in the pool", n), func() bool { return p.Idle() == n })
}

// rawUpstream is a loopback TCP server whose connections are served by
// serve (n counts from 1 in accept order).
type rawUpstream struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
}

func newRawUpstream(t *testing.T, serve func(c net.Conn, br *bufio.Reader, n int64)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := u.conns.Add(1)
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				serve(c, bufio.NewReader(c), n)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		u.wg.Wait()
	})
	return u
}

func (u *rawUpstream) base() string { return "http://" + u.ln.Addr().String() }

// readReq reads one request with its body, or returns nil at the
// connection's end.
func readReq(br *bufio.Reader) *http.Request {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil
	}
	_, _ = io.Copy(io.Discard, req.Body)
	return req
}

const okResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// get sends a GET through f and returns the status and body.
func get(t *testing.T, f http.RoundTripper, url string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// TestForwarderBodies sends request bodies of each framing through the
// proxy and answers with each response framing: the upstream gets the
// bytes that were sent, the client the bytes that were answered, and one
// upstream connection carries every exchange.
func TestForwarderBodies(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 20000) // 320,000 bytes, past every buffer
	answers := map[string]http.HandlerFunc{
		"length": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			_, _ = io.WriteString(w, big)
		},
		"chunked": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, big[:1000])
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, big[1000:])
		},
		"empty": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "0")
		},
	}
	var framing atomic.Value // the last request's Transfer-Encoding
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		framing.Store(strings.Join(r.TransferEncoding, ","))
		answers[r.URL.Query().Get("answer")](w, r)
	})
	s, p := front(t, testOptions(), func() *forward.Route { return &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t, "")} })
	cases := []struct {
		name, method, answer string
		body                 io.Reader // nil: no body
		sent                 string
		chunked              bool
		want                 string
	}{
		{name: "GET, length answer", method: "GET", answer: "length", want: big},
		{name: "GET, chunked answer", method: "GET", answer: "chunked", want: big},
		{name: "GET, empty answer", method: "GET", answer: "empty", want: ""},
		{name: "POST with length", method: "POST", answer: "length", body: strings.NewReader(big), sent: big, want: big},
		{name: "POST chunked", method: "POST", answer: "chunked", body: io.MultiReader(strings.NewReader(big)), sent: big, chunked: true, want: big},
		{name: "PUT small, empty answer", method: "PUT", answer: "empty", body: strings.NewReader("hello"), sent: "hello", want: ""},
		{name: "POST without body", method: "POST", answer: "length", want: big},
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := newReq(t, tc.method, s.URL+"/x?answer="+tc.answer, tc.body)
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != 200 || string(got) != tc.want {
				t.Fatalf("%d, %d bytes, %v; want 200 with %d bytes", res.StatusCode, len(got), err, len(tc.want))
			}
			last := up.last(t)
			if string(last.Body) != tc.sent {
				t.Errorf("upstream got %d body bytes, want %d", len(last.Body), len(tc.sent))
			}
			if te := framing.Load(); tc.chunked != (te == "chunked") {
				t.Errorf("upstream Transfer-Encoding %q, want chunked %v", te, tc.chunked)
			}
			// The client can have the whole answer a moment before the
			// proxy's handler reads the end of the upstream's body and
			// puts the connection back: wait for that, not for a new one.
			waitIdle(t, p.conns, 1)
		})
	}
	if n := up.conns.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1 (reused)", n)
	}
	if n := p.conns.Idle(); n != 1 {
		t.Errorf("the forwarder holds %d idle connections, want 1", n)
	}
}

// TestForwarderNoBodyAnswers covers responses that carry no body whatever
// their headers say: the client gets the status and headers, no body, and
// the connection is used again.
func TestForwarderNoBodyAnswers(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/head":
			w.Header().Set("Content-Length", "1234")
			w.Header().Set("X-Head", "yes")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.Header().Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		}
	})
	s, p := front(t, testOptions(), func() *forward.Route { return &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t, "")} })
	cases := []struct {
		method, path string
		status       int
		header, val  string
	}{
		{"HEAD", "/head", 200, "Content-Length", "1234"},
		{"GET", "/204", 204, "", ""},
		{"GET", "/304", 304, "Etag", `"v1"`},
		{"HEAD", "/head", 200, "X-Head", "yes"},
	}
	for _, tc := range cases {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			res, body := do(t, newReq(t, tc.method, s.URL+tc.path, nil))
			if res.StatusCode != tc.status || body != "" {
				t.Fatalf("%d with %q, want %d and no body", res.StatusCode, body, tc.status)
			}
			if tc.header != "" && res.Header.Get(tc.header) != tc.val {
				t.Errorf("%s: %q, want %q", tc.header, res.Header.Get(tc.header), tc.val)
			}
		})
	}
	if n := up.conns.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1", n)
	}
	if n := p.conns.Idle(); n != 1 {
		t.Errorf("the forwarder holds %d idle connections, want 1", n)
	}
}

// TestForwarderTrailersAndInformational relays a 103 Early Hints before
// the answer, and trailers after a chunked body.
func TestForwarderTrailersAndInformational(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Trailer", "X-Sum")
		_, _ = io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Sum", "42")
	})
	s, p := front(t, testOptions(), func() *forward.Route { return &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t, "")} })
	var early []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		early = append(early, fmt.Sprintf("%d %s", code, h.Get("Link")))
		return nil
	}}
	req := newReq(t, "GET", s.URL+"/", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	res, body := do(t, req)
	if res.StatusCode != 200 || body != "body" {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
	if len(early) != 1 || early[0] != "103 </style.css>; rel=preload" {
		t.Errorf("informational responses %q, want one 103 with the Link", early)
	}
	if got := res.Trailer.Get("X-Sum"); got != "42" {
		t.Errorf("trailer X-Sum %q, want 42", got)
	}
	if n := p.conns.Idle(); n != 1 {
		t.Errorf("the forwarder holds %d idle connections, want 1", n)
	}
}

// TestForwarderConnectionClose: an answer with Connection: close ends its
// connection; the next request dials a new one and succeeds.
func TestForwarderConnectionClose(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	})
	f := newTestForwarder(t)
	for i := range 3 {
		code, body, err := get(t, f, up.URL+"/")
		if err != nil || code != 200 || body != "bye" {
			t.Fatalf("request %d: %d %q %v", i, code, body, err)
		}
		if n := f.Pool().Idle(); n != 0 {
			t.Fatalf("request %d: %d idle connections kept after Connection: close", i, n)
		}
	}
	if n := up.conns.Load(); n != 3 {
		t.Errorf("the upstream accepted %d connections, want 3", n)
	}
}

// TestForwarderStaleConnection: an upstream that closes a kept-alive
// connection, while it is idle or on reading the next request, costs the
// caller nothing when the request can be sent again; a request that
// cannot (a POST that was written) fails instead of being sent twice.
func TestForwarderStaleConnection(t *testing.T) {
	// An upstream that closes each connection as soon as it has answered,
	// without a word: the liveness peek finds the pooled connection
	// closed, and the request goes out on a fresh one, a POST with a body
	// (which could not be sent again once written) as well as a GET.
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run("closed while idle, "+method, func(t *testing.T) {
			closed := make(chan struct{}, 4)
			up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, _ int64) {
				if readReq(br) != nil {
					_, _ = io.WriteString(c, okResponse)
				}
				_ = c.Close()
				closed <- struct{}{}
			})
			f := newTestForwarder(t)
			for i := range 3 {
				var body io.Reader
				if method == http.MethodPost {
					body = strings.NewReader("payload")
				}
				res, err := f.RoundTrip(newReq(t, method, up.base()+"/", body))
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != 200 || string(b) != "ok" {
					t.Fatalf("request %d: %d %q %v", i, res.StatusCode, b, err)
				}
				<-closed // the upstream has closed the pooled connection
			}
			if n := up.conns.Load(); n != 3 {
				t.Errorf("the upstream accepted %d connections, want 3", n)
			}
		})
	}
	cases := []struct {
		method string
		ok     bool // sent again and answered
	}{
		{http.MethodGet, true},
		{http.MethodHead, true},
		{http.MethodPost, false},
	}
	for _, tc := range cases {
		t.Run("closed on the next request, "+tc.method, func(t *testing.T) {
			var got atomic.Int64 // requests read, answered or not
			up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, n int64) {
				for i := 0; ; i++ {
					if readReq(br) == nil {
						return
					}
					got.Add(1)
					if n == 1 && i == 1 {
						return // read the second request, then close without a word
					}
					_, _ = io.WriteString(c, okResponse)
				}
			})
			f := newTestForwarder(t)
			if code, _, err := get(t, f, up.base()+"/"); err != nil || code != 200 {
				t.Fatalf("first request: %d %v", code, err)
			}
			req := newReq(t, tc.method, up.base()+"/", nil)
			res, err := f.RoundTrip(req)
			if tc.ok {
				if err != nil {
					t.Fatalf("%s on a connection the upstream dropped: %v", tc.method, err)
				}
				res.Body.Close()
				if n := up.conns.Load(); n != 2 {
					t.Errorf("the upstream accepted %d connections, want 2", n)
				}
				return
			}
			if err == nil {
				res.Body.Close()
				t.Fatalf("%s was sent again after it reached the upstream", tc.method)
			}
			if n := got.Load(); n != 2 {
				t.Errorf("the upstream read %d requests, want 2 (no replay)", n)
			}
		})
	}
}

// TestForwarderAbandonedBody: a response body closed half way closes its
// upstream connection (the upstream's write fails) and leaves nothing in
// the pool.
func TestForwarderAbandonedBody(t *testing.T) {
	writeFailed := make(chan struct{}, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				writeFailed <- struct{}{}
				return
			}
		}
	})
	f := newTestForwarder(t)
	req := newReq(t, "GET", up.URL+"/", nil)
	res, err := f.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(res.Body, make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if n := f.Pool().Idle(); n != 0 {
		t.Fatalf("%d idle connections after an abandoned body, want 0", n)
	}
	<-writeFailed // only a closed connection ends the upstream's writes
}

// TestForwarderCancelWhileWaiting cancels a request whose upstream does
// not answer: the round trip returns the context's error, and no goroutine
// is left once the servers are closed.
func TestForwarderCancelWhileWaiting(t *testing.T) {
	before := goleak.IgnoreCurrent()
	func() {
		arrived := make(chan struct{}, 2)
		release := make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer up.Close()
		defer close(release)
		d := &net.Dialer{}
		f := h1client.NewForwarder(h1client.NewPool(d.DialContext, 4, time.Minute), 0, http.DefaultTransport, nil)
		defer f.Pool().Close()
		cases := []struct {
			name string
			body io.Reader
		}{
			{"no body", nil},
			{"with a body", strings.NewReader("payload")},
		}
		for _, tc := range cases {
			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, "POST", up.URL+"/slow", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				<-arrived
				cancel()
			}()
			res, err := f.RoundTrip(req)
			cancel()
			if err == nil {
				res.Body.Close()
				t.Fatalf("%s: an answer from an upstream that never answered", tc.name)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want context.Canceled", tc.name, err)
			}
		}
		if n := f.Pool().Idle(); n != 0 {
			t.Errorf("%d idle connections after cancelled requests, want 0", n)
		}
	}()
	if err := goleak.Find(before); err != nil {
		t.Error(err)
	}
}

// TestForwarderConcurrent runs many requests at once through the proxy
// (run with -race): each gets its own answer, and the pool never keeps
// more than its bound.
func TestForwarderConcurrent(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "echo:"+r.URL.Query().Get("i"))
	})
	o := testOptions()
	s, p := front(t, o, func() *forward.Route { return &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t, "")} })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	t.Cleanup(client.CloseIdleConnections)
	var wg sync.WaitGroup
	errs := make(chan error, 16*25)
	for g := range 16 {
		wg.Go(func() {
			for i := range 25 {
				id := fmt.Sprint(g*100 + i)
				res, err := client.Get(s.URL + "/x?i=" + id)
				if err != nil {
					errs <- err
					continue
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || string(b) != "echo:"+id {
					errs <- fmt.Errorf("request %s: %q %v", id, b, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := p.conns.Idle(); n > o.MaxIdleConnsPerHost {
		t.Errorf("%d idle connections, above the bound %d", n, o.MaxIdleConnsPerHost)
	}
}

// TestForwarderReusesConnections: sequential requests share one upstream
// connection.
func TestForwarderReusesConnections(t *testing.T) {
	up := newUpstream(t, nil)
	f := newTestForwarder(t)
	for i := range 20 {
		if code, body, err := get(t, f, up.URL+"/"); err != nil || code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q %v", i, code, body, err)
		}
	}
	if n := up.conns.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections for 20 requests, want 1", n)
	}
}

// TestForwarderExpectContinue: a request that waits for 100 Continue goes
// through the Transport, and its body arrives.
func TestForwarderExpectContinue(t *testing.T) {
	up := newUpstream(t, nil)
	s, _ := front(t, testOptions(), func() *forward.Route { return &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t, "")} })
	req := newReq(t, "PUT", s.URL+"/upload", strings.NewReader("the body"))
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}
	t.Cleanup(client.CloseIdleConnections)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || string(up.last(t).Body) != "the body" {
		t.Fatalf("%d, upstream got %q", res.StatusCode, up.last(t).Body)
	}
}

// TestForwarderEarlyAnswer: an upstream that answers 413 without reading a
// large body gets its answer to the client, and the connection is not
// used again.
func TestForwarderEarlyAnswer(t *testing.T) {
	refuse := newUpstreamRaw413(t)
	f := newTestForwarder(t)
	body := bytes.Repeat([]byte("y"), 8<<20)
	req := newReq(t, "POST", refuse.base()+"/", bytes.NewReader(body))
	res, err := f.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", res.StatusCode)
	}
	if n := f.Pool().Idle(); n != 0 {
		t.Errorf("%d idle connections after an answer to an unread body", n)
	}
}

// newUpstreamRaw413 answers every request 413 after its headers, reads no
// body and closes.
func newUpstreamRaw413(t *testing.T) *rawUpstream {
	return newRawUpstream(t, func(c net.Conn, br *bufio.Reader, _ int64) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<20)) // let the client's write end, then close
	})
}

// failingBody yields some bytes, then a read error: a caller's body cut
// or malformed half way.
type failingBody struct{ sent bool }

var errBrokenBody = errors.New("malformed chunk")

func (b *failingBody) Read(p []byte) (int, error) {
	if b.sent {
		return 0, errBrokenBody
	}
	b.sent = true
	return copy(p, "hello"), nil
}

func (b *failingBody) Close() error { return nil }

// TestForwarderBrokenRequestBody: when the caller's body cannot be read
// half way, the upstream (which waits for the rest of a chunked body and
// never answers) is not waited for: the round trip ends with the body's
// read error and the connection is not kept.
func TestForwarderBrokenRequestBody(t *testing.T) {
	got := make(chan struct{}, 1)
	up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, _ int64) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		got <- struct{}{}
		_, _ = io.Copy(io.Discard, req.Body) // waits for the rest until the gateway hangs up
	})
	f := newTestForwarder(t)
	req := newReq(t, "POST", up.base()+"/", &failingBody{})
	req.ContentLength = -1 // chunked
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := f.RoundTrip(req.WithContext(ctx))
	if err == nil {
		res.Body.Close()
		t.Fatalf("status %d for a request whose body failed; want an error", res.StatusCode)
	}
	if !strings.Contains(fmt.Sprint(err), errBrokenBody.Error()) || ctx.Err() != nil {
		t.Fatalf("round trip: %v; want the body's read error before the deadline", err)
	}
	<-got
	if n := f.Pool().Idle(); n != 0 {
		t.Errorf("%d idle connections after a broken request body", n)
	}
}
