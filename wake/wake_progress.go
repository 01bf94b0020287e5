package wake

import (
	"context"
	"sync"
	"time"

	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/probe"
)

// defaultProgressEvery is the pause between two progress lines of one wake.
const defaultProgressEvery = 5 * time.Second

// noteAttempt keeps the probe's last failed attempt for the progress line.
func (w *wakeRun) noteAttempt(r probe.Result) { w.lastAttempt.Store(&r) }

// reportProgress logs one line every Options.ProgressEvery while the wake
// runs: its phase, the time since it began and, while probing, what the
// probe's last attempt got and the likely fix, so that a long wake is not
// silent between "started home" and its outcome. The returned stop ends
// the reporter and waits for it; ctx ending ends it too.
func (w *wakeRun) reportProgress(ctx context.Context) (stop func()) {
	every := w.e.o.ProgressEvery
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
				w.logProgress()
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

// logProgress writes one progress line.
func (w *wakeRun) logProgress() {
	phase, _ := w.f.phase.Load().(string)
	attrs := []any{"home", w.h.spec.ID, "phase", phase,
		"elapsed_s", time.Since(w.start).Round(100 * time.Millisecond).Seconds(),
		"ready_timeout_s", w.e.o.ReadyTimeout.Seconds()}
	if r := w.lastAttempt.Load(); r != nil && r.Last != nil {
		attrs = append(attrs, "probe_attempts", r.Attempts, "last_answer", r.Last.Error())
		if h := homefault.Hint(r.Last); h != "" {
			attrs = append(attrs, "hint", h)
		}
	}
	w.e.o.Log.Info("wake in progress", attrs...)
}
