package appstatus

import "time"

// PhaseHistorySize is how many phase changes Apps remembers per app.
const PhaseHistorySize = 20

// PhaseChange is one change of an app's phase.
type PhaseChange struct {
	At      time.Time `json:"at"`
	Phase   Phase     `json:"phase"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// phaseHistory is an app's last phase changes, oldest first. It is guarded
// by its app's mu.
type phaseHistory struct{ changes []PhaseChange }

// addLocked remembers c, forgetting the oldest change when full.
func (p *phaseHistory) addLocked(c PhaseChange) {
	if len(p.changes) == PhaseHistorySize {
		copy(p.changes, p.changes[1:])
		p.changes = p.changes[:PhaseHistorySize-1]
	}
	p.changes = append(p.changes, c)
}

// PhaseHistory returns the last phase changes of app slug observed since it
// was registered here, newest first; nil for an unknown app.
func (a *Apps) PhaseHistory(slug string) []PhaseChange {
	ap := a.app(slug)
	if ap == nil {
		return nil
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	out := make([]PhaseChange, 0, len(ap.phases.changes))
	for i := len(ap.phases.changes) - 1; i >= 0; i-- {
		out = append(out, ap.phases.changes[i])
	}
	return out
}
