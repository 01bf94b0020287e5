package h1serve

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// caseHandler answers each path the way one case of
// TestResponsesMatchNetHTTP needs.
func caseHandler(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	switch r.URL.Path {
	case "/small":
		_, _ = io.WriteString(w, "hello")
	case "/html":
		_, _ = io.WriteString(w, "<html><body>hi</body></html>")
	case "/cl":
		h.Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
	case "/big":
		for i := range 3 {
			_, _ = w.Write([]byte(strings.Repeat(strconv.Itoa(i), 3000)))
		}
	case "/big-first":
		_, _ = io.WriteString(w, "<p>")
		_, _ = w.Write([]byte(strings.Repeat("x", 5000)))
	case "/flush":
		_, _ = io.WriteString(w, "a")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "b")
	case "/head-cl":
		h.Set("Content-Length", "10")
	case "/204":
		h.Set("Content-Length", "3")
		w.WriteHeader(http.StatusNoContent)
	case "/304":
		h.Set("Content-Type", "text/plain")
		h.Set("Content-Length", "3")
		h.Set("Etag", `"x"`)
		w.WriteHeader(http.StatusNotModified)
	case "/103":
		h.Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		h.Del("Link")
		_, _ = io.WriteString(w, "x")
	case "/trailer":
		h.Set("Trailer", "X-T, Content-Length")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "body")
		h.Set("X-T", "v")
	case "/prefix-trailer":
		_, _ = io.WriteString(w, "body")
		h.Set(http.TrailerPrefix+"X-P", "p")
	case "/close":
		h.Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	case "/ce":
		h.Set("Content-Encoding", "gzip")
		_, _ = io.WriteString(w, "<html>not really gzip")
	case "/identity":
		h.Set("Transfer-Encoding", "identity")
		_, _ = io.WriteString(w, "x")
	case "/te-chunked":
		h.Set("Transfer-Encoding", "chunked")
		_, _ = io.WriteString(w, "x")
	case "/badcl":
		h.Set("Content-Length", "abc")
		_, _ = io.WriteString(w, "x")
	case "/over":
		h.Set("Content-Length", "2")
		_, err := io.WriteString(w, "abc")
		h.Set("X-Err", fmt.Sprint(errors.Is(err, http.ErrContentLength)))
	case "/under":
		h.Set("Content-Length", "5")
		_, _ = io.WriteString(w, "ab")
	case "/late":
		w.WriteHeader(http.StatusAccepted)
		h.Set("X-Late", "1")
		_, _ = io.WriteString(w, "x")
	case "/odd":
		h["X-Multi"] = []string{"1", "2"}
		h["Bad Name"] = []string{"dropped"}
		h.Set("X-Newline", "a\r\nb")
		w.WriteHeader(599)
	case "/empty":
	case "/body":
		b, err := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, "%d %q %v", len(b), b, err)
	case "/replaced":
		r.Body = io.NopCloser(strings.NewReader(""))
		_, _ = io.WriteString(w, "body replaced, not read")
	case "/unread":
		_, _ = io.WriteString(w, "not read")
	case "/readfrom-cl":
		h.Set("Content-Length", "20000")
		h.Set("Content-Type", "text/plain")
		_, _ = io.Copy(w, strings.NewReader(strings.Repeat("r", 20000)))
	case "/readfrom":
		_, _ = io.Copy(w, strings.NewReader("<html>"+strings.Repeat("r", 20000)))
	case "/superfluous":
		w.WriteHeader(http.StatusCreated)
		w.WriteHeader(http.StatusTeapot)
	case "/panic":
		panic("case panic")
	case "/abort":
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "/tls":
		if r.TLS == nil {
			_, _ = io.WriteString(w, "plain")
			return
		}
		_, _ = fmt.Fprintf(w, "tls %x name=%q alpn=%q done=%v", r.TLS.Version, r.TLS.ServerName,
			r.TLS.NegotiatedProtocol, r.TLS.HandshakeComplete)
	case "/nobody-write":
		w.WriteHeader(http.StatusNoContent)
		_, err := io.WriteString(w, "x")
		h.Set("X-Err", fmt.Sprint(err))
	default:
		http.NotFound(w, r)
	}
}

// result is what a client makes of one response.
type result struct {
	Status        string
	Header        http.Header
	Body          string
	BodyErr       string
	ContentLength int64
	Chunked       bool
	Close         bool
	Trailer       http.Header
	ReadErr       string
}

// startFast serves h on h1serve, with net/http behind its hand-off.
func startFast(t testing.TB, h http.Handler) (*Server, string) {
	t.Helper()
	return startFastOn(t, h, plainWire)
}

// startFastOn is startFast on w: over TLS, the handshake is done before
// the loop gets the connection, as the gateway's TLS listener does.
func startFastOn(t testing.TB, h http.Handler, w wire) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quiet := log.New(io.Discard, "", 0)
	s := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, ErrorLog: quiet}
	std := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet}
	if w.server != nil {
		std.Protocols = new(http.Protocols)
		std.Protocols.SetHTTP1(true)
		std.Protocols.SetUnencryptedHTTP2(true) // ALPN's h2, handed on
	}
	hand := s.Handoff(ln.Addr())
	stdDone := make(chan struct{})
	fastDone := make(chan struct{})
	go func() { defer close(stdDone); _ = std.Serve(hand) }()
	go func() { defer close(fastDone); _ = s.Serve(w.handshaken(ln)) }()
	t.Cleanup(func() {
		_ = s.Close()
		_ = std.Close()
		<-fastDone
		<-stdDone
	})
	return s, ln.Addr().String()
}

// startStd serves h on net/http alone.
func startStd(t testing.TB, h http.Handler) string {
	t.Helper()
	return startStdOn(t, h, plainWire)
}

// startStdOn is startStd on w: over TLS, net/http does the handshakes.
func startStdOn(t testing.TB, h http.Handler, w wire) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	std := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	if w.server != nil {
		ln = tls.NewListener(ln, w.server)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = std.Serve(ln) }()
	t.Cleanup(func() {
		_ = std.Close()
		<-done
	})
	return ln.Addr().String()
}

// exchange sends raw (one or more requests, of the methods given) on one
// connection and reads a response for each, then whether the server
// closed the connection.
func exchange(t *testing.T, w wire, addr, raw string, methods ...string) (rs []result, closed bool) {
	t.Helper()
	c, err := w.dial(addr)
	if err != nil {
		t.Error(err)
		return nil, false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Error(err)
		return nil, false
	}
	br := bufio.NewReader(c)
	for _, m := range methods {
		res, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			rs = append(rs, result{ReadErr: strings.TrimPrefix(err.Error(), "malformed HTTP response")})
			return rs, true
		}
		body, berr := io.ReadAll(res.Body)
		r := result{Status: res.Status, Header: res.Header, Body: string(body), ContentLength: res.ContentLength,
			Chunked: len(res.TransferEncoding) > 0, Close: res.Close, Trailer: res.Trailer}
		if berr != nil {
			r.BodyErr = berr.Error()
		}
		r.Header.Del("Date")
		rs = append(rs, r)
		if berr != nil {
			return rs, true
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = br.ReadByte()
	var ne net.Error
	kept := errors.As(err, &ne) && ne.Timeout()
	closed = !kept
	return rs, closed
}

// TestResponsesMatchNetHTTP sends the same bytes to the loop (with
// net/http behind its hand-off) and to net/http alone, on plain TCP and
// over TLS, and wants the same answers and the same connection fate.
func TestResponsesMatchNetHTTP(t *testing.T) {
	for _, w := range []wire{plainWire, newTLSWire(t)} {
		t.Run(w.name, func(t *testing.T) { responsesMatchNetHTTP(t, w) })
	}
}

func responsesMatchNetHTTP(t *testing.T, w wire) {
	s, fast := startFastOn(t, http.HandlerFunc(caseHandler), w)
	std := startStdOn(t, http.HandlerFunc(caseHandler), w)
	get := func(path string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n"
	}
	cases := []struct {
		name    string
		raw     string
		methods []string
	}{
		{"small", get("/small"), []string{"GET"}},
		{"small twice", get("/small") + get("/small"), []string{"GET", "GET"}},
		{"sniffed html", get("/html"), []string{"GET"}},
		{"content-length", get("/cl"), []string{"GET"}},
		{"chunked big", get("/big"), []string{"GET"}},
		{"big after held-back bytes", get("/big-first"), []string{"GET"}},
		{"flush", get("/flush") + get("/small"), []string{"GET", "GET"}},
		{"head small", "HEAD /small HTTP/1.1\r\nHost: t\r\n\r\n" + get("/small"), []string{"HEAD", "GET"}},
		{"head declared length", "HEAD /head-cl HTTP/1.1\r\nHost: t\r\n\r\n", []string{"HEAD"}},
		{"head empty", "HEAD /empty HTTP/1.1\r\nHost: t\r\n\r\n", []string{"HEAD"}},
		{"204", get("/204") + get("/small"), []string{"GET", "GET"}},
		{"304", get("/304"), []string{"GET"}},
		{"103 then 200", get("/103"), []string{"GET"}},
		{"declared trailer", get("/trailer"), []string{"GET"}},
		{"prefix trailer", get("/prefix-trailer"), []string{"GET"}},
		{"handler closes", get("/close") + get("/small"), []string{"GET", "GET"}},
		{"client closes", "GET /small HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", []string{"GET"}},
		{"content-encoding", get("/ce"), []string{"GET"}},
		{"identity", get("/identity"), []string{"GET"}},
		{"te chunked", get("/te-chunked"), []string{"GET"}},
		{"bad content-length", get("/badcl"), []string{"GET"}},
		{"over content-length", get("/over"), []string{"GET"}},
		{"under content-length", get("/under"), []string{"GET"}},
		{"late header", get("/late"), []string{"GET"}},
		{"odd header and status", get("/odd"), []string{"GET"}},
		{"empty", get("/empty") + get("/small"), []string{"GET", "GET"}},
		{"body read", "POST /body HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello" + get("/small"), []string{"POST", "GET"}},
		{"body unread", "POST /unread HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello" + get("/small"), []string{"POST", "GET"}},
		{"body replaced", "POST /replaced HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello" + get("/small"), []string{"POST", "GET"}},
		{"readfrom with length", get("/readfrom-cl") + get("/small"), []string{"GET", "GET"}},
		{"readfrom sniffed", get("/readfrom"), []string{"GET"}},
		{"superfluous", get("/superfluous"), []string{"GET"}},
		{"panic", get("/panic"), []string{"GET"}},
		{"abort", get("/abort"), []string{"GET"}},
		{"write on 204", get("/nobody-write"), []string{"GET"}},
		{"not found", get("/nope"), []string{"GET"}},
		// handed off to net/http
		{"chunked request", "POST /body HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + get("/small"), []string{"POST", "GET"}},
		{"http/1.0", "GET /small HTTP/1.0\r\n\r\n", []string{"GET"}},
		{"plain then chunked", get("/small") + "POST /body HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n", []string{"GET", "POST"}},
		{"malformed", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", []string{"GET"}},
		{"bare LF", "GET /small HTTP/1.1\nHost: t\n\n", []string{"GET"}},
		{"connection state", get("/tls") + get("/tls"), []string{"GET", "GET"}},
		{"connection state after a hand-off", "POST /body HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/tls"), []string{"POST", "GET"}},
	}
	// Every case on both servers at once: each exchange waits a while to
	// see whether the connection stays open.
	type pair struct {
		got, want             []result
		gotClosed, wantClosed bool
	}
	out := make([]pair, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() { out[i].got, out[i].gotClosed = exchange(t, w, fast, c.raw, c.methods...) })
		wg.Go(func() { out[i].want, out[i].wantClosed = exchange(t, w, std, c.raw, c.methods...) })
	}
	wg.Wait()
	for i, c := range cases {
		o := out[i]
		if !reflect.DeepEqual(o.got, o.want) {
			t.Errorf("%s: h1serve:\n%+v\nnet/http:\n%+v", c.name, o.got, o.want)
		}
		if o.gotClosed != o.wantClosed {
			t.Errorf("%s: connection closed after: h1serve %v, net/http %v", c.name, o.gotClosed, o.wantClosed)
		}
	}
	st := s.Stats()
	if st.Requests == 0 || st.HandedOff < 5 {
		t.Errorf("stats %+v: want requests served here and at least 5 connections handed off", st)
	}
}
