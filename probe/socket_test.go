package probe

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// probeTestUnixHome serves, on a Unix socket at path, the probe path over
// HTTP and WebSocket, and counts the probes it answered and the Host
// headers that were not the stand-in.
func probeTestUnixHome(t *testing.T, path string) (hits, badHost *atomic.Int64) {
	t.Helper()
	hits, badHost = &atomic.Int64{}, &atomic.Int64{}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	up := websocket.Upgrader{}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "localhost" {
			badHost.Add(1)
		}
		if !probeTestAuthorised(r) {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		if websocket.IsWebSocketUpgrade(r) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			_ = c.WriteMessage(websocket.TextMessage, []byte("hello"))
			_ = c.Close()
			return
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return hits, badHost
}

// TestProbeUnixSocketEachKind probes a home on a Unix socket endpoint
// (unix:///path) with every kind: each reaches it through the socket.
func TestProbeUnixSocketEachKind(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "home.sock")
	hits, badHost := probeTestUnixHome(t, sock)
	for _, kind := range []Kind{HTTP, WS, TCP, Auto} {
		t.Run(string(kind), func(t *testing.T) {
			spec := Spec{Kind: kind, Endpoint: "unix://" + sock, Path: probeTestPath, Header: probeTestRelay()}
			before := hits.Load()
			res, err := Run(probeTestGuard(t), spec, nil)
			if err != nil {
				t.Fatalf("probe: %v (result %+v)", err, res)
			}
			if kind != TCP && hits.Load() == before {
				t.Errorf("the home saw no probe")
			}
		})
	}
	if n := badHost.Load(); n != 0 {
		t.Errorf("%d probes sent a Host other than localhost", n)
	}
}

// TestProbeUnixSocketWatchesForTheSocket starts a probe before the home's
// socket exists, with long pauses between attempts: the watch between
// attempts sees the socket accept and the next attempt passes long before
// the pause would have ended.
func TestProbeUnixSocketWatchesForTheSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "home.sock")
	ctx, cancel := context.WithTimeout(probeTestGuard(t), 30*time.Second)
	defer cancel()
	missed := make(chan struct{})
	spec := Spec{Kind: HTTP, Endpoint: "unix://" + sock, Path: probeTestPath, Header: probeTestRelay(),
		MinPause: 20 * time.Second, MaxPause: 20 * time.Second, PortWatch: 10 * time.Millisecond,
		OnAttempt: func(r Result) {
			if r.Attempts == 1 {
				close(missed)
			}
		}}
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Run(ctx, spec, nil)
		done <- outcome{res, err}
	}()
	select {
	case <-missed: // the first attempt found no socket
	case o := <-done:
		t.Fatalf("probe: %+v, %v before the socket was there; want a miss, then a wait", o.res, o.err)
	}
	probeTestUnixHome(t, sock)
	select {
	case o := <-done:
		if o.err != nil || o.res.Attempts < 2 {
			t.Fatalf("probe: %+v, %v; want a pass on a later attempt", o.res, o.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the probe waited out its pause: the socket was not watched")
	}
}
