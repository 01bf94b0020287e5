package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/h1test"
	"github.com/wakegate/wakegate/proxy/minrate"
)

// The direct path must send and answer exactly what ReverseProxy does.
// Each case goes through two proxies on the same upstream, one forced
// through ReverseProxy (noDirect); the requests the upstream received and
// the answers the client got are compared.

// diffUpstream answers by the last path segment; every request is recorded
// before it is answered.
func diffUpstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		tok := r.Header.Get("X-Wakegate-Relay")
		switch r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:] {
		case "leak":
			h.Set("Trailer", "X-Sum")
			h.Set("X-Echo", "token="+tok)
			h.Set("Connection", "X-Drop, Keep-Alive")
			h.Set("X-Drop", "1")
			h.Set("Keep-Alive", "timeout=5")
			h.Set("Proxy-Authenticate", "Basic")
			h.Set("X-Wakegate-Probe", "no")
			h.Add("Set-Cookie", "a=1")
			h.Add("Set-Cookie", "b=2")
			for i := range 3 {
				fmt.Fprintf(w, "part %d %s|", i, tok)
				w.(http.Flusher).Flush()
			}
			h.Set("X-Sum", "t:"+tok)
			h.Set(http.TrailerPrefix+"X-Late", "late "+tok)
		case "early":
			h.Set("Link", "</style.css>; rel=preload; token="+tok)
			w.WriteHeader(http.StatusEarlyHints)
			h.Del("Link")
			h.Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "after hints")
		case "nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "notmod":
			h.Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		case "stream":
			for i := range 4 {
				fmt.Fprintf(w, "chunk %d\n", i)
				w.(http.Flusher).Flush()
			}
		case "sse":
			h.Set("Content-Type", "text/event-stream; charset=utf-8")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
			}
		case "cut":
			h.Set("Content-Length", "100")
			_, _ = io.WriteString(w, "only ten b")
			w.(http.Flusher).Flush()
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
		case "big":
			_, _ = w.Write(bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16))
		case "sized": // a known length large enough for ReadFrom (direct_splice.go)
			h.Set("Content-Length", fmt.Sprint(300<<10))
			_, _ = w.Write(pattern(300 << 10))
		case "close":
			h.Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		case "hops": // a known length, with fields the proxy must not pass on
			h.Set("Connection", "keep-alive")
			h.Set("Keep-Alive", "timeout=5")
			h.Set("Proxy-Authenticate", "Basic")
			h.Set("X-Wakegate-Relay", "leaked")
			h.Set("X-Wakegate-Probe", "no")
			h.Set("Pragma", "no-cache")
			h.Add("Set-Cookie", "a=1")
			h.Add("Set-Cookie", "b=2")
			h.Set("Content-Length", "4")
			_, _ = io.WriteString(w, "hops")
		case "echo": // the relay token, echoed with a known length
			body := "t=" + tok + ";" + tok
			h.Set("X-Echo", "token="+tok+", again "+tok)
			h.Set("X-"+tok, "named")
			h.Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = io.WriteString(w, body)
		case "event": // an event stream of known length
			h.Set("Content-Type", "text/event-stream")
			h.Set("Content-Length", "9")
			_, _ = io.WriteString(w, "data: 1\n\n")
		default:
			h.Set("Content-Type", "text/plain")
			h.Set("Content-Length", "5")
			if r.Method != http.MethodHead {
				_, _ = io.WriteString(w, "hello")
			}
		}
	})
}

// diffAnswer is what a client saw.
type diffAnswer struct {
	Status   int
	Header   http.Header
	Body     string
	Trailer  http.Header
	Aborted  bool
	Informal []string
}

// diffGet sends req and records the answer.
func diffGet(c *http.Client, req *http.Request) diffAnswer {
	var a diffAnswer
	var mu sync.Mutex
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		a.Informal = append(a.Informal, fmt.Sprint(code, h))
		return nil
	}}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	res, err := c.Do(req)
	if err != nil { // aborted before the head reached the client
		a.Aborted = true
		return a
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	a.Status, a.Header, a.Body, a.Trailer, a.Aborted = res.StatusCode, res.Header, string(body), res.Trailer, err != nil
	delete(a.Header, "Date")
	if tr := a.Header["Trailer"]; len(tr) > 0 { // announced in map order
		names := strings.Split(strings.Join(tr, ", "), ", ")
		slices.Sort(names)
		a.Header["Trailer"] = names
	}
	return a
}

// diffPair is the same proxy twice, each behind its own loopback server:
// direct, and forced through ReverseProxy.
type diffPair struct {
	direct, rp string
	pd, prp    *Proxy
}

func newDiffPair(t *testing.T, o Options, route func() *forward.Route) diffPair {
	t.Helper()
	sd, pd := frontFor(t, o, route, diffHost)
	srp, prp := frontFor(t, o, route, diffHost)
	prp.noDirect = true
	return diffPair{direct: sd.URL, rp: srp.URL, pd: pd, prp: prp}
}

// newLoopDiffPair is newDiffPair with both proxies behind h1serve's loop,
// whose writer takes the direct path's head blocks (BlockWriter).
func newLoopDiffPair(t *testing.T, o Options, route func() *forward.Route) diffPair {
	t.Helper()
	return newTLSLoopDiffPair(nil)(t, o, route)
}

// newTLSLoopDiffPair is newLoopDiffPair over TLS with conf (none: plain),
// as the gateway's HTTPS listener runs the loop.
func newTLSLoopDiffPair(conf *tls.Config) func(*testing.T, Options, func() *forward.Route) diffPair {
	return func(t *testing.T, o Options, route func() *forward.Route) diffPair {
		t.Helper()
		d, pd := loopFrontFor(t, o, route, diffHost, conf)
		rp, prp := loopFrontFor(t, o, route, diffHost, conf)
		prp.noDirect = true
		return diffPair{direct: d, rp: rp, pd: pd, prp: prp}
	}
}

// loopFrontFor is frontFor on h1serve (net/http behind its hand-off, as
// the gateway's public listener runs), over TLS with conf when it is not
// nil; it returns the front's base URL.
func loopFrontFor(t *testing.T, o Options, route func() *forward.Route, host string, conf *tls.Config) (string, *Proxy) {
	t.Helper()
	p := New(o)
	t.Cleanup(p.Close)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != host {
			http.Error(w, "not this test's request", http.StatusMisdirectedRequest)
			return
		}
		p.Serve(w, r, route())
	})
	if conf != nil {
		return "https://" + h1test.ServeTLS(t, h, conf), p
	}
	return "http://" + h1test.Serve(t, h), p
}

// diffHost is the Host of every request of the differential test; its
// fronts answer no other.
const diffHost = "gateway.test"

type diffCase struct {
	name    string
	method  string
	target  string // path and query
	header  map[string][]string
	body    func() io.Reader // nil: none
	length  int64            // -1: chunked
	failing bool             // the upstream receives nothing
	noToken bool             // the route has no relay token
}

func (c diffCase) request(t *testing.T, base string) *http.Request {
	var body io.Reader
	if c.body != nil {
		body = c.body()
	}
	req, err := http.NewRequest(c.method, base+c.target, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = diffHost // the same X-Forwarded-Host through both fronts
	if body != nil {
		req.ContentLength = c.length
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	return req
}

// slowBody sends its parts with pauses, as a slow client does.
func slowBody(parts ...string) func() io.Reader {
	return func() io.Reader {
		pr, pw := io.Pipe()
		go func() {
			for _, p := range parts {
				time.Sleep(5 * time.Millisecond)
				if _, err := io.WriteString(pw, p); err != nil {
					return
				}
			}
			pw.Close()
		}()
		return pr
	}
}

func stringBody(s string) func() io.Reader { return func() io.Reader { return strings.NewReader(s) } }

func diffCases() []diffCase {
	hostile := map[string][]string{
		"Connection":          {"X-Hop, keep-alive", "User-Agent"},
		"X-Hop":               {"dropped"},
		"Keep-Alive":          {"timeout=5"},
		"Proxy-Connection":    {"keep-alive"},
		"Proxy-Authorization": {"Basic eA=="},
		"Te":                  {"trailers, deflate"},
		"X-Wakegate-Relay":    {"forged"},
		"X_wakegate_relay":    {"forged"},
		"X-Wakegate-Probe":    {"1"},
		"X-Forwarded-For":     {"203.0.113.9, 198.51.100.2", "192.0.2.1"},
		"X-Forwarded-Host":    {"forged.example"},
		"X-Forwarded-Proto":   {"https"},
		"X-Forwarded-Port":    {"8443"},
		"X_forwarded_for":     {"10.9.9.9"},
		"Forwarded":           {"for=10.0.0.1"},
		"X-Real-Ip":           {"10.0.0.2"},
		"True-Client-Ip":      {"10.0.0.3"},
		"X-Request-Id":        {"req-1", "req-2"},
		"X-Multi":             {"a", "b", " c "},
		"Accept":              {"application/json"},
		"Cookie":              {"s=1"},
	}
	return []diffCase{
		{name: "get", method: "GET", target: "/apps/x/hello?a=1&b=%20x"},
		{name: "get hostile fields", method: "GET", target: "/apps/x/hello", header: hostile},
		{name: "escaped path", method: "GET", target: "/apps/x/a%2Fb/hello?q=%2F"},
		{name: "empty query", method: "GET", target: "/apps/x/hello?"},
		{name: "head", method: "HEAD", target: "/apps/x/hello"},
		{name: "post length", method: "POST", target: "/apps/x/hello", body: stringBody("name=value"), length: 10,
			header: map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}}},
		{name: "post empty", method: "POST", target: "/apps/x/hello", body: stringBody(""), length: 0},
		{name: "put chunked", method: "PUT", target: "/apps/x/hello", body: stringBody("chunked body"), length: -1},
		{name: "post slow chunked", method: "POST", target: "/apps/x/hello", body: slowBody("one ", "two ", "three"), length: -1,
			header: hostile},
		{name: "delete", method: "DELETE", target: "/apps/x/hello", header: map[string][]string{"User-Agent": {"tool/1"}}},
		{name: "leak, hop and trailers", method: "GET", target: "/apps/x/leak", header: map[string][]string{"Te": {"trailers"}}},
		{name: "early hints", method: "GET", target: "/apps/x/early"},
		{name: "no content", method: "GET", target: "/apps/x/nocontent"},
		{name: "not modified", method: "GET", target: "/apps/x/notmod"},
		{name: "unknown length", method: "GET", target: "/apps/x/stream"},
		{name: "event stream", method: "GET", target: "/apps/x/sse"},
		{name: "upstream cut mid-body", method: "GET", target: "/apps/x/cut"},
		{name: "big", method: "GET", target: "/apps/x/big"},
		{name: "big known length", method: "GET", target: "/apps/x/sized", noToken: true},
		{name: "upstream closes", method: "GET", target: "/apps/x/close"},
		{name: "hop and stripped fields, known length", method: "GET", target: "/apps/x/hops"},
		{name: "event stream, known length", method: "GET", target: "/apps/x/event"},
		{name: "token echoed, known length", method: "GET", target: "/apps/x/echo"},
		{name: "html error page", method: "GET", target: "/down/x", failing: true,
			header: map[string][]string{"Accept": {"text/html"}, "X-Request-Id": {"r-9"}}},
		{name: "json error", method: "POST", target: "/down/x", body: stringBody("abc"), length: 3, failing: true},
	}
}

func TestDirectMatchesReverseProxy(t *testing.T) {
	up := diffUpstream(t)
	dead := deadURL(t)
	route := func() *forward.Route {
		return &forward.Route{Kind: "app", Name: "x", Upstream: up.url(t, "/base/"), StripPrefix: "/apps/x", RelayToken: testToken,
			Waited: 3 * time.Millisecond}
	}
	var routeTo atomic.Pointer[url.URL]
	var noToken atomic.Bool
	routeFor := func() *forward.Route {
		r := route()
		if u := routeTo.Load(); u != nil {
			r.Upstream = u
		}
		if noToken.Load() {
			r.RelayToken = ""
		}
		return r
	}
	trusted := testOptions()
	trusted.Trusted = func(ip net.IP) bool { return ip.IsLoopback() }
	// Over TLS the loop cannot keep a response rate floor itself, so the
	// proxy's rate writer (proxy/minrate) wraps its writer and must pass
	// the heads' blocks on.
	rated := testOptions()
	rated.MinResponseRate, rated.MinRateGrace = 1<<10, 10*time.Second
	certs, tlsConf := testTLS(t)
	for _, opts := range []struct {
		name string
		o    Options
		// loop: both fronts on h1serve, and no relay token, so that the
		// direct path sends its heads as blocks.
		loop     bool
		noTokens bool // every route without a relay token
		tls      bool // the loop fronts serve TLS
	}{{"untrusted peer", testOptions(), false, false, false}, {"trusted peer", trusted, false, false, false},
		{"loop front", testOptions(), true, true, false}, {"loop front, relay token", testOptions(), true, false, false},
		{"loop front over TLS, response rate floor", rated, true, true, true}} {
		newPair := newDiffPair
		switch {
		case opts.tls:
			newPair = newTLSLoopDiffPair(tlsConf)
		case opts.loop:
			newPair = newLoopDiffPair
		}
		pair := newPair(t, opts.o, routeFor)
		// Behind the loop every request has a connection of its own: one
		// that a chunked request handed to net/http stays there.
		tr := &http.Transport{DisableCompression: true, DisableKeepAlives: opts.loop}
		if opts.tls {
			tr.TLSClientConfig = &tls.Config{RootCAs: certs}
		}
		client := &http.Client{Transport: tr}
		t.Cleanup(client.CloseIdleConnections)
		for _, c := range diffCases() {
			t.Run(opts.name+"/"+c.name, func(t *testing.T) {
				routeTo.Store(nil)
				noToken.Store(c.noToken || opts.noTokens)
				if c.failing {
					routeTo.Store(dead)
				}
				var got [2]diffAnswer
				var sent [2][]seen
				for i, base := range []string{pair.rp, pair.direct} {
					before := len(up.seen())
					got[i] = diffGet(client, c.request(t, base))
					sent[i] = up.seen()[before:]
				}
				if c.failing != (len(sent[0]) == 0) {
					t.Fatalf("through ReverseProxy the upstream received %d requests", len(sent[0]))
				}
				if !reflect.DeepEqual(sent[0], sent[1]) {
					t.Errorf("upstream received\n through ReverseProxy %+v\n direct               %+v", sent[0], sent[1])
				}
				if !reflect.DeepEqual(got[0], got[1]) {
					t.Errorf("client got\n through ReverseProxy %+v\n direct               %+v", got[0], got[1])
				}
			})
		}
		// The large body of known length goes through the client writer's
		// ReadFrom, which splices it on TCP; a TLS writer has none.
		if want := map[bool]int64{false: 1, true: 0}[opts.tls]; pair.pd.spliced.Load() != want || pair.prp.spliced.Load() != 0 {
			t.Errorf("%s: bodies through ReadFrom: direct %d, ReverseProxy %d; want %d and 0", opts.name,
				pair.pd.spliced.Load(), pair.prp.spliced.Load(), want)
		}
		// The plain heads with a body to requests the loop serves (get,
		// hostile fields, escaped path, empty query, post length, post
		// empty, delete, early hints' final head, cut, sized, close, hops,
		// event, echo; the chunked requests go to net/http).
		if want := map[bool]int64{false: 0, true: 14}[opts.loop]; pair.pd.blocked.Load() != want || pair.prp.blocked.Load() != 0 {
			t.Errorf("%s: heads sent as blocks: direct %d, ReverseProxy %d; want %d and 0", opts.name,
				pair.pd.blocked.Load(), pair.prp.blocked.Load(), want)
		}
	}
}

// TestDirectIsTaken checks the direct path carries plain requests and
// leaves the unusual ones to ReverseProxy.
func TestDirectIsTaken(t *testing.T) {
	up := newUpstream(t, nil)
	p := New(testOptions())
	t.Cleanup(p.Close)
	route := &forwarding{Route: &forward.Route{Upstream: up.url(t, "/")}}
	for _, c := range []struct {
		name   string
		raw    string
		direct bool
	}{
		{"get", "GET /x?a=1 HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"post", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nab", true},
		{"chunked post", "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n", true},
		{"expect", "POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nab", false},
		{"upgrade", "GET /x HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n", false},
		{"semicolon query", "GET /x?a=1;b=2 HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"bad escape in query", "GET /x?a=%zz HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"request trailers", "POST /x HTTP/1.1\r\nHost: h\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n\r\n", false},
		{"chunked get", "GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(c.raw)))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.direct(r, route); got != c.direct {
				t.Errorf("direct = %v, want %v", got, c.direct)
			}
		})
	}
	https := &forwarding{Route: &forward.Route{Upstream: &url.URL{Scheme: "https", Host: "example.test"}}}
	r := httptest.NewRequest("GET", "/", nil)
	if p.direct(r, https) {
		t.Error("an https upstream went by the direct path")
	}
}

// TestDirectRetryAndFailure checks a dead upstream's request is reported
// and retried once on the route's fresh upstream, as ReverseProxy's
// transport does.
func TestDirectRetryAndFailure(t *testing.T) {
	up := newUpstream(t, nil)
	dead := deadURL(t)
	var failures, retries atomic.Int64
	o := testOptions()
	o.Host.Default = HostUpstream // the retry's Host is the fresh upstream's
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Name: "x", Upstream: dead,
			OnFailure: func() { failures.Add(1) },
			Retry: func(context.Context) (*url.URL, error) {
				retries.Add(1)
				return up.url(t, "/"), nil
			}}
	})
	res, body := do(t, newReq(t, "GET", s.URL+"/again", nil))
	if res.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("GET after a retry: %d %q", res.StatusCode, body)
	}
	if failures.Load() != 1 || retries.Load() != 1 {
		t.Fatalf("failures %d, retries %d; want 1 and 1", failures.Load(), retries.Load())
	}
	if got := up.last(t); got.URI != "/again" || got.Host != up.Listener.Addr().String() {
		t.Fatalf("the retry reached %s with Host %s", got.URI, got.Host)
	}
	// A body cannot be replayed: the failure is reported and answered.
	res, _ = do(t, newReq(t, "POST", s.URL+"/again", strings.NewReader("x")))
	if res.StatusCode != http.StatusBadGateway || failures.Load() != 2 || retries.Load() != 1 {
		t.Fatalf("POST to a dead upstream: %d, failures %d, retries %d", res.StatusCode, failures.Load(), retries.Load())
	}
}

// TestDirectReusesConnections checks consecutive requests share one
// upstream connection, and a Connection: close answer is not reused.
func TestDirectReusesConnections(t *testing.T) {
	up := newUpstream(t, nil)
	s, _ := front(t, testOptions(), func() *forward.Route { return &forward.Route{Upstream: up.url(t, "/")} })
	for range 5 {
		if res, _ := do(t, newReq(t, "GET", s.URL+"/", nil)); res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	if n := up.conns.Load(); n != 1 {
		t.Fatalf("5 requests took %d upstream connections, want 1", n)
	}
}

// TestBlockWriterFindsTheLoop: the direct path sends blocks only where the
// writer that sends the head takes them, through the wrappers that pass
// them on (the relay token's mask, the rate writer), and never to
// net/http's writer.
func TestBlockWriterFindsTheLoop(t *testing.T) {
	type verdicts struct{ bare, masked, twiceMasked, rated, maskedRated bool }
	got := make(chan verdicts, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rated := minrate.NewWriter(w, 240, time.Second)
		got <- verdicts{
			bare:   blockWriter(w) != nil,
			masked: blockWriter(&infoMaskWriter{ResponseWriter: w, secret: "s"}) != nil,
			// a wrapper that passes blocks on, around one that does too
			twiceMasked: blockWriter(&infoMaskWriter{ResponseWriter: &infoMaskWriter{ResponseWriter: w}}) != nil,
			rated:       blockWriter(rated) != nil,
			maskedRated: blockWriter(&infoMaskWriter{ResponseWriter: rated, secret: "s"}) != nil,
		}
	})
	std := httptest.NewServer(h)
	t.Cleanup(std.Close)
	for _, c := range []struct {
		name string
		url  string
		want verdicts
	}{
		{"loop", "http://" + h1test.Serve(t, h), verdicts{bare: true, masked: true, twiceMasked: true, rated: true, maskedRated: true}},
		{"net/http", std.URL, verdicts{}},
	} {
		res, err := http.Get(c.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if v := <-got; v != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, v, c.want)
		}
	}
}

// testTLS returns a server configuration with httptest's certificate
// (for 127.0.0.1) and the pool a client trusts it with.
func testTLS(t *testing.T) (*x509.CertPool, *tls.Config) {
	t.Helper()
	s := httptest.NewTLSServer(http.NotFoundHandler())
	defer s.Close()
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return pool, &tls.Config{Certificates: s.TLS.Certificates, NextProtos: []string{"http/1.1"}}
}
