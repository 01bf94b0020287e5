package gopool

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// goroutineID is the number the runtime gives the calling goroutine.
func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	if f := strings.Fields(string(b)); len(f) > 1 { // "goroutine 42 [running]:"
		return f[1]
	}
	return ""
}

// TestWaitingGoroutineRunsTheNext: work given one piece after another runs
// on the goroutine that ran the first, which waited for it.
func TestWaitingGoroutineRunsTheNext(t *testing.T) {
	ids := make(chan string, 1)
	p := New(func(int) { ids <- goroutineID() }, 4, time.Hour)
	defer p.Wait()
	defer p.Halt()
	seen := map[string]bool{}
	for i := range 10 {
		p.Go(i)
		seen[<-ids] = true
		testbin.Eventually(t, "the goroutine waiting again", func() bool { return p.Idle() == 1 })
	}
	if len(seen) != 1 || p.Started() != 1 {
		t.Fatalf("10 pieces ran on goroutines %v, %d started; want one", seen, p.Started())
	}
}

// TestWaitsAreBoundedAndEnd: after more pieces at once than maxIdle, that
// many goroutines wait and the others end; Halt ends the waits and Wait
// returns once the work still running is done; a goroutine that waits in
// vain ends after idleFor.
func TestWaitsAreBoundedAndEnd(t *testing.T) {
	release := make(chan struct{})
	var running sync.WaitGroup
	const n, maxIdle = 20, 5
	running.Add(n)
	p := New(func(int) { running.Done(); <-release }, maxIdle, time.Hour)
	for i := range n {
		p.Go(i)
	}
	running.Wait()
	if p.Started() != n {
		t.Fatalf("%d goroutines for %d pieces at once", p.Started(), n)
	}
	close(release)
	testbin.Eventually(t, "maxIdle goroutines waiting", func() bool { return p.Idle() == maxIdle })

	block := make(chan struct{})
	p2 := New(func(int) { <-block }, 1, time.Hour)
	p2.Go(0)
	p2.Halt()
	waited := make(chan struct{})
	go func() { p2.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a piece still ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(block)
	<-waited
	if p2.Idle() != 0 {
		t.Fatalf("%d goroutines waiting after Halt", p2.Idle())
	}

	p.Halt()
	p.Wait()
	if p.Idle() != 0 {
		t.Fatalf("%d goroutines waiting after Halt and Wait", p.Idle())
	}

	p3 := New(func(int) {}, 1, 200*time.Millisecond)
	p3.Go(0)
	testbin.Eventually(t, "the goroutine waiting", func() bool { return p3.Idle() == 1 })
	p3.Wait() // ends by itself: its wait is over after idleFor
	if p3.Idle() != 0 {
		t.Fatalf("%d goroutines waiting once their idle time is over", p3.Idle())
	}
}
