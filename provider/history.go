package provider

import "time"

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
