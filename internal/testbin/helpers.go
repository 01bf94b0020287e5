package testbin

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// WaitLimit bounds every Eventually; it guards against a hang and is not a
// speed requirement.
const WaitLimit = 20 * time.Second

// Eventually polls cond every 10ms until it holds, failing the test after
// WaitLimit with what it was waiting for.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(WaitLimit, 10*time.Millisecond, cond) {
		t.Fatalf("gave up waiting for %s", what)
	}
}

// Poll calls cond every interval until it holds or limit has passed, and
// reports whether it held. It is Eventually for a caller that fails with
// its own message, waits longer than WaitLimit, or runs off the test's
// goroutine; cond is called at least once.
func Poll(limit, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}

// LogBuffer collects log output written from many goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines returns the logged lines (slog text format) whose msg is msg.
func (l *LogBuffer) Lines(msg string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, " msg="+msg+" ") || strings.HasSuffix(line, " msg="+msg) {
			out = append(out, line)
		}
	}
	return out
}

// HomePIDs returns the live processes whose working directory is dir: the
// homes an exec provider runs there. dir may name the folder through a
// link (data_dir/homes of a root gateway whose data_dir other users cannot
// pass links to the machine-wide folder). Zombies do not count.
func HomePIDs(t testing.TB, dir string) []int {
	t.Helper()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err != nil || cwd != dir {
			continue
		}
		if s := ProcState(pid); s == 'Z' || s == 0 {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// ProcState is field 3 of /proc/<pid>/stat (R, S, T, Z, ...), or 0 when
// the pid is free.
func ProcState(pid int) byte {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 || i+2 >= len(raw) {
		return 0
	}
	return raw[i+2]
}

// InternalListener is a loopback server that counts the requests reaching
// it and answers a secret with a terminal escape in it: a stand-in for an
// address on the gateway's machine that homes must not make it call, whose
// answer must never be shown unquoted.
func InternalListener(t testing.TB) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal-secret\x1b]0;owned\a")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// Background runs run on a goroutine of its own with a context that stop
// cancels. stop then waits up to WaitLimit for run to return and returns
// its error (or says it did not return); it may be called more than once,
// and the test's end calls it.
func Background(t testing.TB, run func(ctx context.Context) error) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(WaitLimit):
				runErr = fmt.Errorf("it did not return within %s of its context's end", WaitLimit)
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
