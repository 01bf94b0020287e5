package httpprov

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// goalNames are the wait= values of a long poll.
var goalNames = map[phase]string{phaseRunning: "running", phaseSuspended: "suspended", phaseStopped: "stopped"}

// reached reports whether a home in phase ph has reached goal. A stopped
// home is as asleep as a suspended one.
func reached(ph, goal phase) bool {
	return ph == goal || (goal == phaseSuspended && ph == phaseStopped)
}

// await polls the home's state from a, the operation's first answer,
// until it reaches goal, fails, or ctx's deadline passes. Each poll asks
// the control plane to hold the answer until the goal (a long poll); one
// that does not answers at once and is asked again after its Retry-After
// or PollInterval.
func (p *Provider) await(ctx context.Context, op, id string, a Answer, goal phase) (Answer, error) {
	var pause time.Duration
	for {
		ph := phaseOf(a.State)
		if reached(ph, goal) {
			return a, nil
		}
		if ph == phaseFailed {
			return a, &provider.Error{Op: op, Reason: ReasonHomeFailed,
				Err: errors.New(cmpOr(a.Reason, "the control plane reports the home failed"))}
		}
		if pause > 0 {
			if err := sleep(ctx, pause); err != nil {
				return a, deadlineFailure(op, stillIn(a), err)
			}
		}
		t0 := time.Now()
		next, ra, err := p.get(ctx, op, id, p.longPoll(ctx, goal))
		if err != nil {
			if ctx.Err() != nil {
				return a, deadlineFailure(op, stillIn(a), ctx.Err())
			}
			return a, err
		}
		a = next
		// A long poll that waited has paced itself; an answer at once is
		// asked again after the control plane's Retry-After or PollInterval.
		pause = max(ra, p.c.PollInterval) - time.Since(t0)
	}
}

// longPoll is the query of a status poll: wait for goal, at most LongPoll
// and never past ctx's deadline.
func (p *Provider) longPoll(ctx context.Context, goal phase) string {
	wait := p.c.LongPoll
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	return fmt.Sprintf("wait=%s&timeout=%d", goalNames[goal], int(math.Max(0, wait.Seconds())))
}

// stillIn describes the last state seen, for a deadline error.
func stillIn(a Answer) string {
	s := "the control plane still reports " + cmpOr(a.State, "no state")
	if a.Reason != "" {
		s += " (" + a.Reason + ")"
	}
	return s
}
