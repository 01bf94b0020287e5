package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/wakegate/wakegate/forward"
)

// pattern is n bytes that do not repeat with a short period, so a byte
// lost, doubled or moved shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// sizedUpstream answers /<n> with n pattern bytes and a Content-Length;
// /cut/<n> announces n bytes, sends a third and closes.
func sizedUpstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		cut := len(r.URL.Path) > 5 && r.URL.Path[:5] == "/cut/"
		s := r.URL.Path[1:]
		if cut {
			s = r.URL.Path[5:]
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Header().Set("Content-Type", "application/octet-stream")
		body := pattern(n)
		if !cut {
			_, _ = w.Write(body)
			return
		}
		_, _ = w.Write(body[:n/3])
		w.(http.Flusher).Flush()
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	})
}

func TestDirectSpliceBodies(t *testing.T) {
	for _, c := range []struct {
		name string
		rate int64
		tls  bool
	}{{"plain", 0, false}, {"with a response rate floor", 1 << 20, false}, {"TLS client", 0, true}} {
		t.Run(c.name, func(t *testing.T) {
			up := sizedUpstream(t)
			o := testOptions()
			o.MinResponseRate, o.MinRateGrace = c.rate, 0
			p := New(o)
			t.Cleanup(p.Close)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p.Serve(w, r, &forward.Route{Name: "big", Upstream: up.url(t, "/")})
			})
			var s *httptest.Server
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			if c.tls {
				s = httptest.NewTLSServer(h)
				client = s.Client()
			} else {
				s = httptest.NewServer(h)
			}
			t.Cleanup(s.Close)
			t.Cleanup(client.CloseIdleConnections)
			sizes := []int{256 << 10, 1 << 20, 256 << 10, 3<<20 + 17}
			for _, n := range sizes {
				res, err := client.Get(s.URL + "/" + strconv.Itoa(n))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != http.StatusOK || !bytes.Equal(got, pattern(n)) {
					t.Fatalf("GET %d bytes: status %d, %d bytes, equal %v, %v", n, res.StatusCode, len(got), bytes.Equal(got, pattern(n)), err)
				}
			}
			// A handler counts its splice after the client already has
			// the last byte: Close waits for the handlers to return.
			client.CloseIdleConnections()
			s.Close()
			want := int64(len(sizes))
			if c.tls {
				want = 0 // copied with the pooled buffers
			}
			if got := p.spliced.Load(); got != want {
				t.Errorf("%d bodies went through ReadFrom, want %d", got, want)
			}
			if n := up.conns.Load(); n != 1 {
				t.Errorf("%d upstream connections for %d bodies in a row, want 1 (reuse after ReadFrom)", n, len(sizes))
			}
		})
	}
}

// TestDirectSpliceUpstreamCut checks an upstream that closes before the
// announced length gives the client an aborted response, not a short one
// taken as whole, and its connection is not reused.
func TestDirectSpliceUpstreamCut(t *testing.T) {
	up := sizedUpstream(t)
	s, p := front(t, testOptions(), func() *forward.Route { return &forward.Route{Name: "big", Upstream: up.url(t, "/")} })
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	t.Cleanup(client.CloseIdleConnections)
	res, err := client.Get(s.URL + "/cut/" + strconv.Itoa(1<<20))
	if err == nil {
		got, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		if rerr == nil {
			t.Fatalf("a cut body of %d bytes read as complete", len(got))
		}
	}
	res, err = client.Get(s.URL + "/" + strconv.Itoa(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || !bytes.Equal(got, pattern(256<<10)) {
		t.Fatalf("after a cut body: %d bytes, %v", len(got), err)
	}
	if n := up.conns.Load(); n != 2 {
		t.Errorf("%d upstream connections, want 2 (the cut one is not reused)", n)
	}
	client.CloseIdleConnections()
	s.Close() // the handler counts its splice after the client has the body
	if p.spliced.Load() != 1 {
		t.Errorf("spliced %d bodies, want 1", p.spliced.Load())
	}
}
