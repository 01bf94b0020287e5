package wakerecord

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/probe"
)

// defaultProgressEvery is the pause between two progress lines of one wake.
const defaultProgressEvery = 5 * time.Second

// Progress is the log of one wake while it runs: every so often, one line
// with its phase, the time since it began and, while probing, what the
// probe's last attempt got and the likely fix, so that a long wake is not
// silent between "started home" and its outcome.
type Progress struct {
	log          *slog.Logger
	home         string
	start        time.Time
	readyTimeout time.Duration
	phase        func() string
	last         atomic.Pointer[probe.Result]
}

// NewProgress is the progress log of the wake of home that began at start;
// phase reads where the wake stands now.
func NewProgress(log *slog.Logger, home string, start time.Time, readyTimeout time.Duration, phase func() string) *Progress {
	return &Progress{log: log, home: home, start: start, readyTimeout: readyTimeout, phase: phase}
}

// Note keeps the probe's last failed attempt for the next line (a
// probe.Spec's OnAttempt).
func (p *Progress) Note(r probe.Result) { p.last.Store(&r) }

// Report logs one line every every (zero: every 5 s; negative: never)
// until the returned stop is called or ctx ends. stop ends the reporter
// and waits for it.
func (p *Progress) Report(ctx context.Context, every time.Duration) (stop func()) {
	if every == 0 {
		every = defaultProgressEvery
	}
	if every < 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.line()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}

// line writes one progress line.
func (p *Progress) line() {
	attrs := []any{"home", p.home, "phase", p.phase(),
		"elapsed_s", time.Since(p.start).Round(100 * time.Millisecond).Seconds(),
		"ready_timeout_s", p.readyTimeout.Seconds()}
	if r := p.last.Load(); r != nil && r.Last != nil {
		attrs = append(attrs, "probe_attempts", r.Attempts, "last_answer", r.Last.Error())
		if h := homefault.Hint(r.Last); h != "" {
			attrs = append(attrs, "hint", h)
		}
	}
	p.log.Info("wake in progress", attrs...)
}
