package execprov

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
)

// An exec home answering /version with a redirect to an internal listener
// on loopback: the version check fails and the listener sees no request.
func TestExecVersionFollowsNoRedirect(t *testing.T) {
	internal, hits := testbin.InternalListener(t)
	e := newExec(t, testConfig(testDataDir(t)))
	s := provider.Spec{ID: "h1", Target: "alice", Version: "v1",
		Env: []string{"EXEC_TEST_VERSION_REDIRECT=" + internal.URL + "/anything"}}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint) // the test's own client follows the redirect
	hits.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Ref = r.Ref
	v, err := e.Version(ctx, s)
	if err == nil {
		t.Errorf("a redirected version check answered %q; want an error", v)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the internal listener got %d requests through the home's redirect; want 0", n)
	}
}

// The last log lines a failure reason quotes are escaped and bounded: a
// home's terminal escapes never reach the record or the operator's
// terminal as written.
func TestLogTailEscapesHomeText(t *testing.T) {
	l := newLogFile(filepath.Join(t.TempDir(), "home.log"), 1<<20)
	if _, err := l.Write([]byte("boom \x1b]0;owned\a\x1b[2J\n" + strings.Repeat("z", 500) + "\n")); err != nil {
		t.Fatal(err)
	}
	got := l.tail(2)
	if strings.ContainsAny(got, "\x1b\a") || !strings.Contains(got, `boom \x1b]0;owned\a\x1b[2J`) {
		t.Errorf("tail = %q; want the escapes written as text", got)
	}
	if len(got) > 2*fault.ExcerptBytes+10 {
		t.Errorf("tail is %d bytes; want each line cut to %d", len(got), fault.ExcerptBytes)
	}
}
