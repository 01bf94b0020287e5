package h1serve

import (
	"bufio"
	"bytes"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/h1head"
)

// heads are request heads, plain and not, that the parser and net/http
// both see.
var heads = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /apps/x/y?q=1&r=%20 HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: t\r\nAccept: */*\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
	"GET / HTTP/1.1\r\nhost: a\r\nx-lower: 1\r\nX-Dup: 1\r\nx-dup: 2\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\nCache-Control: max-age=0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-Space:   padded \t \r\nX-Empty:\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-High: caf\xc3\xa9\r\n\r\n",
	"OPTIONS /x HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET //double/slash HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	// not plain: net/http decides
	"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
	"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
	"GET / HTTP/1.1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-Fold: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nBad Name: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-Ctl: a\x01b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-Colon : 1\r\n\r\n",
	"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
	"G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\nHost: a\n\n",
	"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
}

func TestHeadMatchesNetHTTP(t *testing.T) {
	plain := 0
	for _, h := range heads {
		if checkHead(t, []byte(h)) {
			plain++
		}
	}
	if plain < 11 {
		t.Errorf("only %d heads taken as plain, want at least 11", plain)
	}
}

func FuzzHeadMatchesNetHTTP(f *testing.F) {
	for _, h := range heads {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkHead(t, b) })
}

// checkHead parses b both ways; when the parser takes it, net/http must
// take it too and make the same request of it. It reports whether the
// parser took it.
func checkHead(t *testing.T, b []byte) bool {
	t.Helper()
	n := headEnd(b)
	if n <= 0 {
		return false
	}
	ph, ok := parseHead(b[:n])
	if !ok {
		return false
	}
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:n])))
	if err != nil {
		t.Fatalf("%q: taken as plain, but net/http refuses it: %v", b[:n], err)
	}
	// What net/http's server checks beyond ReadRequest.
	for k, vv := range r.Header {
		if !h1head.ValidToken(k) {
			t.Fatalf("%q: taken, but net/http's server refuses the name %q", b[:n], k)
		}
		for _, v := range vv {
			if !h1head.ValidValue(v) {
				t.Fatalf("%q: taken, but net/http's server refuses the value %q", b[:n], v)
			}
		}
	}
	delete(r.Header, "Host")
	got := ph.header
	if ph.method != r.Method || ph.target != r.RequestURI || *ph.url != *r.URL ||
		ph.host != r.Host || ph.contentLength != r.ContentLength || ph.close != r.Close {
		t.Fatalf("%q:\n got %s %s %s host=%q cl=%d close=%v\nwant %s %s %s host=%q cl=%d close=%v", b[:n],
			ph.method, ph.target, ph.url, ph.host, ph.contentLength, ph.close,
			r.Method, r.RequestURI, r.URL, r.Host, r.ContentLength, r.Close)
	}
	if !maps.EqualFunc(got, r.Header, slices.Equal) {
		t.Fatalf("%q: header\n got %v\nwant %v", b[:n], got, r.Header)
	}
	return true
}

func TestHeadEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\nrest", len("GET / HTTP/1.1\r\nHost: a\r\n\r\n")},
		{"GET / HTTP/1.1\r\nHost: a\r\n", 0},
		{"GET / HTTP/1.1\r\nHost: a\r\n\r", 0},
		{"GET / HTTP/1.1\nHost: a\r\n\r\n", -1},
		{"\r\n", -1},
		{"", 0},
	} {
		if got := headEnd([]byte(c.in)); got != c.want {
			t.Errorf("headEnd(%q) = %d, want %d", c.in, got, c.want)
		}
	}
	if strings.Contains(heads[0], "\n\n") {
		t.Fatal("heads[0] is not CRLF-framed")
	}
}
