package wakerecord

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
)

// A running wake logs its phase and the probe's last answer until it is
// stopped; after stop, nothing more is written.
func TestProgressLogsUntilStopped(t *testing.T) {
	var out testbin.LogBuffer
	p := NewProgress(slog.New(slog.NewTextHandler(&out, nil)), "h1", time.Now(), time.Minute,
		func() string { return "probing" })
	p.Note(probe.Result{Attempts: 3, Last: errors.New("status 502")})
	stop := p.Report(context.Background(), 5*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "wake in progress") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	line := out.String()
	for _, want := range []string{"home=h1", "phase=probing", "probe_attempts=3", `last_answer="status 502"`} {
		if !strings.Contains(line, want) {
			t.Fatalf("progress line %q lacks %s", line, want)
		}
	}
	after := out.String()
	time.Sleep(20 * time.Millisecond)
	if out.String() != after {
		t.Fatal("the reporter wrote after stop")
	}
}

// A negative pause turns the reporter off.
func TestProgressOff(t *testing.T) {
	var out testbin.LogBuffer
	p := NewProgress(slog.New(slog.NewTextHandler(&out, nil)), "h1", time.Now(), time.Minute,
		func() string { return "" })
	stop := p.Report(context.Background(), -1)
	time.Sleep(10 * time.Millisecond)
	stop()
	if out.String() != "" {
		t.Fatalf("off reporter wrote %q", out.String())
	}
}
