package wake

// Event types (events.Event.Type). Wakes, suspends, rolls and app routes
// each publish theirs.
const (
	EventWakeStart      = "wake.start"
	EventWakeReady      = "wake.ready"
	EventWakeFailed     = "wake.failed"
	EventSuspend        = "suspend"
	EventHomeFailed     = "home.failed"
	EventRollStart      = "roll.start"
	EventRollDone       = "roll.done"
	EventRollRolledBack = "roll.rolled_back"
	EventRollIncident   = "roll.incident"
	EventAppPhase       = "app.phase"
	EventRoutePublished = "route.published"
	EventRouteWithdrawn = "route.unpublished"
)
