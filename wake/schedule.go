package wake

import (
	"time"

	"github.com/wakegate/wakegate/schedule"
)

// CauseSchedule is the cause of a wake that the start of a home's
// keep-awake window began (Spec.Schedule), so that the window's first user
// finds the home awake. It goes through the wake path of any request:
// coalesced with a wake in flight, under the home's fleet-wide lock, held
// by the failure backoff; one that finds the home proven by another
// gateway is CauseWaited, one that finds it running CauseVerify.
const CauseSchedule = "schedule"

// prewake starts the wake of each home whose keep-awake window began since
// the idle loop's previous tick; starts remembers the windows' next starts
// between ticks. A home suspended inside its window (by an operator) stays
// suspended until its next window starts.
func (e *Engine) prewake(starts *schedule.Starts) {
	for _, id := range starts.Due(time.Now(), e.homes.schedules()) {
		h := e.home(id)
		if h == nil {
			continue
		}
		if _, _, err := e.join(h, CauseSchedule, false); err != nil {
			e.o.Log.Info("schedule: wake not started", "home", id, "err", err.Error())
		}
	}
}

// inWindow reports whether h is inside one of its keep-awake windows now.
func inWindow(h *home) bool { return h.spec.Schedule.Contains(time.Now()) }

// schedules returns the running hours of the homes that have them.
func (s *homeSet) schedules() map[string]*schedule.Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*schedule.Schedule, len(s.timed))
	for id, h := range s.timed {
		out[id] = h.spec.Schedule
	}
	return out
}
