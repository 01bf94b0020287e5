package probe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

// probeTestPython serves dir with a real `python3 -m http.server` on a free
// loopback port and returns its base URL. The process is killed when the
// test ends; the probe itself waits until it listens.
func probeTestPython(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	port := testbin.FreePort(t)
	cmd := exec.Command("python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir, fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// probeTestDemoHome runs the built-in demo home (a WebSocket service at
// /node/{target}) and returns its base URL.
func probeTestDemoHome(t *testing.T, target string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	testbin.Start(t, t.TempDir(), nil, "demo-home", "--addr", addr, "--target", target)
	return "http://" + addr
}

// TestProbeAutoRealServers runs the auto probe against a real Python HTTP
// server and the real demo home: a plain HTTP server passes on the GET of
// its path, a WebSocket service on the upgrade, and a server that serves
// only at its root passes through the path of an app inside it.
func TestProbeAutoRealServers(t *testing.T) {
	withNode := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withNode, "node", "py"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withNode, "node", "py", "index.html"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	pyNode := probeTestPython(t, withNode)
	pyRoot := probeTestPython(t, t.TempDir())
	demo := probeTestDemoHome(t, "demo")

	cases := []struct {
		name   string
		spec   Spec
		status int
	}{
		{"python serving its /node path", Spec{Endpoint: pyNode, WSPath: "/node/py", Path: "/node/py/"}, http.StatusOK},
		{"python serving an app at its root", Spec{Endpoint: pyRoot, WSPath: "/node/py", Path: "/node/py/",
			AltPaths: []Path{{Path: "/"}}}, http.StatusOK},
		{"demo home upgrades", Spec{Endpoint: demo, WSPath: "/node/demo", Path: "/node/demo/"}, http.StatusSwitchingProtocols},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Kind = Auto
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := Run(ctx, c.spec, nil)
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			if res.Status != c.status {
				t.Fatalf("status %d, want %d", res.Status, c.status)
			}
		})
	}
}

// TestProbeAutoNotFoundHint probes a real Python HTTP server that serves
// nothing under /node/{target}: the probe gives up once every answer has
// been 404 for its settle window, its error names what the upgrade and the
// GET got, and the hint names strip_prefix. The window is short, and the
// deadline long enough for a loaded machine: the give-up ends the probe.
func TestProbeAutoNotFoundHint(t *testing.T) {
	py := probeTestPython(t, t.TempDir())
	// Wait until the server answers, so the failure below is its answer.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := Run(ctx, Spec{Kind: TCP, Endpoint: py}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := Run(ctx, Spec{Kind: Auto, Endpoint: py, WSPath: "/node/py", Path: "/node/py/",
		NotFoundSettle: time.Second}, nil)
	if err == nil {
		t.Fatal("probe passed on a server that answers 404")
	}
	for _, want := range []string{"ws handshake: status 404", "GET /node/py/: http get: status 404"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !errors.Is(err, ErrNotFound) || ctx.Err() != nil {
		t.Errorf("error %q: want the early give-up on 404s, before the deadline", err)
	}
	if h := Hint(err); !strings.Contains(h, "strip_prefix: true") {
		t.Errorf("hint %q does not suggest strip_prefix", h)
	}
}

// TestProbeWSNotFoundHint: an explicit ws probe answered 404 suggests the
// auto and http kinds.
func TestProbeWSNotFoundHint(t *testing.T) {
	py := probeTestPython(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := Run(ctx, Spec{Kind: TCP, Endpoint: py}, nil); err != nil {
		t.Fatal(err)
	}
	answered, cancelAnswered := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelAnswered()
	// The probe ends at the home's first 404, however long the attempts
	// take on a loaded machine: the deadline is the backstop.
	onAttempt := func(r Result) {
		var ps StatusError
		if errors.As(r.Last, &ps) && int(ps) == http.StatusNotFound {
			cancelAnswered()
		}
	}
	_, err := Run(answered, Spec{Kind: WS, Endpoint: py, Path: "/node/py", OnAttempt: onAttempt}, nil)
	if err == nil {
		t.Fatal("ws probe passed on a plain HTTP server")
	}
	h := Hint(err)
	for _, want := range []string{"probe: auto", "probe: http"} {
		if !strings.Contains(h, want) {
			t.Errorf("hint %q lacks %q", h, want)
		}
	}
}

// TestProbeFailureHintFollowsAnswer: a probe whose last attempt was cut
// by its deadline is hinted by what the home last answered (404s under the
// kept prefix), not by the cut attempt.
func TestProbeFailureHintFollowsAnswer(t *testing.T) {
	t.Parallel()
	notFound := &autoProbeError{
		ws: StatusError(http.StatusNotFound), wsStatus: http.StatusNotFound,
		gets: []autoGet{{target: "http://h/node/x/", status: http.StatusNotFound, err: StatusError(http.StatusNotFound)}},
	}
	cut := &autoProbeError{
		ws: StatusError(http.StatusNotFound), wsStatus: http.StatusNotFound,
		gets: []autoGet{{target: "http://h/node/x/", err: context.DeadlineExceeded}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		answer error
		want   string
	}{
		{"answer differs from the cut attempt", notFound, "strip_prefix: true"},
		{"no earlier answer", nil, "no answer passed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &probeRun{spec: Spec{Kind: Auto}, target: "http://h/node/x/", answer: tc.answer}
			err := r.fail(ctx, Result{Attempts: 3, Last: cut})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%v: want the ctx error in the chain", err)
			}
			if h := Hint(err); !strings.Contains(h, tc.want) {
				t.Fatalf("hint %q: want %q", h, tc.want)
			}
		})
	}
}

// TestProbeAutoDeadBrokerIsNotReady runs the default probe against a real
// server whose broker accepts every WebSocket upgrade and then closes it
// with 1011 (internal error), while a GET of the home's page answers 200.
// The upgrade proves the home speaks WebSocket, so the GET must not vouch
// for it: the probe fails at its deadline, citing the close.
func TestProbeAutoDeadBrokerIsNotReady(t *testing.T) {
	var upgrades, gets atomic.Int64
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !websocket.IsWebSocketUpgrade(r) {
			gets.Add(1)
			_, _ = w.Write([]byte("page"))
			return
		}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		upgrades.Add(1)
		msg := websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "broker unavailable")
		_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
	}))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: Auto, Endpoint: srv.URL, WSPath: "/node/x", Path: "/node/x/"}, nil)
	if err == nil {
		t.Fatalf("a broker that closes every socket with 1011 was declared ready (status %d)", res.Status)
	}
	if upgrades.Load() == 0 {
		t.Fatal("the probe never upgraded")
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("the probe fell back to %d GETs after a successful upgrade", n)
	}
	if !strings.Contains(err.Error(), "1011") {
		t.Errorf("error %q does not cite the close code", err)
	}
}

// TestProbeAutoRefusedUpgradeFallsBack: a home that refuses the upgrade
// with an ordinary HTTP answer is judged by the GET of its page.
func TestProbeAutoRefusedUpgradeFallsBack(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			http.Error(w, "no websocket here", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("page"))
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: Auto, Endpoint: srv.URL, WSPath: "/node/x", Path: "/node/x/"}, nil)
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("probe = %d, %v; want a pass on the GET", res.Status, err)
	}
}
