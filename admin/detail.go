package admin

import "time"

// SessionKinds are a home's live sessions by kind.
type SessionKinds struct {
	// Requests are in-flight HTTP requests.
	Requests int `json:"requests"`
	// WebSockets are open WebSockets.
	WebSockets int `json:"websockets"`
	// Leases are the live leases, soonest expiry first.
	Leases []LeaseEntry `json:"leases"`
}

// LeaseEntry is one live lease.
type LeaseEntry struct {
	Lease     string    `json:"lease"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Roll states of a home against the registered target.
const (
	// RollNoTarget: no target is registered.
	RollNoTarget = "no_target"
	// RollCurrent: the home runs the target version.
	RollCurrent = "current"
	// RollPending: the home will roll onto the target once it is idle.
	RollPending = "pending"
	// RollRolling: a roll of the home is in progress.
	RollRolling = "rolling"
	// RollBlocked: the target is the known-bad version; nothing rolls
	// onto it until a newer target is registered.
	RollBlocked = "blocked"
)

// RollView is a home against the roll target.
type RollView struct {
	// State is one of the Roll* constants.
	State string `json:"state"`
	// TargetVersion is the registered target's version, "" when none.
	TargetVersion string `json:"target_version,omitempty"`
	// BadVersion is the last target version whose roll failed.
	BadVersion string `json:"bad_version,omitempty"`
}

// RollState says where a home running version (status status) stands
// against a target of version target with bad version bad.
func RollState(status, version, target, bad string) string {
	switch {
	case status == "restoring":
		return RollRolling
	case target == "":
		return RollNoTarget
	case version == target:
		return RollCurrent
	case target == bad:
		return RollBlocked
	default:
		return RollPending
	}
}
