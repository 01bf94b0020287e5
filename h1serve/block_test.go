package h1serve

import (
	"bufio"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/h1head"
)

// blockCases are relayed heads: the fields an upstream sent and the body
// the handler writes after them.
var blockCases = map[string]struct {
	status int
	fields string
	body   string
	set    map[string]string // set in the header map first, as a middleware would
}{
	"/typed":    {200, "Content-Type: text/plain\r\nContent-Length: 5\r\nX-Multi: 1\r\nX-Multi: 2\r\n", "hello", nil},
	"/sniffed":  {200, "Content-Length: 20\r\n", "<html>sniff me</html>"[:20], nil},
	"/encoded":  {200, "Content-Encoding: gzip\r\nContent-Length: 4\r\n", "<p>x", nil},
	"/dated":    {200, "Date: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 2\r\n", "ok", nil},
	"/empty":    {404, "Content-Length: 0\r\n", "", nil},
	"/odd":      {599, "Content-Length: 1\r\nX-Empty: \r\n", "z", nil},
	"/with-map": {200, "Content-Length: 3\r\nX-Request-Id: upstream\r\n", "abc", map[string]string{"X-Request-Id": "gw-1", "Content-Type": "a/b"}},
	"/under":    {200, "Content-Length: 9\r\n", "short", nil},
	// The map holds a framing field: the block is refused and the
	// handler falls back to the map.
	"/refused": {200, "Content-Length: 3\r\n", "abc", map[string]string{"Connection": "close"}},
	"/big":     {200, "Content-Type: text/plain\r\nContent-Length: 6000\r\n", strings.Repeat("b", 6000), nil},
}

// blockHandler answers the blockCases: with WriteHeaderBlock (block) or
// with the header map and WriteHeader, as a proxy with no block does. It
// notes whether the block was taken.
func blockHandler(block bool, taken *sync.Map) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := blockCases[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		for k, v := range c.set {
			w.Header().Set(k, v)
		}
		var b h1head.Block
		if !b.Append(c.fields+"\r\n", func(key []byte, v string) (bool, bool) {
			if string(key) == "Content-Length" {
				b.Length, _ = strconv.ParseInt(v, 10, 64)
			}
			return true, true
		}) {
			panic("case fields are not plain: " + r.URL.Path)
		}
		bw, isBW := w.(interface {
			WriteHeaderBlock(int, *h1head.Block) bool
		})
		if block && isBW && bw.WriteHeaderBlock(c.status, &b) {
			taken.Store(r.Method+" "+r.URL.Path, true)
		} else {
			for _, line := range strings.Split(strings.TrimSuffix(string(b.Fields), "\r\n"), "\r\n") {
				k, v, _ := strings.Cut(line, ": ")
				w.Header().Add(k, v)
			}
			w.WriteHeader(c.status)
		}
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(c.body))
		}
	}
}

// TestHeaderBlockMatchesNetHTTP answers the same relayed heads with
// WriteHeaderBlock on the loop and through the header map on net/http
// alone, and wants the same answers, the same connection fate and one
// Date field.
func TestHeaderBlockMatchesNetHTTP(t *testing.T) {
	var taken sync.Map
	_, fast := startFast(t, blockHandler(true, &taken))
	std := startStd(t, blockHandler(false, new(sync.Map)))
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n" }
	cases := []struct {
		name    string
		raw     string
		methods []string
		block   []string // the requests that must have taken the block
	}{
		{"typed twice", get("/typed") + get("/typed"), []string{"GET", "GET"}, []string{"GET /typed"}},
		{"sniffed", get("/sniffed"), []string{"GET"}, []string{"GET /sniffed"}},
		{"encoded, not sniffed", get("/encoded"), []string{"GET"}, []string{"GET /encoded"}},
		{"upstream date", get("/dated"), []string{"GET"}, []string{"GET /dated"}},
		{"empty 404", get("/empty") + get("/typed"), []string{"GET", "GET"}, []string{"GET /empty"}},
		{"odd status", get("/odd"), []string{"GET"}, []string{"GET /odd"}},
		{"map and block", get("/with-map"), []string{"GET"}, []string{"GET /with-map"}},
		{"shorter than its length", get("/under") + get("/typed"), []string{"GET", "GET"}, []string{"GET /under"}},
		{"map holds framing", get("/refused"), []string{"GET"}, nil},
		{"big", get("/big") + get("/typed"), []string{"GET", "GET"}, []string{"GET /big"}},
		{"client closes", "GET /typed HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", []string{"GET"}, []string{"GET /typed"}},
		{"head", "HEAD /typed HTTP/1.1\r\nHost: t\r\n\r\n" + get("/typed"), []string{"HEAD", "GET"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			taken.Clear()
			var got, want []result
			var gotClosed, wantClosed bool
			var wg sync.WaitGroup
			wg.Go(func() { got, gotClosed = exchange(t, plainWire, fast, c.raw, c.methods...) })
			wg.Go(func() { want, wantClosed = exchange(t, plainWire, std, c.raw, c.methods...) })
			wg.Wait()
			if !reflect.DeepEqual(got, want) || gotClosed != wantClosed {
				t.Errorf("loop with block:\n %+v closed=%v\nnet/http with map:\n %+v closed=%v", got, gotClosed, want, wantClosed)
			}
			for _, k := range c.block {
				if _, ok := taken.Load(k); !ok {
					t.Errorf("%s did not take the block", k)
				}
			}
			if _, ok := taken.Load("HEAD /typed"); ok {
				t.Error("a HEAD request took the block")
			}
			if _, ok := taken.Load("GET /refused"); ok {
				t.Error("a block was taken beside a Connection field in the map")
			}
		})
	}
	// One Date field, the upstream's, when it sent one; the loop's own
	// otherwise.
	for path, want := range map[string]string{"/dated": "Mon, 01 Jan 2024 00:00:00 GMT", "/typed": ""} {
		dates := rawDates(t, fast, path)
		if len(dates) != 1 || (want != "" && dates[0] != want) {
			t.Errorf("%s: Date fields %q, want one (%q)", path, dates, want)
		}
	}
}

// rawDates fetches path from addr and returns the values of its Date
// fields.
func rawDates(t *testing.T, addr, path string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return res.Header["Date"]
}
