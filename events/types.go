package events

// Event types (Event.Type). The engine publishes those of wakes, suspends,
// failed homes and rolls; the app observer those of apps; the control
// plane those of routes. Readers (the admin API's stream, the fleet's
// verdict drops, the dashboards) name them here, not in their publisher's
// package.
const (
	WakeStart      = "wake.start"
	WakeReady      = "wake.ready"
	WakeFailed     = "wake.failed"
	Suspend        = "suspend"
	HomeFailed     = "home.failed"
	RollStart      = "roll.start"
	RollDone       = "roll.done"
	RollRolledBack = "roll.rolled_back"
	RollIncident   = "roll.incident"
	AppPhase       = "app.phase"
	AppRegistered  = "app.registered"
	AppRemoved     = "app.removed"
	RoutePublished = "route.published"
	RouteWithdrawn = "route.unpublished"
	// HomeRefreshed is published by package refresh (refresh.Event) when
	// a home's provider state changed; CertObtained by the TLS front
	// when it obtained a certificate.
	HomeRefreshed = "home.refreshed"
	CertObtained  = "certificate.obtained"
)

// Types lists every event type above, in the order written there: the
// names a webhook's event list may hold (package webhook, config's
// webhooks section).
var Types = []string{
	WakeStart, WakeReady, WakeFailed, Suspend, HomeFailed,
	RollStart, RollDone, RollRolledBack, RollIncident,
	AppPhase, AppRegistered, AppRemoved, RoutePublished, RouteWithdrawn,
	HomeRefreshed, CertObtained,
}
