package wakerecord

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
)

// A running wake logs its phase and the probe's last answer every pause
// until it is stopped; after stop, nothing more is written. The test runs
// in a synctest bubble: the first line comes exactly one pause after the
// reporter starts, and an hour after stop there is still no other.
func TestProgressLogsUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out testbin.LogBuffer
		p := NewProgress(slog.New(slog.NewTextHandler(&out, nil)), "h1", time.Now(), time.Minute,
			func() string { return "probing" })
		p.Note(probe.Result{Attempts: 3, Last: errors.New("status 502")})
		stop := p.Report(t.Context(), 5*time.Second)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		stop()
		line := out.String()
		if n := strings.Count(line, "wake in progress"); n != 1 {
			t.Fatalf("%d progress lines after one pause, want 1: %q", n, line)
		}
		for _, want := range []string{"home=h1", "phase=probing", "elapsed_s=5", "probe_attempts=3", `last_answer="status 502"`} {
			if !strings.Contains(line, want) {
				t.Fatalf("progress line %q lacks %s", line, want)
			}
		}
		time.Sleep(time.Hour)
		if out.String() != line {
			t.Fatal("the reporter wrote after stop")
		}
	})
}

// A negative pause turns the reporter off: an hour on, it wrote nothing.
func TestProgressOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out testbin.LogBuffer
		p := NewProgress(slog.New(slog.NewTextHandler(&out, nil)), "h1", time.Now(), time.Minute,
			func() string { return "" })
		stop := p.Report(t.Context(), -1)
		time.Sleep(time.Hour)
		stop()
		if out.String() != "" {
			t.Fatalf("off reporter wrote %q", out.String())
		}
	})
}
