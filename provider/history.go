package provider

import (
	"slices"
	"time"
)

// HistoryLimit is how many supervisor restarts Exec remembers per home.
const HistoryLimit = 20

// Restart is one unexpected exit of a home's process that the supervisor
// handled: restarted, or given up on.
type Restart struct {
	// Time is when the supervisor saw the exit.
	Time time.Time `json:"time"`
	// OldPID is the process that exited; NewPID the one started in its
	// place (0 when none was: the restart failed or the budget ran out).
	OldPID int `json:"old_pid"`
	NewPID int `json:"new_pid,omitempty"`
	// ExitReason is how the old process ended, e.g. "exit status 3" or
	// "signal: killed".
	ExitReason string `json:"exit_reason"`
	// Outcome is "restarted", "restart-failed" or "gave-up" (the restart
	// budget was spent; the home is failed).
	Outcome string `json:"outcome"`
	// Error says why a restart failed ("" otherwise).
	Error string `json:"error,omitempty"`
}

// Outcomes of a Restart.
const (
	RestartDone   = "restarted"
	RestartFailed = "restart-failed"
	RestartGaveUp = "gave-up"
)

// History returns the supervisor's last HistoryLimit restarts of home id,
// oldest first (nil when there were none). It is read-only and safe for
// concurrent use; it lives in memory and starts empty with each Exec.
func (e *Exec) History(id string) []Restart {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.homes[id]
	if h == nil || len(h.history) == 0 {
		return nil
	}
	return slices.Clone(h.history)
}

// rtRemember appends r to h's history, keeping the last HistoryLimit;
// e.mu is held.
func (h *home) rtRemember(r Restart) {
	if len(h.history) >= HistoryLimit {
		h.history = slices.Delete(h.history, 0, len(h.history)-HistoryLimit+1)
	}
	h.history = append(h.history, r)
}

// ResetBudget forgets the restarts counted against home id's restart
// budget and the reason the supervisor gave up on it, if it did: an
// operator's start gives the home its full budget again. The restart
// history (History) is kept: it is a record, not a budget.
func (e *Exec) ResetBudget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h := e.homes[id]; h != nil {
		h.restarts = nil
		h.failed = ""
	}
}

var _ BudgetResetter = (*Exec)(nil)
