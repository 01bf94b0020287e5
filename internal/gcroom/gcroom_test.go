package gcroom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// gogc reads the percentage the runtime itself is using.
func gogc(t *testing.T) int64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// waitFor runs collections until ok holds, or fails after a while: the
// tuning runs after a collection, on the runtime's cleanup goroutine,
// which says nothing when it is done.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	testbin.Eventually(t, what, func() bool {
		if ok() {
			return true
		}
		runtime.GC()
		return false
	})
}

var keep [][]byte

// TestRoomFollowsTheLiveHeap: a small live heap gets a percentage that
// puts the goal the headroom above it; a live heap larger than the
// headroom goes back to GOGC's default; Stop gives back what was set
// before.
func TestRoomFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "") // not set: this test decides
	prev := debug.SetGCPercent(77)
	defer debug.SetGCPercent(prev)

	const headroom = 64 << 20
	tu := Start(headroom)
	if tu == nil {
		t.Fatal("Start returned nil with GOGC unset")
	}
	waitFor(t, "small heap", func() bool { return gogc(t) > 400 })
	if got := int64(tu.Percent()); got != gogc(t) {
		t.Errorf("Percent() = %d, the runtime uses %d", got, gogc(t))
	}

	// 160 MiB live, past the headroom: the default comes back.
	for range 160 {
		keep = append(keep, make([]byte, 1<<20))
	}
	waitFor(t, "large heap", func() bool { return gogc(t) == base })

	keep = nil
	waitFor(t, "small again", func() bool { return gogc(t) > 400 })

	tu.Stop()
	if got := gogc(t); got != 77 {
		t.Errorf("after Stop GOGC is %d, want the 77 set before Start", got)
	}
	// No tuning after Stop, however many collections come.
	for range 5 {
		runtime.GC()
	}
	time.Sleep(50 * time.Millisecond)
	if got := gogc(t); got != 77 {
		t.Errorf("a collection after Stop set GOGC to %d", got)
	}
}

// TestOperatorsGOGCWins: with GOGC in the environment, or no headroom,
// nothing is tuned.
func TestOperatorsGOGCWins(t *testing.T) {
	prev := debug.SetGCPercent(150)
	defer debug.SetGCPercent(prev)
	t.Setenv("GOGC", "150")
	if tu := Start(64 << 20); tu != nil {
		tu.Stop()
		t.Fatal("Start tuned although GOGC is set")
	}
	t.Setenv("GOGC", "")
	if tu := Start(0); tu != nil {
		tu.Stop()
		t.Fatal("Start tuned with no headroom")
	}
	for range 3 {
		runtime.GC()
	}
	if got := gogc(t); got != 150 {
		t.Errorf("GOGC is %d, want 150 untouched", got)
	}
}

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		scan, headroom uint64
		want           int64
	}{
		{8 << 20, 32 << 20, 400},
		{32 << 20, 32 << 20, 100},
		{64 << 20, 32 << 20, 100},
		{0, 32 << 20, 800},       // before the first collection
		{1 << 10, 32 << 20, 800}, // the runtime's 4 MiB minimum
		{4 << 20, 1 << 30, 25600},
	} {
		if got := percentFor(tc.scan, tc.headroom); got != tc.want {
			t.Errorf("percentFor(%d, %d) = %d, want %d", tc.scan, tc.headroom, got, tc.want)
		}
	}
}

func TestWorthSetting(t *testing.T) {
	for _, tc := range []struct {
		old, p int64
		want   bool
	}{
		{old: 1600, p: 1600, want: false},
		{old: 1600, p: 1580, want: false}, // within 5 %
		{old: 1600, p: 1500, want: true},
		{old: 1600, p: 1700, want: true},
		{old: 101, p: base, want: true}, // base is always reached
		{old: 104, p: base, want: true},
		{old: base, p: base, want: false},
		{old: base, p: 103, want: false},
		{old: base, p: 106, want: true},
	} {
		if got := worthSetting(tc.old, tc.p); got != tc.want {
			t.Errorf("worthSetting(%d, %d) = %v, want %v", tc.old, tc.p, got, tc.want)
		}
	}
}

var sink []byte

// heapBeyondLive is what the heap holds in memory beyond its live bytes.
func heapBeyondLive() uint64 {
	s := []metrics.Sample{{Name: liveHeap}}
	for _, name := range residentHeap {
		s = append(s, metrics.Sample{Name: name})
	}
	metrics.Read(s)
	var resident uint64
	for _, x := range s[1:] {
		resident += x.Value.Uint64()
	}
	return resident - min(s[0].Value.Uint64(), resident)
}

// TestQuietGivesTheRoomBack: a burst of garbage fills the room and the
// heap grows into it; once nothing more is allocated, the tuner collects
// and returns the pages, and the heap holds little beyond what is live.
func TestQuietGivesTheRoomBack(t *testing.T) {
	t.Setenv("GOGC", "")
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	tu := Start(256 << 20)
	if tu == nil {
		t.Fatal("Start returned nil with GOGC unset")
	}
	defer tu.Stop()
	// The start may have found the test's own heap worth returning.
	testbin.Eventually(t, "the heap at rest", func() bool { return heapBeyondLive() <= minHeap })
	before := tu.Releases()

	for range 48 {
		sink = make([]byte, 1<<20)
	}
	sink = nil
	grown := heapBeyondLive()
	t.Logf("beyond the live heap after the burst: %d KiB", grown>>10)
	if grown <= minHeap {
		t.Fatalf("the burst left only %d KiB beyond the live heap: the room did not fill", grown>>10)
	}
	testbin.Eventually(t, "the room given back", func() bool {
		return tu.Releases() > before && heapBeyondLive() <= minHeap
	})
	t.Logf("beyond the live heap once quiet: %d KiB, %d release(s)", heapBeyondLive()>>10, tu.Releases()-before)

	tu.Stop()
	n := tu.Releases()
	for range 48 {
		sink = make([]byte, 1<<20)
	}
	sink = nil
	time.Sleep(2 * quietEvery)
	if tu.Releases() != n {
		t.Errorf("a release after Stop")
	}
}

func TestRelease(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		allocated, beyondLive uint64
		want                  bool
	}{
		{"quiet, room filled", 0, 32 << 20, true},
		{"quiet, little beyond the live heap", 0, 1 << 20, false},
		{"busy, room filled", 64 << 20, 32 << 20, false},
		{"a trickle, room filled", 64 << 10, 32 << 20, true},
		{"just busy enough", minHeap / 16, 32 << 20, false},
	} {
		if got := release(tc.allocated, tc.beyondLive); got != tc.want {
			t.Errorf("%s: release(%d, %d) = %v, want %v", tc.name, tc.allocated, tc.beyondLive, got, tc.want)
		}
	}
}

// TestPacer: the first quiet interval after a burst releases; a burst
// soon after a release doubles the quiet the next one waits for, up to
// maxQuietNeed; a burst long after brings it back to one interval; a heap
// with no room beyond its live part is never released.
func TestPacer(t *testing.T) {
	const busy, calm, roomy = 8 << 20, 1 << 10, 16 << 20
	at := time.Unix(0, 0)
	var p pacer
	step := func() time.Time { at = at.Add(quietEvery); return at }
	// quietFor runs quiet intervals until a release, and returns how many.
	quietFor := func() int {
		t.Helper()
		for n := 1; n <= 2*maxQuietNeed; n++ {
			if p.tick(step(), calm, roomy) {
				return n
			}
		}
		t.Fatal("no release after twice maxQuietNeed quiet intervals")
		return 0
	}
	if p.tick(step(), busy, roomy) {
		t.Fatal("released while busy")
	}
	if n := quietFor(); n != 1 {
		t.Fatalf("first release after %d quiet intervals, want 1", n)
	}
	for _, want := range []int{2, 4, 8, 16, 32, 60, 60} {
		p.tick(step(), busy, roomy) // a burst right after the release
		if n := quietFor(); n != want {
			t.Fatalf("after a burst soon after a release: released after %d quiet intervals, want %d", n, want)
		}
	}
	// A burst long after the last release: back to one interval.
	at = at.Add(10 * time.Minute)
	p.tick(step(), busy, roomy)
	if n := quietFor(); n != 1 {
		t.Fatalf("after a burst long after the release: %d quiet intervals, want 1", n)
	}
	// Nothing to give back: no release however quiet.
	for range 2 * maxQuietNeed {
		if p.tick(step(), calm, minHeap/2) {
			t.Fatal("released a heap with no room beyond its live part")
		}
	}
}
