package homefault

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
)

// Public codes of the engine's errors.
const (
	CodeHomeNotFound    = "home_not_found"
	CodeHomeWaking      = "home_waking"
	CodeHomeSleeping    = "home_sleeping"
	CodeHomeBusy        = "home_busy"
	CodeShuttingDown    = "shutting_down"
	CodeWakeFailed      = "wake_failed"
	CodeWakeTimeout     = "wake_timeout"
	CodeWakeBackoff     = "wake_backoff"
	CodeWakeRateLimited = "wake_rate_limited"
	CodeHomeFailed      = "home_failed"
	CodeRollIncident    = "roll_incident"
	CodeHomeUnhealthy   = "home_unhealthy"
)

// HomeNotFound is the answer for a home the engine does not know.
func HomeNotFound(id string) *fault.Error {
	return fault.Wrap(fault.NotFound, CodeHomeNotFound, "There is no such home.",
		fmt.Errorf("home %q is not registered", id))
}

// Waking is the answer for a caller whose own wait ran out while the
// home's wake goes on.
func Waking(retry time.Duration, cause error) *fault.Error {
	return fault.Wrap(fault.NotReady, CodeHomeWaking, "The home is still waking; try again shortly.", cause).
		WithRetry(retry)
}

// Asleep is the answer for a request that must not wake a home that sleeps
// (the no-wake rules): not ready, with X-Wakegate-Home: sleeping.
func Asleep(retry time.Duration) *fault.Error {
	e := fault.New(fault.NotReady, CodeHomeSleeping, "The home is asleep and this request does not wake it.").
		WithRetry(retry)
	e.Header = http.Header{"X-Wakegate-Home": {"sleeping"}}
	return e
}

// Busy is a lifecycle operation refused because the home has sessions
// or another operation on it is in progress; cause says which.
func Busy(cause error) *fault.Error {
	return fault.Wrap(fault.Busy, CodeHomeBusy,
		"The home is in use or another operation on it is in progress.", cause)
}

// ShuttingDown refuses a new wake while the engine closes.
func ShuttingDown(retry time.Duration) *fault.Error {
	return fault.New(fault.ShuttingDown, CodeShuttingDown, "The gateway is shutting down.").WithRetry(retry)
}

// WakeRateLimited is a wake refused by the home's wake rate.
func WakeRateLimited(retry time.Duration) *fault.Error {
	return fault.New(fault.Limited, CodeWakeRateLimited, "This home was woken too often; try again later.").
		WithRetry(retry).
		WithHint("requests asked for more wakes of this home than limits.wake_rate and limits.wake_burst allow: " +
			"see why it keeps going back to sleep (idle_timeout) or raise the limit")
}

// Backoff refuses a wake of a home whose wakes keep failing.
func Backoff(retry time.Duration) *fault.Error {
	return fault.New(fault.Failed, CodeWakeBackoff,
		"The home failed to wake recently; the gateway waits before trying again.").
		WithRetry(retry).
		WithHint("the home's recent wakes failed: see the wake.failed events and the home's log")
}

// HomeFailed is a home its provider gave up on: its process kept
// exiting, so many restarts in so long. reason (the exit status and the
// last lines of the home's log) is for operators only.
func HomeFailed(retry time.Duration, reason string) *fault.Error {
	what := "the home's process keeps exiting (exit status and last log lines above, and in the home's log): fix the home"
	if strings.HasPrefix(reason, CannotStartReason) {
		what = "the home's program cannot be run (the reason above names it: a wrong path, a file that is not executable, " +
			"or a folder its user cannot enter): fix the command"
	}
	return fault.Wrap(fault.Failed, CodeHomeFailed, "The home keeps failing to start.",
		fmt.Errorf("%w: %s", ErrGaveUp, reason)).
		WithRetry(retry).
		WithHint(what + ", then wake it from the admin API (POST /admin/homes/{id}/wake, or wakegate home wake ID), " +
			"which skips the failure backoff and gives the home its full restart budget again")
}

// WakeFailed is a wake that failed before its time ran out: the
// provider could not start the home, or the store could not be written.
func WakeFailed(retry time.Duration, cause error) *fault.Error {
	return fault.Wrap(fault.Failed, CodeWakeFailed, "The home could not be started.", cause).
		WithRetry(retryFor(retry, cause)).WithHint(Hint(cause))
}

// Unhealthy is a wake whose home the runtime's own health check found
// unhealthy (DESIGN rule 11): subject names the container or machine, and
// reason is the check's last output and exit code. Both come from the
// runtime and the home: they go to the cause and the operator's hint,
// never to the public sentence.
func Unhealthy(retry time.Duration, subject, reason string) *fault.Error {
	return fault.Wrap(fault.Failed, CodeHomeUnhealthy, "The home started but reports itself unhealthy.",
		fmt.Errorf("%s is unhealthy: %s", subject, reason)).
		WithRetry(retry).
		WithHint(fmt.Sprintf("%s reports its health check failing (%s): fix the home or its check, "+
			"then wake it again", subject, reason))
}

// retryFor is the Retry-After of a failure caused by cause: the one a
// provider's *provider.Error asks for, when it does, or else def.
func retryFor(def time.Duration, cause error) time.Duration {
	if r, ok := provider.AsReasoned(cause); ok && r.RetryAfterHint() > 0 {
		return r.RetryAfterHint()
	}
	return def
}

// WakeTimeout is a wake whose ready timeout ran out during step.
func WakeTimeout(retry time.Duration, step string, cause error) *fault.Error {
	return fault.Wrap(fault.Failed, CodeWakeTimeout, "The home did not become ready in time.",
		fmt.Errorf("%s: %w", step, cause)).
		WithRetry(retryFor(retry, cause)).WithHint(Hint(cause))
}

// RollIncident is a roll whose rollback failed too; rbErr is why the
// rollback failed, whose provider hint (another client's lease, a refused
// token) joins the incident's.
func RollIncident(retry time.Duration, cause, rbErr error) *fault.Error {
	hint := "the roll and its rollback failed: read the roll.incident event and the home's log; register a fixed target"
	if h := Hint(rbErr); h != "" {
		hint += "; the rollback: " + h
	}
	return fault.Wrap(fault.Failed, CodeRollIncident,
		"The home could not be restored after a failed upgrade.", cause).
		WithRetry(retry).WithHint(hint)
}

// Refused is an operator's request refused by the home's state (a roll
// that is not needed, rolls that are off).
func Refused(code, msg string) *fault.Error {
	return fault.New(fault.Conflict, code, msg)
}

// Hint is the operator's likely fix for a failed wake's cause, or "".
func Hint(err error) string {
	if err == nil {
		return ""
	}
	if h, ok := probe.AutoHint(err); ok {
		return h
	}
	if pe, ok := provider.AsError(err); ok && pe.Hint != "" {
		return pe.Hint
	}
	if r, ok := provider.AsReasoned(err); ok {
		switch reason := r.ReasonCode(); {
		case strings.HasSuffix(reason, provider.ReasonRateLimited):
			return "the provider's API limits calls: the wake is tried again after Retry-After"
		case strings.HasSuffix(reason, provider.ReasonCapacity):
			return "the provider has no room to start the home now: try again later or check its capacity"
		case strings.HasSuffix(reason, provider.ReasonRefused), strings.HasSuffix(reason, "unauthorized"):
			return "the provider refused the gateway's credentials: check the provider's token"
		}
	}
	if h := probe.StatusHint(err); h != "" {
		return h
	}
	switch {
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		return "the home's command could not be run: check its path (homes[].command, or exec.command); " +
			"a relative path such as ./run.sh is looked up in the home's own folder (data_dir/homes/{id}), " +
			"where the command runs, so give an absolute path or a command on the PATH"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "nothing listened on the home's endpoint: check that the home listens on the port it is given, and its log"
	}
	return ""
}

// CodeStoreUnavailable is the public code of a wake refused because the
// gateway cannot write its own store (a read-only or full disk).
const CodeStoreUnavailable = "store_unavailable"

// StoreUnwritable is a wake that could not record its steps: the
// store's disk refuses writes. It fails at once rather than retrying for
// the whole ready timeout, and sets no backoff.
func StoreUnwritable(retry time.Duration, cause error) *fault.Error {
	return fault.Wrap(fault.Unavailable, CodeStoreUnavailable,
		"The gateway cannot record a wake right now; try again shortly.", cause).
		WithRetry(retry).
		WithHint("the store's disk refuses writes (read-only, full or failing): free space or remount it read-write; " +
			"warm homes keep serving, and /readyz answers 503 until a write passes again")
}

// CodeStateUnavailable is the public code of a wake refused because the
// fleet's shared state does not answer.
const CodeStateUnavailable = "state_unavailable"

// StateUnavailable is a wake that needed the fleet's store, which does
// not answer.
func StateUnavailable(retry time.Duration, cause error) *fault.Error {
	return fault.Wrap(fault.Unavailable, CodeStateUnavailable,
		"The gateway cannot reach its shared state; try again shortly.", cause).
		WithRetry(retry).
		WithHint("the fleet's Redis does not answer: check that it runs and that this gateway reaches it (redis.url); warm homes keep serving meanwhile")
}

// RecordMissing is a wake of a registered home whose stored record is
// gone (the engine records its config's homes again).
func RecordMissing(retry time.Duration, cause error) *fault.Error {
	return fault.Wrap(fault.Unavailable, CodeStateUnavailable,
		"The gateway is restoring its shared state; try again shortly.", cause).
		WithRetry(retry).
		WithHint("the home's record is missing from the fleet's store (Redis restarted without persistence, or the home was removed on another gateway): the gateway records its config's homes again by itself")
}

// ErrGaveUp is the cause of home_failed: the home's provider gave up on it
// (its process kept exiting). A give-up during a wake ends the wake at once.
var ErrGaveUp = errors.New("the provider gave up on the home")

// CannotStartReason begins the failure reason of a home whose program
// cannot start at all (HomeFailed gives it its own hint).
const CannotStartReason = "the home's program cannot start: "
