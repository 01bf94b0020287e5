package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/wakegate/wakegate/provider/exec/procid"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
)

// A gateway of a fleet takes its instance name before it takes any lock:
// every lease, the heartbeat and the runner of each home are keyed by the
// name, so two live gateways under one name would share their locks, and
// the one starting would free the other's (ReleaseLeasesOf). The run
// claims the name in the store with a nonce of its own (redis.ClaimName),
// and renews the claim with every heartbeat.
//
// What a starting run finds under its name:
//   - nothing live: it claims the name at once. Two runs that start in the
//     same instant are told apart by the server, which runs their claims
//     one after the other: the second is refused.
//   - a claim of a run on this machine (same host, boot and process
//     namespace): whether that process still runs says at once whether it
//     is a live twin (the start fails) or an earlier run that was killed
//     or crashed (its claim is replaced, with no wait);
//   - a heartbeat or claim of a run elsewhere, or of a version that makes
//     no claim: an earlier run that stopped without withdrawing it lapses
//     within its TTL, a few seconds, and the start waits for that; one
//     renewed meanwhile is a second live gateway, and the start fails.

// runID is what a run of a gateway says of itself in its claim: enough for
// a later run on the same machine to tell whether it still runs.
type runID struct {
	Host string `json:"host"`
	// PIDNS is the process's pid namespace (/proc/self/ns/pid): pids
	// name the same processes only within one.
	PIDNS string `json:"pidns,omitempty"`
	procid.Identity
}

// thisRun returns this process's runID; fields it cannot read stay empty,
// and a run with an empty one is never judged by its process.
func thisRun() runID {
	host, _ := os.Hostname()
	ns, _ := os.Readlink("/proc/self/ns/pid")
	id := runID{Host: host, PIDNS: ns}
	if st, err := procid.ReadStat(os.Getpid()); err == nil {
		id.Identity = st.Identity
	}
	return id
}

// String names the run for operators.
func (r runID) String() string {
	if r.PID == 0 {
		return "a run on " + r.Host
	}
	return fmt.Sprintf("pid %d on %s", r.PID, r.Host)
}

// judge reports whether other, a run on this machine, still runs; known is
// false when other is not on this machine (host, boot or pid namespace
// differ or are unknown) or its process cannot be looked up.
func (r runID) judge(other runID) (runs, known bool) {
	if r.Host == "" || r.PIDNS == "" || r.Boot == "" || other.PID <= 0 ||
		other.Host != r.Host || other.PIDNS != r.PIDNS || other.Boot != r.Boot {
		return false, false
	}
	_, err := procid.Lookup(other.Identity)
	switch {
	case err == nil:
		return true, true
	case errors.Is(err, procid.ErrGone):
		return false, true
	}
	return false, false
}

// newRunNonce returns a nonce for this run's claim.
func newRunNonce() string {
	return rand.Text()
}

// takeName claims instance for this run (self, nonce) once nothing live
// holds it (see the top of this file), within the heartbeat's ttl and
// fleetOpenTimeout, polling every poll.
func takeName(r *redis.Store, instance string, self runID, nonce string, ttl time.Duration, log *slog.Logger, poll time.Duration) error {
	about, err := json.Marshal(self)
	if err != nil {
		return fmt.Errorf("instance %q: describe this run: %w", instance, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetOpenTimeout)
	defer cancel()
	rep, beating, err := reportOf(ctx, r, instance)
	if err != nil {
		return err
	}
	claim, claimed, err := r.NameHolder(ctx, instance)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	replace := ""
	if claimed {
		var holder runID
		_ = json.Unmarshal([]byte(claim.About), &holder) // an unreadable one is judged by its heartbeat
		switch runs, known := self.judge(holder); {
		case known && runs:
			return twinError(instance, fmt.Sprintf("%s, this machine, still runs", holder))
		case known:
			log.Info("fleet: the earlier run under this instance name has ended (killed or crashed); taking the name over at once",
				"instance", instance, "earlier_run", holder.String())
			replace, beating, claimed = claim.Nonce, false, false
		}
	}
	if beating || claimed {
		if err := awaitLapse(r, instance, rep, beating, claim, claimed, log, poll); err != nil {
			return err
		}
	}
	err = r.ClaimName(ctx, instance, nonce, string(about), replace, ttl)
	var taken *redis.NameTakenError
	if errors.As(err, &taken) {
		return twinError(instance, "another run claimed it as this one started: "+aboutRun(taken.Holder))
	}
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// awaitLapse waits until neither the heartbeat rep (when beating) nor the
// claim (when claimed) under instance is live, or fails when either is
// renewed meanwhile: only a live gateway renews them.
func awaitLapse(r *redis.Store, instance string, rep registry.InstanceReport, beating bool,
	claim redis.NameClaim, claimed bool, log *slog.Logger, poll time.Duration) error {
	// The wait lasts at most their TTL, with room for clocks.
	until := time.Now()
	if beating {
		until = until.Add(rep.Expires.Sub(rep.ReportedAt))
		log.Warn("fleet: a heartbeat under this instance name is live; waiting for it to lapse before taking over the name (an earlier run killed or crashed?)",
			"instance", instance, "reported_ago", time.Since(rep.ReportedAt).Round(time.Millisecond), "ttl", rep.Expires.Sub(rep.ReportedAt))
	} else {
		until = until.Add(time.Until(claim.Expires))
		log.Warn("fleet: another run's claim on this instance name is live; waiting for it to lapse (an earlier run killed as it started?)",
			"instance", instance, "run", aboutRun(claim.About), "expires", claim.Expires)
	}
	ctx, cancel := context.WithDeadline(context.Background(), until.Add(fleetOpenTimeout))
	defer cancel()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("instance %q: what holds this name did not lapse in time: %w", instance, ctx.Err())
		case <-t.C:
		}
		cur, live, err := reportOf(ctx, r, instance)
		if err != nil {
			return err
		}
		if live && beating && cur.ReportedAt.After(rep.ReportedAt) {
			return twinError(instance, fmt.Sprintf("its heartbeat was renewed at %s while this one waited to start",
				cur.ReportedAt.Format(time.RFC3339Nano)))
		}
		curClaim, held, err := r.NameHolder(ctx, instance)
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		if held && (!claimed || curClaim.Nonce != claim.Nonce || curClaim.Expires.After(claim.Expires)) {
			return twinError(instance, "another run claimed or renewed it while this one waited to start: "+aboutRun(curClaim.About))
		}
		if !live && !held {
			log.Info("fleet: the earlier run's heartbeat lapsed", "instance", instance)
			return nil
		}
	}
}

// twinError is the start's error when another live gateway holds the name.
func twinError(instance, why string) error {
	return fmt.Errorf("instance %q: another live gateway reports under this name (%s); "+
		"each gateway of a fleet needs a name of its own: set instance in this gateway's config, or leave it out for host-pid",
		instance, why)
}

// aboutRun names the run a claim's about describes, for messages.
func aboutRun(about string) string {
	var id runID
	if about == "" || json.Unmarshal([]byte(about), &id) != nil || id.Host == "" {
		return "a run that did not say where it runs"
	}
	return id.String()
}
