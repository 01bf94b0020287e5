package execprov

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/provider"

	"github.com/wakegate/wakegate/internal/testbin"
)

// refFilesUnder returns the provider's own records of its homes' processes
// under dir.
func refFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == refFile {
			out = append(out, p)
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatalf("no %s under %s", refFile, dir)
	}
	return out
}

// A record whose pid, start time and boot name a live process that runs
// another program than the recorded one is not adopted (design rule 17):
// the next gateway does not report it as the home, or act on it.
func TestAdoptionChecksExecutable(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	e1 := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Target: "alice", Version: "v1"}
	r1 := wake(t, e1, s)
	waitReady(t, r1.Endpoint)
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	ref := mustRef(t, r1)
	forged := ref
	forged.Exe = "/usr/bin/another-program"
	b, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range refFilesUnder(t, dir) {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e2 := newExec(t, cfg)
	s.Ref = string(b)
	st, err := e2.Status(context.Background(), s)
	if err == nil && st.State == provider.StateRunning && mustRef(t, st).PID == ref.PID {
		t.Fatalf("Status adopted pid %d, which runs %s, on a record that says %s", ref.PID, ref.Exe, forged.Exe)
	}
	if !alive(ref.Identity) {
		t.Fatal("the process that did not match was signalled")
	}
}

// A home started through a wrapper that execs its program keeps its pid
// and start time and changes its executable: the provider records the
// program it runs, so the next gateway adopts it, though the ref the
// caller kept names the wrapper.
func TestWrapperHomeAdoptedByItsProgram(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = append([]string{"/bin/sh", "-c", `exec "$0" "$@"`}, homeCommand...)
	e1 := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Target: "alice", Version: "v1"}
	r1 := wake(t, e1, s)
	waitReady(t, r1.Endpoint) // the shell has exec'd the home by now
	ref := mustRef(t, r1)
	if ref.Exe != "/bin/sh" && ref.Exe != "/usr/bin/dash" && ref.Exe != "/usr/bin/bash" {
		t.Logf("the wrapper was recorded as %s", ref.Exe)
	}
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := newExec(t, cfg)
	s.Ref = r1.Ref
	st, err := e2.Status(context.Background(), s)
	if err != nil || st.State != provider.StateRunning || mustRef(t, st).PID != ref.PID {
		t.Fatalf("Status after a restart = %+v, %v; want pid %d adopted", st, err, ref.PID)
	}
}

// A home started through a wrapper, whose gateway dies without closing:
// the record already names the program the home execs into, within
// moments of its start (and at once when it is suspended), so the next
// gateway adopts it rather than leave it running beside a new one.
func TestWrapperHomeAdoptedAfterGatewayDied(t *testing.T) {
	for _, suspend := range []bool{false, true} {
		t.Run(fmt.Sprintf("suspended=%v", suspend), func(t *testing.T) {
			w := wakeWrapped(t, suspend)
			e1, s, st, cfg := w.e, w.s, w.now, w.cfg
			ref := mustRef(t, w.r)
			h, err := e1.homeFor("h1")
			if err != nil {
				t.Fatal(err)
			}
			recordsProgram := func() bool {
				rec, ok := readRefFile(h)
				return ok && rec.PID == ref.PID && rec.Exe == st.Exe
			}
			if suspend {
				if err := e1.Suspend(context.Background(), s); err != nil {
					t.Fatal(err)
				}
				if !recordsProgram() {
					rec, _ := readRefFile(h)
					t.Fatalf("after Suspend the record names %s, want %s", rec.Exe, st.Exe)
				}
			} else {
				testbin.Eventually(t, "the record to name the home's program", recordsProgram)
			}
			// e1 is not closed: a gateway that died.
			e2 := newExec(t, cfg)
			got, err := e2.Status(context.Background(), provider.Spec{ID: "h1", Version: "v1"})
			want := provider.StateRunning
			if suspend {
				want = provider.StateSuspended
			}
			if err != nil || got.State != want || mustRef(t, got).PID != ref.PID {
				t.Fatalf("Status on the next gateway = %+v, %v; want pid %d %s", got, err, ref.PID, want)
			}
		})
	}
}
