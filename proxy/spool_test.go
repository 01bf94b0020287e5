package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wakegate/wakegate/forward"
)

// TestSpooledBodies sends bodies of every shape through a route that
// takes a slot: each reaches the upstream byte for byte, and the slot is
// taken only once the body is whole when it fits in memory plus the
// spool (8KiB and 64KiB here), with its length known then; a longer one
// is forwarded as it comes, its head buffered.
func TestSpooledBodies(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil)
	o := testOptions()
	o.BodyBuffer, o.BodySpool, o.SpoolDir = 8<<10, 64<<10, t.TempDir()
	var whole, taken, released atomic.Int32
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: up.url(t, "/"),
			Acquire: func(_ http.ResponseWriter, r *http.Request) (func(), bool) {
				taken.Add(1)
				if sp, ok := r.Body.(*spooled); ok && sp.done && r.ContentLength == sp.size {
					whole.Add(1)
				}
				return func() { released.Add(1) }, true
			}}
	})
	for _, c := range []struct {
		name    string
		size    int
		chunked bool
		whole   bool
	}{
		{"in memory", 5000, false, true},
		{"exactly the memory", 8 << 10, false, true},
		{"on disk", 40 << 10, false, true},
		{"chunked in memory", 3000, true, true},
		{"chunked on disk", 50 << 10, true, true},
		{"past the spool", 200 << 10, false, false},
		{"chunked past the spool", 200 << 10, true, false},
	} {
		whole.Store(0)
		body := pattern(c.size)
		var rd io.Reader = bytes.NewReader(body)
		if c.chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
		res, got := do(t, newReq(t, http.MethodPost, s.URL+"/up", rd))
		if res.StatusCode != http.StatusOK || got != "ok" {
			t.Fatalf("%s: %d %q", c.name, res.StatusCode, got)
		}
		if b := up.last(t).Body; !bytes.Equal(b, body) {
			t.Fatalf("%s: the upstream got %d bytes, equal %v; want the %d sent", c.name, len(b), bytes.Equal(b, body), c.size)
		}
		if w := whole.Load() == 1; w != c.whole {
			t.Errorf("%s: whole when the slot was taken: %v; want %v", c.name, w, c.whole)
		}
	}
	if taken.Load() != 7 || released.Load() != 7 {
		t.Errorf("slots taken %d, released %d; want 7 and 7", taken.Load(), released.Load())
	}
}

// TestSpoolRefusesBadBodies checks a body over the limit is answered 413
// and a body slower than the floor 408 while it is read ahead, before any
// slot is taken, and that the upstream sees neither.
func TestSpoolRefusesBadBodies(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil)
	o := rateOptions()
	o.BodyBuffer, o.BodySpool, o.SpoolDir, o.MaxBodyBytes = 4<<10, 16<<10, t.TempDir(), 10<<10
	var taken atomic.Int32
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: up.url(t, "/"),
			Acquire: func(http.ResponseWriter, *http.Request) (func(), bool) {
				taken.Add(1)
				return func() {}, true
			}}
	})
	res, _ := do(t, newReq(t, http.MethodPost, s.URL+"/big", io.MultiReader(strings.NewReader(strings.Repeat("x", 12<<10)))))
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over the limit: %d; want 413", res.StatusCode)
	}
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("slow"))
		// Nothing more: the floor (100B/s after 300ms) cuts the body.
	}()
	req := newReq(t, http.MethodPost, s.URL+"/slow", pr)
	req.ContentLength = 1000
	res, _ = do(t, req)
	_ = pw.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a stalled body: %d; want 408", res.StatusCode)
	}
	if n := taken.Load(); n != 0 {
		t.Errorf("%d slots taken for refused bodies; want 0", n)
	}
	if n := len(up.seen()); n != 0 {
		t.Errorf("the upstream saw %d requests; want 0", n)
	}
}
