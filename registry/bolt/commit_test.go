package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// groupRig is a committer on a real file, whose first write holds its
// transaction open until released, so that the writes started meanwhile
// queue behind it.
type groupRig struct {
	t       *testing.T
	db      *bbolt.DB
	c       *committer
	release chan struct{}
	first   chan error
}

func newGroupRig(t *testing.T) *groupRig {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket([]byte("k"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r := &groupRig{t: t, db: db, c: &committer{db: db}, release: make(chan struct{}), first: make(chan error, 1)}
	entered := make(chan struct{})
	go func() {
		r.first <- r.c.do(context.Background(), func(tx *bbolt.Tx) error {
			close(entered)
			<-r.release
			return tx.Bucket([]byte("k")).Put([]byte("first"), []byte("1"))
		})
	}()
	<-entered
	return r
}

// put is a write of key.
func put(key string) func(*bbolt.Tx) error {
	return func(tx *bbolt.Tx) error { return tx.Bucket([]byte("k")).Put([]byte(key), []byte("v")) }
}

// waitQueued waits until n writes wait behind the first.
func (r *groupRig) waitQueued(n int) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.c.mu.Lock()
		q := len(r.c.queue)
		r.c.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d writes queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *groupRig) txid() int {
	r.t.Helper()
	var id int
	if err := r.db.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		r.t.Fatal(err)
	}
	return id
}

func (r *groupRig) has(key string) bool {
	r.t.Helper()
	var ok bool
	if err := r.db.View(func(tx *bbolt.Tx) error {
		ok = tx.Bucket([]byte("k")).Get([]byte(key)) != nil
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
	return ok
}

// TestCommitterJoinsQueuedWrites: writes that arrive while a commit runs
// are committed together in the next transaction, all of them.
func TestCommitterJoinsQueuedWrites(t *testing.T) {
	r := newGroupRig(t)
	before := r.txid()
	const n = 40
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- r.c.do(context.Background(), put(fmt.Sprintf("w%02d", i))) }()
	}
	r.waitQueued(n)
	close(r.release)
	if err := <-r.first; err != nil {
		t.Fatalf("first write: %v", err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("queued write: %v", err)
		}
	}
	if got := r.txid() - before; got != 2 {
		t.Errorf("%d writes took %d transactions, want 2 (the first, then the queued ones together)", n+1, got)
	}
	for i := range n {
		if k := fmt.Sprintf("w%02d", i); !r.has(k) {
			t.Errorf("%s was not written", k)
		}
	}
	// A lone write afterwards commits at once, in a transaction of its own.
	if err := r.c.do(context.Background(), put("alone")); err != nil || !r.has("alone") {
		t.Fatalf("lone write: %v", err)
	}
}

// TestCommitterFailedWriteUndoesNoOther: a write that fails in a group
// has no effect and gets its own error; the writes beside it commit.
func TestCommitterFailedWriteUndoesNoOther(t *testing.T) {
	r := newGroupRig(t)
	refused := errors.New("refused")
	var runs atomic.Int32
	var wg sync.WaitGroup
	results := make([]error, 3)
	fns := []func(*bbolt.Tx) error{
		put("a"),
		func(tx *bbolt.Tx) error {
			runs.Add(1)
			if err := tx.Bucket([]byte("k")).Put([]byte("b"), []byte("v")); err != nil {
				return err
			}
			return refused
		},
		put("c"),
	}
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.c.do(context.Background(), fn)
		}()
		r.waitQueued(i + 1) // in this order
	}
	close(r.release)
	wg.Wait()
	if err := <-r.first; err != nil {
		t.Fatalf("first write: %v", err)
	}
	if results[0] != nil || results[2] != nil {
		t.Errorf("the writes beside the failed one: %v, %v; want nil", results[0], results[2])
	}
	if !errors.Is(results[1], refused) {
		t.Errorf("the failed write got %v, want its own error", results[1])
	}
	if runs.Load() != 2 {
		t.Errorf("the failed write ran %d times, want 2 (in the group, then alone)", runs.Load())
	}
	for k, want := range map[string]bool{"first": true, "a": true, "b": false, "c": true} {
		if r.has(k) != want {
			t.Errorf("key %s stored: %v, want %v", k, !want, want)
		}
	}
}

// TestCommitterSkipsEndedContexts: a write whose context ends while it
// queues returns at once, says why, and never runs.
func TestCommitterSkipsEndedContexts(t *testing.T) {
	r := newGroupRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- r.c.do(ctx, func(tx *bbolt.Tx) error { ran.Store(true); return put("late")(tx) })
	}()
	r.waitQueued(1)
	cancel()
	// It gives up at once, while the commit before it still runs.
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a queued write whose context ended still waits")
	}
	close(r.release)
	if ran.Load() || r.has("late") {
		t.Error("the write of an ended context ran")
	}
	if err := <-r.first; err != nil {
		t.Fatalf("first write: %v", err)
	}
}
