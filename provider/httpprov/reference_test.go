package httpprov

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// referenceControlPlane extracts the Python control plane printed in
// docs/http-provider.md, runs it on a loopback port with homeCmd as its
// HOME_CMD, and returns its base URL. It skips without python3 (unless
// CI=true). The process and its homes are stopped when the test ends.
func referenceControlPlane(t *testing.T, homeCmd string) (string, *logWriter) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is missing; the reference control plane test needs it")
		}
		t.Skip("python3 is missing; skipping the reference control plane")
	}
	_, file, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "http-provider.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("```python\n"))
	code, _, ok2 := bytes.Cut(rest, []byte("```\n"))
	if !ok || !ok2 {
		t.Fatal("docs/http-provider.md has no python block")
	}
	script := filepath.Join(t.TempDir(), "control_plane.py")
	if err := os.WriteFile(script, code, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script)
	cmd.Env = append(os.Environ(), "WAKEGATE_SECRET="+string(testSecret), "PORT=0", "HOME_CMD="+homeCmd)
	log := &logWriter{t: t}
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// SIGTERM lets it stop its homes; the group kill is the backstop.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Error("the reference control plane did not stop on SIGTERM")
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	_, base, found := strings.Cut(strings.TrimSpace(line), " on ")
	if err != nil || !found {
		t.Fatalf("the reference control plane said %q (%v), want its address", line, err)
	}
	return base, log
}

// logWriter sends a process's stderr to the test log and keeps it.
type logWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Logf("control plane: %s", bytes.TrimRight(p, "\n"))
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// count returns how many lines written so far contain s.
func (w *logWriter) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Count(w.buf.String(), s)
}

// The Python control plane printed in the docs follows the contract:
// wakes through 202 and long polls, refuses replayed and stale requests,
// answers 501 to a suspend, recreates on a new version and stops.
func TestReferenceControlPlane(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("python3 is missing")
	}
	base, _ := referenceControlPlane(t, "python3 -m http.server {port} --bind 127.0.0.1")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	rec := &recorder{next: tr}
	p := newClient(t, base, func(c *Config) { c.Client = &http.Client{Transport: rec} })
	ctx := ctxFor(t, 30*time.Second)

	res, err := p.Wake(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if status := getStatus(t, tr, res.Endpoint); status != http.StatusOK {
		t.Fatalf("the woken home answered %d", status)
	}
	again, err := p.Wake(ctx, alice)
	if err != nil || again.Endpoint != res.Endpoint {
		t.Fatalf("second wake = %+v, %v; want the running home at %s", again, err, res.Endpoint)
	}
	if st, err := p.Status(ctx, alice); err != nil || st.State != provider.StateRunning {
		t.Fatalf("status = %+v, %v; want running", st, err)
	}

	if code, reason := resend(t, tr, rec, 0); code != http.StatusUnauthorized || !strings.Contains(reason, "nonce") {
		t.Fatalf("a replayed wake answered %d %q, want 401 naming the nonce", code, reason)
	}
	stale := newClient(t, base, func(c *Config) { c.Now = func() time.Time { return time.Now().Add(-time.Hour) } })
	if _, err := stale.Status(ctx, alice); asError(t, err).Reason != provider.ReasonRefused {
		t.Fatalf("a stale status = %v, want %s", err, provider.ReasonRefused)
	}

	if err := p.Suspend(ctx, alice); !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("suspend = %v, want ErrUnsupported", err)
	}
	rolled, err := p.Recreate(ctx, provider.Spec{ID: "alice", Target: "alice", Version: "2"})
	if err != nil || rolled.Endpoint == res.Endpoint {
		t.Fatalf("recreate = %+v, %v; want a new home", rolled, err)
	}
	if v, err := p.Version(ctx, alice); err != nil || v != "2" {
		t.Fatalf("version = %q, %v; want 2", v, err)
	}
	if proven, err := p.Stop(ctx, alice); err != nil || !proven {
		t.Fatalf("stop = %v, %v; want proven", proven, err)
	}
	if st, err := p.Status(ctx, alice); err != nil || st.State != provider.StateStopped {
		t.Fatalf("status = %+v, %v; want stopped", st, err)
	}
}

// resend sends the i-th recorded request again, byte for byte, and
// returns the status and reason of the answer.
func resend(t *testing.T, tr http.RoundTripper, rec *recorder, i int) (int, string) {
	t.Helper()
	rec.mu.Lock()
	orig, body := rec.reqs[i], rec.body[i]
	rec.mu.Unlock()
	req, err := http.NewRequest(orig.Method, orig.URL.String(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = orig.Header.Clone()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var a Answer
	_ = json.NewDecoder(res.Body).Decode(&a)
	return res.StatusCode, a.Reason
}

func getStatus(t *testing.T, tr http.RoundTripper, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
