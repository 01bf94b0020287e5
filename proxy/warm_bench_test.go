package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/h1test"
)

// BenchmarkWarmGet measures a keep-alive GET through the proxy to a warm
// upstream, with the minimum rates at the gateway's defaults, for a small
// body (copied), a large one (spliced on the direct path) and a large one
// to a home with a relay token (copied through the masking writer), served
// by net/http and (the names ending in -loop) by the wakegate loop, which
// keeps the response floor itself (h1serve.SetWriteFloor). The names
// ending in -map have the direct path put the response's fields in the
// loop's header map rather than pass them as a block.
func BenchmarkWarmGet(b *testing.B) {
	for _, c := range []struct {
		size    int
		token   string
		loop    bool
		noBlock bool
	}{{1 << 10, "", false, false}, {256 << 10, "", false, false}, {256 << 10, testToken, false, false},
		{1 << 10, "", true, false}, {1 << 10, "", true, true}, {256 << 10, "", true, false}, {256 << 10, testToken, true, false}} {
		size := c.size
		name := strconv.Itoa(size>>10) + "KiB"
		if c.token != "" {
			name += "-masked" // a home's relay token: copied, not spliced
		}
		if c.loop {
			name += "-loop"
		}
		if c.noBlock {
			name += "-map"
		}
		b.Run(name, func(b *testing.B) {
			body := pattern(size)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write(body)
			}))
			b.Cleanup(up.Close)
			o := testOptions()
			o.MinBodyRate, o.MinResponseRate, o.MinRateGrace = 240, 240, 5*time.Second
			p := New(o)
			p.noBlock = c.noBlock
			b.Cleanup(p.Close)
			u, err := url.Parse(up.URL + "/")
			if err != nil {
				b.Fatal(err)
			}
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p.Serve(w, r, &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: u, RelayToken: c.token})
			})
			front := "http://" + h1test.Serve(b, h)
			if !c.loop {
				s := httptest.NewServer(h)
				b.Cleanup(s.Close)
				front = s.URL
			}
			client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 1}}
			b.Cleanup(client.CloseIdleConnections)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			reads0 := readSyscalls()
			for b.Loop() {
				res, err := client.Get(front + "/x")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err != nil || n != int64(size) {
					b.Fatalf("%d bytes, %v", n, err)
				}
			}
			if reads0 >= 0 {
				// The client's, the proxy's and the upstream's reads
				// together: compare builds.
				b.ReportMetric(float64(readSyscalls()-reads0)/float64(b.N), "read-syscalls/op")
			}
		})
	}
}

// BenchmarkWarmPost measures a keep-alive POST of a 256KiB body through
// the proxy, streamed to the upstream as it arrives (no slot to take) and
// read ahead first (a route with Acquire, at the gateway's default
// bounds: 64KiB in memory, the rest in a temporary file).
func BenchmarkWarmPost(b *testing.B) {
	for _, spool := range []bool{false, true} {
		name := "streamed"
		if spool {
			name = "read-ahead"
		}
		b.Run(name, func(b *testing.B) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, _ := io.Copy(io.Discard, r.Body)
				_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
			}))
			b.Cleanup(up.Close)
			o := testOptions()
			o.MinBodyRate, o.MinResponseRate, o.MinRateGrace = 240, 240, 5*time.Second
			o.BodyBuffer, o.BodySpool, o.SpoolDir = 64<<10, 32<<20, b.TempDir()
			p := New(o)
			b.Cleanup(p.Close)
			u, err := url.Parse(up.URL + "/")
			if err != nil {
				b.Fatal(err)
			}
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				route := &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: u}
				if spool {
					route.Acquire = func(http.ResponseWriter, *http.Request) (func(), bool) { return func() {}, true }
				}
				p.Serve(w, r, route)
			}))
			b.Cleanup(s.Close)
			client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 1}}
			b.Cleanup(client.CloseIdleConnections)
			body := pattern(256 << 10)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				res, err := client.Post(s.URL+"/x", "application/octet-stream", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				got, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || string(got) != strconv.Itoa(len(body)) {
					b.Fatalf("%q, %v", got, err)
				}
			}
		})
	}
}

// readSyscalls is how many read system calls this process has made
// (syscr in /proc/self/io), or -1 where that is not known.
func readSyscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
