package route

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/wakerecord"
)

// phases is a WaitSource that steps through a list of phases, one per
// change the test signals on next.
type phases struct {
	mu   sync.Mutex
	list []string
	at   int
	next chan struct{} // closed by step: the home changed
}

func (p *phases) Changed() (home, app <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next, nil
}

func (p *phases) View(context.Context, bool) wakerecord.View {
	p.mu.Lock()
	defer p.mu.Unlock()
	return wakerecord.View{Phase: p.list[p.at]}
}

func (p *phases) Report(_ *http.Request, v wakerecord.View) WaitReport {
	return WaitReport{Phase: v.Phase, Ready: v.Phase == wakerecord.Ready}
}

// step moves to the next phase and signals the change.
func (p *phases) step() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at++
	close(p.next)
	p.next = make(chan struct{})
}

// openStream serves StreamWake of src (ending at drain) on loopback and
// opens it, with a context that guards against a hang; both end with the
// test.
func openStream(t *testing.T, src *phases, drain <-chan struct{}) (context.Context, *http.Response) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		StreamWake(w, r, src, false, drain)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return ctx, res
}

// TestStreamWakeEndsAtReady reads a real status stream over loopback:
// one event per phase, in order, and the stream ends after ready.
func TestStreamWakeEndsAtReady(t *testing.T) {
	src := &phases{list: []string{wakerecord.Starting, wakerecord.Probing, wakerecord.Ready}, next: make(chan struct{})}
	ctx, res := openStream(t, src, nil)
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var got []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		got = append(got, line)
		if len(got) < len(src.list) {
			src.step()
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the stream went on after ready")
	}
	want := []string{`{"ready":false,"phase":"starting"}`, `{"ready":false,"phase":"probing"}`, `{"ready":true,"phase":"ready"}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestStreamWakeEndsAtDrain ends a stream that waits when drain closes.
func TestStreamWakeEndsAtDrain(t *testing.T) {
	src := &phases{list: []string{wakerecord.Starting}, next: make(chan struct{})}
	drain := make(chan struct{})
	ctx, res := openStream(t, src, drain)
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			close(drain)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the stream went on after the drain began")
	}
}

// TestLocalPath keeps a waiting page's redirect on the site.
func TestLocalPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/node/a/": true, "/apps/x/?q=1": true,
		"": false, "node/a": false, "//evil.example/": false, "/\\evil.example": false,
		"/a\nb": false, "/a\x7f": false, "https://evil.example/": false,
	} {
		if got := LocalPath(p); got != want {
			t.Errorf("LocalPath(%q) = %v, want %v", p, got, want)
		}
	}
}
