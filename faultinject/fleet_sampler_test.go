package faultinject

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// procSampler counts the processes of one home across a fleet every 20 ms,
// from /proc, until stopped: the checker's view of "one process per home".
type procSampler struct {
	dirs []string // the home's working directory under each gateway

	mu      sync.Mutex
	samples int
	max     int
	worst   []int     // the pids of the first sample with more than one
	worstAt time.Time // when that sample was taken
	last    int

	stopCh chan struct{}
	done   chan struct{}
}

// sampleEvery is the sampler's period.
const sampleEvery = 20 * time.Millisecond

// sampleHome starts sampling the processes of home id under every gateway
// of gws.
func sampleHome(gws []*fiGateway, id string) *procSampler {
	s := &procSampler{stopCh: make(chan struct{}), done: make(chan struct{})}
	for _, g := range gws {
		s.dirs = append(s.dirs, g.homeDir(id))
	}
	go s.run()
	return s
}

func (s *procSampler) run() {
	defer close(s.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		pids := countIn(s.dirs)
		s.mu.Lock()
		s.samples++
		s.last = len(pids)
		if len(pids) > s.max {
			s.max = len(pids)
		}
		if len(pids) > 1 && s.worst == nil {
			s.worst, s.worstAt = pids, time.Now()
		}
		s.mu.Unlock()
		select {
		case <-s.stopCh:
			return
		case <-t.C:
		}
	}
}

// stop ends the sampling and waits for it.
func (s *procSampler) stop() {
	select {
	case <-s.stopCh:
	default:
		close(s.stopCh)
	}
	<-s.done
}

// report returns the samples taken, the most processes seen at once, the
// pids of the first sample with two or more (nil when none) and the count
// at the last sample.
func (s *procSampler) report() (samples, most int, two []int, last int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.max, s.worst, s.last
}

// countIn returns the live (not zombie) processes whose working directory
// is one of dirs.
func countIn(dirs []string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		for _, d := range dirs {
			if cwd == d {
				if st := testbin.ProcState(pid); st != 'Z' && st != 0 {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}
