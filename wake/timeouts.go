package wake

import "time"

// Every bound the lifecycle engine sets on its own, in one place. The
// configured ones (ready timeout, warm TTL, retry-after, failure backoff,
// idle timeouts) come in through Options and homes.Spec.
const (
	// wakeLeaseSlack is added to the ready timeout for the lease of a
	// wake's lifecycle lock: the lease outlives the wake's own deadline, so
	// the stop of a half-woken home still holds it.
	wakeLeaseSlack = 30 * time.Second
	// suspendLease is the lease of a suspend's lifecycle lock.
	suspendLease = time.Minute
	// suspendTimeout bounds a suspend once its lock is held; the suspend
	// then runs to its end even when its caller goes away (a half-done
	// suspend would leave the record saying "suspending" for ever).
	suspendTimeout = time.Minute
	// removeLease is the lease of a removal's lifecycle lock.
	removeLease = time.Minute
	// unlockTimeout bounds the release of a lifecycle lock, on a context
	// detached from the operation's (which may have ended).
	unlockTimeout = 5 * time.Second
	// lockRecheck is how often a wake waiting for a lifecycle lock held on
	// another instance (or by a lease that expires) tries again: the
	// fallback to the store's change notification, which announces every
	// release, for a holder that died and left its lease to expire. A
	// holder on this instance wakes its waiters at once with a broadcast.
	lockRecheck = 500 * time.Millisecond
	// stopTimeout bounds the stop of a half-woken home after a failed wake
	// or a failed rollback; it runs even though the wake's time ran out.
	stopTimeout = 30 * time.Second
	// providerChangeTimeout bounds the record write of a provider's change
	// callback (a home restarted or given up on).
	providerChangeTimeout = 5 * time.Second
	// markBadTimeout bounds recording a target as bad after a failed roll.
	markBadTimeout = 10 * time.Second
	// saveRetryFirst and saveRetryMax are the first and the longest pause
	// between tries of a record write that failed for a reason other than
	// a conflict (a full disk); the tries go on within the operation's
	// deadline.
	saveRetryFirst = 20 * time.Millisecond
	saveRetryMax   = time.Second
	// reportSlack is added to three idle ticks for the TTL of this
	// instance's session report.
	reportSlack = time.Second
)

// minBackoffRetry is the least Retry-After of a wake refused by the
// failure backoff.
const minBackoffRetry = time.Second
