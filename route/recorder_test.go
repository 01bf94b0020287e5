package route_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/internal/h1head"
	"github.com/wakegate/wakegate/internal/h1test"
	"github.com/wakegate/wakegate/route"
)

// recorderServer serves every request on a loopback server through a
// Recorder over rel, as the public listener does, and hands the recorder
// to handle.
func recorderServer(t *testing.T, rel *route.Releases, handle func(*route.Recorder, *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rel.Inflight.Add(1)
		rw := route.NewRecorder(w, rel)
		defer rw.End()
		handle(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// get sends one GET with a forwarded client to url and reads the answer.
func get(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// newReleases are a listener's releases over a real connection cap of one
// per client that trusts loopback peers as proxies.
func newReleases(ctx context.Context) (*route.Releases, *edge.ConnLimit) {
	ip := access.ClientIP{Trusted: func(a netip.Addr) bool { return a.IsLoopback() }}
	cl := edge.NewConnLimit(1, ip, prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}))
	return &route.Releases{Inflight: new(route.Inflight), Clients: cl, HardStop: ctx}, cl
}

// takeClient has the request through rw hold its forwarded client's place
// under cl until it is over, or answers 429 when the place is taken.
func takeClient(rw *route.Recorder, r *http.Request, cl *edge.ConnLimit) bool {
	ip, ok := cl.TakeForwarded(r)
	if !ok {
		http.Error(rw, "capped", http.StatusTooManyRequests)
		return false
	}
	rw.SetClient(ip)
	return true
}

// A request's end runs what was added to it last first, gives back the
// forwarded client's place under the cap and leaves the in-flight count,
// once; the recorder counts the status and the bytes written.
func TestRecorderReleasesAtEnd(t *testing.T) {
	rel, cl := newReleases(context.Background())
	var mu sync.Mutex
	var order []string
	var seen *route.Recorder
	url := recorderServer(t, rel, func(rw *route.Recorder, r *http.Request) {
		if !takeClient(rw, r, cl) {
			return
		}
		for _, name := range []string{"first", "second"} {
			rw.AtEnd(func() { mu.Lock(); order = append(order, name); mu.Unlock() })
		}
		rw.SetRequestID(r, "pre-", 35)
		_, _ = io.WriteString(rw, r.Header.Get("X-Request-Id"))
		seen = rw
	})
	for i := range 3 {
		if body := get(t, url); body != "pre-z" {
			t.Fatalf("request %d: %q, want the request id pre-z (the client's place not given back?)", i, body)
		}
		if n := rel.Inflight.Count(); n != 0 {
			t.Fatalf("request %d: %d requests still in flight after it ended", i, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(order, ","); got != "second,first,second,first,second,first" {
		t.Errorf("end functions ran as %s, want the last added first, once per request", got)
	}
	if status, _, headerAt := seen.Answer(); status != http.StatusOK || headerAt.IsZero() || seen.Bytes() != 5 {
		t.Errorf("recorded %d at %v with %d bytes, want 200 with 5 bytes", status, headerAt, seen.Bytes())
	}
}

// A detached request ends when its relay says so, not when its handler
// returns: until then it holds its place in the in-flight count and under
// the cap, and its relay's context is the hard stop's. Ending it twice
// releases it once.
func TestRecorderDetach(t *testing.T) {
	hard, cut := context.WithCancel(context.Background())
	defer cut()
	rel, cl := newReleases(hard)
	ends := make(chan func(), 1)
	url := recorderServer(t, rel, func(rw *route.Recorder, r *http.Request) {
		if !takeClient(rw, r, cl) {
			return
		}
		ctx, end := rw.Detach()
		if ctx != hard {
			t.Error("a detached request's context is not the hard stop")
		}
		ends <- end
		_, _ = io.WriteString(rw, "detached")
	})
	if body := get(t, url); body != "detached" {
		t.Fatalf("first request: %q", body)
	}
	end := <-ends
	if n := rel.Inflight.Count(); n != 1 {
		t.Fatalf("%d in flight after the handler returned, want the detached request's 1", n)
	}
	if body := get(t, url); !strings.Contains(body, "capped") {
		t.Fatalf("a second request of the client while the first is detached: %q, want it capped", body)
	}
	end()
	end()
	if n := rel.Inflight.Count(); n != 0 {
		t.Fatalf("%d in flight after the detached end ran twice, want 0", n)
	}
	if body := get(t, url); body != "detached" {
		t.Fatalf("a request after the detached one ended: %q", body)
	}
	(<-ends)()
}

// TestRecorderPassesHeadBlocks serves a relayed head through a Recorder
// on h1serve's loop: the block reaches the loop's writer, and the
// recorder notes its status as WriteHeader would. Over net/http's writer
// the block is refused and nothing is recorded.
func TestRecorderPassesHeadBlocks(t *testing.T) {
	type answer struct {
		taken  bool
		status int
	}
	answers := make(chan answer, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := route.NewRecorder(w, nil)
		defer rw.End()
		b := h1head.Block{Length: 2}
		b.Fields = append(b.Fields, "Content-Length: 2\r\nX-Relayed: yes\r\n"...)
		taken := rw.WriteHeaderBlock(http.StatusAccepted, &b)
		if !taken {
			w.Header().Set("X-Relayed", "map")
			rw.WriteHeader(http.StatusAccepted)
		}
		_, _ = io.WriteString(rw, "ok")
		status, _, _ := rw.Answer()
		answers <- answer{taken, status}
	})
	loop := h1test.Serve(t, h)
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	for _, c := range []struct {
		url      string
		taken    bool
		relayed  string
		protocol string
	}{{"http://" + loop, true, "yes", "loop"}, {plain.URL, false, "map", "net/http"}} {
		res, err := http.Get(c.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		a := <-answers
		if res.StatusCode != http.StatusAccepted || string(body) != "ok" || res.Header.Get("X-Relayed") != c.relayed ||
			a.taken != c.taken || a.status != http.StatusAccepted {
			t.Errorf("%s: %d %q X-Relayed=%q, block taken %v, recorded status %d", c.protocol, res.StatusCode, body,
				res.Header.Get("X-Relayed"), a.taken, a.status)
		}
	}
}
