package probe

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// silentUpgradeServer is a loopback HTTP/1.1 server that answers every GET
// with 200 but leaves a WebSocket upgrade unanswered, holding the
// connection open until the test ends: what a Vite dev server does with an
// upgrade that lacks its subprotocol. upgrades counts the upgrades it got.
type silentUpgradeServer struct {
	ln       net.Listener
	mu       sync.Mutex
	upgrades int
	held     []net.Conn
	wg       sync.WaitGroup
}

func newSilentUpgradeServer(t *testing.T) *silentUpgradeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentUpgradeServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.held {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *silentUpgradeServer) serve(c net.Conn) {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		_ = c.Close()
		return
	}
	if strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		s.mu.Lock()
		s.upgrades++
		s.held = append(s.held, c) // never answered; closed when the test ends
		s.mu.Unlock()
		return
	}
	_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
	_ = c.Close()
}

func (s *silentUpgradeServer) url() string { return "http://" + s.ln.Addr().String() }

// TestProbeAutoUnansweredUpgrade: a home that accepts the connection but
// never answers a WebSocket upgrade is judged by a GET once the upgrade's
// own bound ends, and the result says which step was skipped and which
// setting avoids it (DESIGN rule 36). Before, every attempt waited for the
// upgrade until the attempt timed out and the wake ran out of time.
func TestProbeAutoUnansweredUpgrade(t *testing.T) {
	t.Parallel()
	srv := newSilentUpgradeServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: Auto, Endpoint: srv.url(), WSPath: "/node/vite", Path: "/node/vite/",
		AttemptTimeout: 2 * time.Second, WSTimeout: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatalf("probe: %v (%+v)", err, res)
	}
	if res.Status != http.StatusOK || res.Attempts != 1 {
		t.Errorf("result %+v, want one attempt passing with 200", res)
	}
	for _, want := range []string{"ws upgrade unanswered after 200ms", "GET /node/vite/ → 200", "kind: http"} {
		if !strings.Contains(res.Note, want) {
			t.Errorf("note %q lacks %q", res.Note, want)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.upgrades != 1 {
		t.Errorf("upgrades tried: %d, want 1", srv.upgrades)
	}
}

// TestProbeAutoBrokerNotVouchedByGet: a broker that completes the upgrade
// and then closes the socket with an error within the settle window is not
// ready, however its own GET and the GETs of its apps answer: the auto
// probe never falls back to a GET after a 101.
func TestProbeAutoBrokerNotVouchedByGet(t *testing.T) {
	t.Parallel()
	up := websocket.Upgrader{}
	var gets int
	var mu sync.Mutex
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			_ = c.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "broker down"), time.Now().Add(time.Second))
			_ = c.Close()
			return
		}
		mu.Lock()
		gets++
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })

	// The probe ends after its third attempt has been answered, not at a
	// deadline that a loaded machine could let fall inside an attempt.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: Auto, Endpoint: "http://" + ln.Addr().String(), WSPath: "/node/b",
		Path: "/node/b/", AltPaths: []Path{{Path: "/health"}},
		OnAttempt: func(r Result) {
			if r.Attempts >= 3 {
				cancel()
			}
		}}, nil)
	if err == nil {
		t.Fatalf("probe passed: %+v", res)
	}
	if res.Status != http.StatusSwitchingProtocols {
		t.Errorf("last status %d, want 101", res.Status)
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseInternalServerErr {
		t.Errorf("error %v does not carry the broker's close", err)
	}
	if h := Hint(err); !strings.Contains(h, "settle") {
		t.Errorf("hint %q does not name the settle window", h)
	}
	mu.Lock()
	defer mu.Unlock()
	if gets != 0 {
		t.Errorf("%d GETs were sent to a home that answered the upgrade", gets)
	}
}
