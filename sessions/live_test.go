package sessions

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSnapshotVisitsHomesInUse proves that Snapshot looks at the homes
// that had sessions since the last one, not at every home ever seen: with
// 10,000 homes touched and three in use, the live list holds three, and
// it empties once their sessions end.
func TestSnapshotVisitsHomesInUse(t *testing.T) {
	s := New()
	for i := range 10000 {
		s.Touch(fmt.Sprintf("h%05d", i))
	}
	a, b := s.Begin("h00001"), s.Begin("h00002")
	s.Lease("h00003", time.Hour)
	got := s.Snapshot()
	if len(got) != 3 || got["h00001"] != 1 || got["h00002"] != 1 || got["h00003"] != 1 {
		t.Fatalf("snapshot = %v, want h00001..h00003 with one session each", got)
	}
	if n := len(s.live); n != 3 {
		t.Fatalf("live list holds %d counters, want 3", n)
	}
	s.End(a)
	s.End(b)
	if got := s.Snapshot(); len(got) != 1 {
		t.Fatalf("snapshot after two ends = %v, want the lease only", got)
	}
	if n := len(s.live); n != 1 {
		t.Fatalf("live list holds %d counters after two ends, want 1", n)
	}
}

// TestSnapshotNeverMissesHeldSession races sessions that begin and end
// against Snapshot, and then checks that every session still held is
// reported: a counter unlisted by Snapshot at the moment a Begin counted
// it must be listed again.
func TestSnapshotNeverMissesHeldSession(t *testing.T) {
	s := New()
	const homes = 64
	stop := make(chan struct{})
	var snaps sync.WaitGroup
	snaps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				s.Snapshot()
			}
		}
	})
	var held sync.Map
	var wg sync.WaitGroup
	for i := range homes {
		wg.Go(func() {
			id := fmt.Sprintf("h%02d", i)
			for range 500 {
				s.End(s.Begin(id))
			}
			held.Store(id, s.Begin(id))
		})
	}
	wg.Wait()
	close(stop)
	snaps.Wait()
	got := s.Snapshot()
	for i := range homes {
		id := fmt.Sprintf("h%02d", i)
		if got[id] != 1 {
			t.Errorf("home %s holds one session; snapshot says %d", id, got[id])
		}
	}
}
