package workqueue

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gate is work that records its calls and blocks each one until the test
// lets it go.
type gate struct {
	mu      sync.Mutex
	calls   []string
	started chan string
	release chan struct{}
}

func newGate() *gate {
	return &gate{started: make(chan string, 100), release: make(chan struct{})}
}

func (g *gate) work(ctx context.Context, key string) {
	g.mu.Lock()
	g.calls = append(g.calls, key)
	g.mu.Unlock()
	g.started <- key
	select {
	case <-g.release:
	case <-ctx.Done():
	}
}

func (g *gate) count(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, k := range g.calls {
		if k == key {
			n++
		}
	}
	return n
}

// waitStart returns the next key whose work started.
func (g *gate) waitStart(t *testing.T) string {
	t.Helper()
	select {
	case k := <-g.started:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("no work started")
		return ""
	}
}

// lastRun checks that key's work starts next, lets it end, and that no
// work starts after it; key was worked on runs times in all.
func (g *gate) lastRun(t *testing.T, key string, runs int) {
	t.Helper()
	if k := g.waitStart(t); k != key {
		t.Fatalf("started %s, want %s", k, key)
	}
	g.release <- struct{}{}
	g.noStart(t)
	if n := g.count(key); n != runs {
		t.Fatalf("%s worked on %d times, want %d", key, n, runs)
	}
}

// noStart fails the test if work starts within a short while.
func (g *gate) noStart(t *testing.T) {
	t.Helper()
	select {
	case k := <-g.started:
		t.Fatalf("work on %s started, want none", k)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestAddWhileWaitingQueuesOnce(t *testing.T) {
	g := newGate()
	q := New(context.Background(), 1, g.work)
	defer q.Close()
	q.Add("busy") // holds the only worker
	g.waitStart(t)
	for range 5 {
		q.Add("a")
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("Len = %d after five adds of one key, want 1", n)
	}
	g.release <- struct{}{} // busy ends
	g.lastRun(t, "a", 1)
}

func TestSameKeyNeverConcurrent(t *testing.T) {
	var running, most, calls atomic.Int32
	q := New(context.Background(), 8, func(ctx context.Context, key string) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		runtime.Gosched() // room for a second worker to overlap this run
		running.Add(-1)
		calls.Add(1)
	})
	var adders sync.WaitGroup
	for range 4 {
		adders.Go(func() {
			for range 2000 {
				q.Add("h1")
				runtime.Gosched()
			}
		})
	}
	adders.Wait()
	q.Close()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d runs of one key at once, want 1", m)
	}
	if calls.Load() < 2 {
		t.Fatalf("%d runs, want the key worked on again after adds during its run", calls.Load())
	}
}

func TestReaddDuringRunRunsOnceMoreAfter(t *testing.T) {
	g := newGate()
	q := New(context.Background(), 4, g.work)
	defer q.Close()
	q.Add("a")
	g.waitStart(t)
	q.Add("a")
	q.Add("a")
	// Free workers are idle, yet the second run waits for the first.
	g.noStart(t)
	g.release <- struct{}{}
	g.lastRun(t, "a", 2) // the run and one more
}

func TestWorkersBounded(t *testing.T) {
	g := newGate()
	q := New(context.Background(), 3, g.work)
	defer q.Close()
	for i := range 10 {
		q.Add(fmt.Sprint(i))
	}
	var first []string
	for range 3 {
		first = append(first, g.waitStart(t))
	}
	g.noStart(t)
	slices.Sort(first)
	if !slices.Equal(first, []string{"0", "1", "2"}) {
		t.Fatalf("first runs %v, want the three oldest keys", first)
	}
	// A slow key delays only itself: the others go on through the
	// remaining workers.
	for range 7 {
		g.release <- struct{}{}
		g.waitStart(t)
	}
}

func TestCloseCancelsAndWaits(t *testing.T) {
	var ended atomic.Bool
	var runs atomic.Int32
	started := make(chan struct{})
	q := New(context.Background(), 1, func(ctx context.Context, key string) {
		if runs.Add(1) > 1 {
			return
		}
		close(started)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // work that ends after its context
		ended.Store(true)
	})
	q.Add("a")
	q.Add("b") // waits behind a: Close drops it
	<-started
	q.Close()
	if !ended.Load() {
		t.Fatal("Close returned before the running work ended")
	}
	q.Add("c")
	if n := q.Len(); n != 0 {
		t.Fatalf("Len = %d after Close and Add, want 0", n)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1: nothing starts once Close began", n)
	}
	q.Close() // a second Close is harmless
}

func TestContextEndStopsTheQueue(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	g := newGate()
	q := New(ctx, 1, g.work)
	defer q.Close()
	q.Add("a")
	g.waitStart(t)
	q.Add("b")
	cancel() // a's work sees its context end
	g.noStart(t)
	q.Add("c")
	g.noStart(t)
	if n := g.count("b") + g.count("c"); n != 0 {
		t.Fatalf("%d runs after the context ended, want 0", n)
	}
}
