package rolls

import (
	"sync/atomic"
	"time"
)

// Mode says when homes roll onto the registered target.
type Mode string

// Roll modes.
const (
	// Off never rolls.
	Off Mode = "off"
	// Lazy rolls a stale home at its next wake.
	Lazy Mode = "lazy"
	// Eager also rolls awake homes that have had no session for
	// Options.IdleAfter, from the engine's idle loop.
	Eager Mode = "eager"
)

// Options configure rolls.
type Options struct {
	// Mode is Lazy, Eager or Off. The zero value "" is off.
	Mode Mode
	// IdleAfter is how long an awake home must have had no session before
	// an eager roll; used only with Eager. Zero rolls it at the first
	// idle tick that finds it idle.
	IdleAfter time.Duration
}

// On reports whether o rolls at all.
func (o Options) On() bool { return o.Mode == Lazy || o.Mode == Eager }

// Stats counts rolls by outcome since the engine started. Fields are read
// with Load; only the engine adds to them.
type Stats struct {
	// Started counts rolls begun (the home was marked restoring).
	Started atomic.Uint64
	// Rolled counts rolls committed on the target version.
	Rolled atomic.Uint64
	// RolledBack counts failed rolls whose rollback restored the prior
	// version (alert roll.rolled_back).
	RolledBack atomic.Uint64
	// Incidents counts failed rolls whose rollback failed too (alert
	// roll.incident).
	Incidents atomic.Uint64
	// SkippedBusy counts stale homes woken without a roll because they had
	// users.
	SkippedBusy atomic.Uint64
	// SkippedBad counts stale homes woken on their own version because the
	// target is the known-bad version.
	SkippedBad atomic.Uint64
	// Unsupported counts rolls abandoned because the home's provider cannot
	// recreate homes (the home is then woken as it is, and never rolled).
	Unsupported atomic.Uint64
}
