// Package gcroom gives Go's collector a fixed amount of room above the
// live heap while that heap is small.
//
// With GOGC's default of 100 the collector runs each time the heap has
// grown by as much as is live. A gateway keeps little live (a few MiB of
// routes, pools and idle connections) and allocates a little for every
// request, so it collects often, and each cycle costs the same marking
// of the same live heap plus the write barriers and assists while it
// runs. Tuner sets the percentage after each collection so that the
// next one comes once the heap has grown by the headroom, or by what a
// collection scans (the live heap, stacks and globals) if that is more:
// a small heap gets a fixed room, a large one keeps the default, and the
// memory it costs over the default is at most the headroom.
//
// The room is worth its memory only while the gateway allocates. A burst
// (a thousand WebSocket handshakes, a minute of traffic) fills it, and
// the runtime keeps the pages it grew into: its scavenger returns memory
// only above the collector's goal, which is the headroom above the live
// heap. So a gateway that went quiet after one burst would hold the
// headroom as resident memory for the rest of its life. Tuner therefore
// watches the allocation rate, and once a short interval went by with
// little allocated while the heap holds more than GOGC's default would
// have let it grow, it collects and returns the free pages to the system
// (debug.FreeOSMemory), once per burst. That costs one collection, which
// the default would have run for the same allocation anyway, and the
// page faults of growing back into the room at the next burst; it saves
// nothing while the gateway is busy and changes nothing then. Where
// bursts come a second or two apart those page faults would be paid at
// every burst, so the quiet a release waits for grows while bursts keep
// coming soon after releases (pacer).
package gcroom

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// base is the percentage a heap larger than the headroom keeps: GOGC's
// default.
const base = 100

// The collector's goal is the live heap plus GOGC percent of what it
// scans: the live heap, the goroutines' stacks and the globals.
var scanned = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// quietEvery is how often the Tuner looks for a quiet gateway: the
// interval over which the allocation rate is measured.
const quietEvery = 500 * time.Millisecond

// The heap's resident bytes beyond what is live, and what it allocated.
var (
	residentHeap = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/memory/classes/heap/free:bytes"}
	liveHeap     = "/gc/heap/live:bytes"
	allocated    = "/gc/heap/allocs:bytes"
)

// Tuner keeps the collector's goal at least its headroom above the live
// heap. It runs once per collection, on the runtime's cleanup goroutine,
// and gives the room back to the system when the gateway goes quiet, on
// a goroutine of its own, until Stop.
type Tuner struct {
	headroom uint64
	stopped  atomic.Bool
	percent  atomic.Int64
	releases atomic.Int64

	mu      sync.Mutex // one tune at a time, and none after Stop
	sample  []metrics.Sample
	restore int

	quit chan struct{} // closed by Stop: the quiet watch ends
	done chan struct{} // closed when the quiet watch has ended
}

// Start begins tuning with the given headroom in bytes. It returns nil,
// and changes nothing, when headroom is 0 or when the GOGC environment
// variable is set: the operator's own setting wins.
func Start(headroom uint64) *Tuner {
	if headroom == 0 || os.Getenv("GOGC") != "" {
		return nil
	}
	t := &Tuner{headroom: headroom}
	for _, name := range scanned {
		t.sample = append(t.sample, metrics.Sample{Name: name})
	}
	t.restore = debug.SetGCPercent(base)
	t.percent.Store(base)
	t.tune()
	t.arm()
	t.quit, t.done = make(chan struct{}), make(chan struct{})
	go t.watchQuiet()
	return t
}

// Percent is the percentage set last.
func (t *Tuner) Percent() int { return int(t.percent.Load()) }

// Releases is how many times the room went back to the system.
func (t *Tuner) Releases() int { return int(t.releases.Load()) }

// Stop ends the tuning and the quiet watch, and gives the collector back
// the percentage it had before Start.
func (t *Tuner) Stop() {
	t.mu.Lock()
	if t.stopped.Swap(true) {
		t.mu.Unlock()
		return
	}
	debug.SetGCPercent(t.restore)
	t.mu.Unlock()
	close(t.quit)
	<-t.done
}

// watchQuiet measures the allocation rate every quietEvery and returns
// the heap's free pages to the system when release says so.
func (t *Tuner) watchQuiet() {
	defer close(t.done)
	tick := time.NewTicker(quietEvery)
	defer tick.Stop()
	s := make([]metrics.Sample, 0, len(residentHeap)+2)
	for _, name := range append([]string{liveHeap, allocated}, residentHeap...) {
		s = append(s, metrics.Sample{Name: name})
	}
	read := func() (live, allocs, resident uint64) {
		metrics.Read(s)
		for i := range s {
			if s[i].Value.Kind() != metrics.KindUint64 {
				continue
			}
			switch v := s[i].Value.Uint64(); i {
			case 0:
				live = v
			case 1:
				allocs = v
			default:
				resident += v
			}
		}
		return live, allocs, resident
	}
	_, last, _ := read()
	var p pacer
	for {
		select {
		case <-t.quit:
			return
		case now := <-tick.C:
			live, allocs, resident := read()
			if p.tick(now, allocs-last, resident-min(live, resident)) {
				debug.FreeOSMemory()
				t.releases.Add(1)
				_, allocs, _ = read() // the collection allocates nothing worth counting
			}
			last = allocs
		}
	}
}

// maxQuietNeed is the most quiet intervals a release waits for: 30 s.
const maxQuietNeed = 60

// pacer decides, one interval at a time, when the room goes back. A
// release costs the page faults of growing back at the next burst, which
// on a gateway that serves bursts a second or two apart (a stampede of
// callers on a cold home, then another) cost more CPU per request than
// the burst itself allocates. So the quiet a release waits for adapts:
// it starts at one interval, and doubles, up to maxQuietNeed, each time
// a burst came soon after the last release (within four times the quiet
// waited for, and at least 10 s); a burst that came later brings it back
// to one. A gateway that goes quiet for good gives its room back within
// a second; one whose quiet spells are short keeps it.
type pacer struct {
	need     int       // quiet intervals a release waits for; 0 means 1
	run      int       // quiet intervals in a row so far
	released time.Time // the last release
	watching bool      // a release happened and no burst since
}

// tick takes one interval's allocation and the heap's bytes beyond the
// live heap now, and reports whether to release.
func (p *pacer) tick(now time.Time, allocated, beyondLive uint64) bool {
	need := max(p.need, 1)
	if !quiet(allocated) {
		if p.watching {
			p.watching = false
			if now.Sub(p.released) < max(10*time.Second, 4*time.Duration(need)*quietEvery) {
				p.need = min(need*2, maxQuietNeed)
			} else {
				p.need = 1
			}
		}
		p.run = 0
		return false
	}
	p.run++
	if p.run < need || !release(allocated, beyondLive) {
		return false
	}
	p.run, p.released, p.watching = 0, now, true
	return true
}

// quiet reports whether an interval that allocated this much is quiet: a
// sixteenth of GOGC's default room (at that rate the default would
// collect at most every few seconds, so the headroom saves next to
// nothing).
func quiet(allocated uint64) bool { return allocated < minHeap/16 }

// release reports whether the heap should go back to the system: the
// gateway allocated less than a sixteenth of GOGC's default room in the
// last interval (at that rate the default would collect at most every
// few seconds, so the headroom saves next to nothing), and the heap holds
// more than that room beyond the live heap (a collection under the
// default would have run by now). GOGC's default room is what a
// collection scans, at least the runtime's minimum heap; it is taken
// here as the runtime's minimum, the smallest a live heap small enough
// for the headroom to matter would give.
func release(allocated, beyondLive uint64) bool {
	return quiet(allocated) && beyondLive > minHeap
}

// sentinel is an object kept by nothing: its cleanup runs after the
// first collection that finds it unreachable, once per cycle. It is
// larger than the tiny allocator's 16 bytes so that it is freed alone.
type sentinel struct{ _ [32]byte }

func (t *Tuner) arm() {
	runtime.AddCleanup(new(sentinel), func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// tune sets the percentage for the live heap now.
func (t *Tuner) tune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	var scan uint64
	for _, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			scan += s.Value.Uint64()
		}
	}
	p := percentFor(scan, t.headroom)
	if worthSetting(t.percent.Load(), p) {
		debug.SetGCPercent(int(p))
		t.percent.Store(p)
	}
}

// worthSetting reports whether the percentage should go from old to p.
// A change of a few percent is not worth the heap lock that setting it
// takes, but base is always reached: a live heap measured while it grew
// past the headroom can leave the percentage just above base.
func worthSetting(old, p int64) bool {
	if p == old {
		return false
	}
	return p == base || p*20 > old*21 || p*21 < old*20
}

// minHeap is the runtime's smallest heap goal at GOGC=100 (4 MiB),
// which it scales by the percentage: counting what a collection scans as
// at least that much keeps the first goal, before any collection has
// measured the live heap, at the headroom too.
const minHeap = 4 << 20

// percentFor is the percentage that puts the goal headroom above the
// live heap, given what a collection scans, and never below base.
func percentFor(scan, headroom uint64) int64 {
	p := headroom * 100 / max(scan, minHeap)
	return int64(max(p, base))
}
