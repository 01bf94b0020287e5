package execprov

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// A gateway that no longer holds a home in its fleet (Config.MayRestart
// false) sees its process exit and starts nothing: no restart, no report,
// and the home is no longer watched (DESIGN rule 32).
func TestExitWithoutTheLeaseIsNotRestarted(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	asked := make(chan string, 4)
	cfg.MayRestart = func(id string) bool {
		asked <- id
		return false
	}
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)
	exitHome(r.Endpoint, 0)

	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("MayRestart never asked after the exit")
	}
	if n := len(asked); n != 0 {
		t.Fatalf("MayRestart asked %d times, want once", 1+n)
	}
	select {
	case c := <-ch.ch:
		t.Fatalf("the provider reported %+v, want nothing", c)
	case <-time.After(time.Second):
	}
	if n := pidLines(t, dir, "h1"); n != 1 {
		t.Fatalf("%d processes started, want 1 (no restart)", n)
	}
	logText, err := os.ReadFile(filepath.Join(dir, "homes", "h1", "home.log"))
	if err != nil || !strings.Contains(string(logText), "no longer holds the home: not restarted") {
		t.Fatalf("home log %q (%v), want the exit noted as not restarted", logText, err)
	}
	// A wake acts on it again.
	r = wake(t, e, s)
	waitReady(t, r.Endpoint)
	if st, err := e.Status(context.Background(), s); err != nil || st.State != provider.StateRunning {
		t.Fatalf("Status after a wake = %+v, %v; want running", st, err)
	}
}
