package execprov

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/orphans"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestAdoptedZombiesReaped runs a home that detaches short-lived processes
// which exit on their own: the gateway adopts each as a child subreaper
// and reaps it, so none stays a zombie holding a pid. The home's own exit
// status still reaches its watcher.
func TestAdoptedZombiesReaped(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.Containment = ContainSubreaper
	cfg.OnChange = ch.onChange
	cfg.Command = []string{"/bin/sh", "-c", `for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do ` +
		`( setsid sleep 0.01 & ); done; exec "$0" home -port={port} -version={version} -data={data_dir}`, "{self}"}
	e := newExec(t, cfg)
	if mode, _ := e.Containment(); mode != string(ContainSubreaper) {
		t.Skipf("no child subreaper here (%s)", mode)
	}
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r.Endpoint)
	testbin.Eventually(t, "the adopted processes to be reaped", func() bool { return len(adoptedZombies(t)) == 0 })
	exitHome(r.Endpoint, 3)
	if c := ch.next(t); c.State != provider.StateRunning {
		t.Fatalf("after the exit: %+v, want a restart", c)
	}
	if h := e.History("h1"); len(h) != 1 || h[0].ExitReason != "exit status 3" {
		t.Errorf("restart history %+v, want one restart after exit status 3", h)
	}
}

// adoptedZombies lists the zombies among this process's children that
// are outside its process group: the processes a subreaper adopted.
func adoptedZombies(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		st, err := rawStat(pid)
		if err == nil && st.PPid == os.Getpid() && st.Pgrp != unix.Getpgrp() && st.State == 'Z' {
			pids = append(pids, st.PID)
		}
	}
	return pids
}

// BenchmarkReapZombies measures one scan for adopted zombies, the work a
// SIGCHLD costs a gateway that is a child subreaper (at most one per
// reapPause); it reports the processes on the machine and the children
// the scan read.
func BenchmarkReapZombies(b *testing.B) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	procs := 0
	for _, en := range entries {
		if _, err := strconv.Atoi(en.Name()); err == nil {
			procs++
		}
	}
	for b.Loop() {
		orphans.ReapZombies()
	}
	b.ReportMetric(float64(procs), "procs")
	b.ReportMetric(float64(len(orphans.OwnChildren())), "children")
}
