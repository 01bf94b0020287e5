package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// Lock takes the named lock for holder for ttl, with a fencing token from
// the lock's counter on the server (never reused). It returns registry.ErrLocked at
// once when a live lease holds it, the same holder's included. When holder
// is an instance with a live session report (a gateway's heartbeat), the
// lease also dies with that heartbeat: another holder takes it once the
// report lapses, whatever is left of ttl. A lock command that got no reply
// (a timeout, a broken connection) is undone by this store as soon as the
// server answers again (lockcleanup.go), so a late execution never holds
// the lock for a whole ttl.
func (r *Store) Lock(ctx context.Context, name, holder string, ttl time.Duration) (registry.Lease, error) {
	if err := registry.CheckLease(name, holder, ttl); err != nil {
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w", name, err)
	}
	if err := r.lostName(); err != nil {
		// Another run speaks for this gateway's name: its locks are not
		// this run's to take. To a caller, the store is unavailable here
		// (a wake answers 503 with Retry-After).
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w: %w", name, err, registry.ErrUnavailable)
	}
	if err := ctx.Err(); err != nil {
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w", name, err)
	}
	attempt := newAttempt()
	res, err := lockScript.Run(ctx, r.c, []string{r.keys.locks, r.keys.lockseq, r.keys.sessions},
		name, holder, ttl.Milliseconds(), r.nowArg(), attempt).Slice()
	if err != nil {
		if unanswered(err) {
			// The server may still run the command: undo it once it answers.
			r.abandon(name, attempt, ttl)
		}
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w", name, r.fail(ctx, err))
	}
	tok, exp, who, err := leaseReply(res)
	if err != nil {
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w", name, err)
	}
	if tok == 0 {
		return registry.Lease{}, fmt.Errorf("registry: lock %s: held by %s until %s: %w", name, who,
			exp.Format(time.RFC3339Nano), registry.ErrLocked)
	}
	return registry.Lease{Name: name, Holder: holder, Token: tok, ExpiresAt: exp}, nil
}

// leaseReply decodes lockScript's reply.
func leaseReply(res []any) (token uint64, expires time.Time, holder string, err error) {
	if len(res) != 3 {
		return 0, time.Time{}, "", fmt.Errorf("unexpected reply %v from the store's script", res)
	}
	tok, ok1 := res[0].(int64)
	ms, ok2 := res[1].(int64)
	holder, ok3 := res[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return 0, time.Time{}, "", fmt.Errorf("unexpected reply %v from the store's script", res)
	}
	return uint64(tok), time.UnixMilli(ms).UTC(), holder, nil
}

// Renew extends a held lease to now+ttl, keeping its token; registry.ErrLeaseLost
// if it is no longer current, including when its TTL ran out.
func (r *Store) Renew(ctx context.Context, l registry.Lease, ttl time.Duration) (registry.Lease, error) {
	if ttl <= 0 {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: ttl %s is not positive", l.Name, ttl)
	}
	if err := ctx.Err(); err != nil {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: %w", l.Name, err)
	}
	res, err := renewScript.Run(ctx, r.c, []string{r.keys.locks},
		l.Name, l.Holder, l.Token, ttl.Milliseconds(), r.nowArg()).Slice()
	if err != nil {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: %w", l.Name, r.fail(ctx, err))
	}
	if len(res) != 2 {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: unexpected reply %v", l.Name, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: %v: %w", l.Name, res[1], registry.ErrLeaseLost)
	}
	ms, _ := res[1].(int64)
	l.ExpiresAt = time.UnixMilli(ms).UTC()
	return l, nil
}

// Unlock releases a held lease and announces it; registry.ErrLeaseLost if it is no
// longer current (when it had expired but nobody took it, it is released
// all the same).
func (r *Store) Unlock(ctx context.Context, l registry.Lease) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("registry: unlock %s: %w", l.Name, err)
	}
	res, err := unlockScript.Run(ctx, r.c, []string{r.keys.locks},
		l.Name, l.Holder, l.Token, r.keys.channel, r.nowArg()).Text()
	if err != nil {
		return fmt.Errorf("registry: unlock %s: %w", l.Name, r.fail(ctx, err))
	}
	why, detail, _ := strings.Cut(res, ":")
	switch why {
	case "ok":
		return nil
	case "expired":
		return fmt.Errorf("registry: unlock %s: expired: %w", l.Name, registry.ErrLeaseLost)
	case "lost":
		return fmt.Errorf("registry: unlock %s: %s: %w", l.Name, detail, registry.ErrLeaseLost)
	}
	return fmt.Errorf("registry: unlock %s: unexpected reply %q", l.Name, res)
}

// ReleaseLeasesOf frees every lock that holder holds, and returns how
// many. A gateway calls it for its own instance name as it starts, before
// it takes any lock: a lease held under that name then belongs to an
// earlier run of the gateway that stopped without releasing it (killed,
// crashed). Such a lease dies with its holder's heartbeat, but the new run
// reports under the same name, and would keep it alive to the end of its
// ttl, the home's lifecycle held for everyone meanwhile. Instance names are
// unique in a fleet; a second live gateway under one name would lose its
// locks here, so the gateway first waits for any heartbeat under its name
// to lapse, and refuses to start when one is renewed instead.
func (r *Store) ReleaseLeasesOf(ctx context.Context, holder string) (int, error) {
	if holder == "" {
		return 0, errors.New("registry: release the leases of an instance: no instance name")
	}
	n, err := releaseHolderScript.Run(ctx, r.c, []string{r.keys.locks}, holder, r.keys.channel).Int()
	if err != nil {
		return 0, fmt.Errorf("registry: release the leases of %s: %w", holder, r.fail(ctx, err))
	}
	return n, nil
}

// WithdrawReport deletes instance's session report and version at once,
// instead of letting the report run out: a gateway that stops calls it
// last, so that the fleet stops counting it alive, and a run that starts
// again under the same name finds no heartbeat to wait for. Its claim on
// the name goes with them; when another run holds the name, the report is
// that run's and nothing is deleted (a *NameTakenError).
func (r *Store) WithdrawReport(ctx context.Context, instance string) error {
	if instance == "" {
		return errors.New("registry: withdraw a session report: no instance name")
	}
	nonce, _ := r.claim.claimed(instance)
	res, err := withdrawScript.Run(ctx, r.c, []string{r.keys.sessions, r.keys.versions, r.keys.names}, instance, nonce).Text()
	if err != nil {
		return fmt.Errorf("registry: withdraw the session report of %s: %w", instance, r.fail(ctx, err))
	}
	if res == "taken" {
		return fmt.Errorf("registry: withdraw the session report of %s: %w", instance, &NameTakenError{Instance: instance})
	}
	return nil
}

// ReportSessions records instance's live session count per home, replacing
// its previous report; the report expires ttl from now (the heartbeat's
// TTL: a dead instance's counts vanish with it). Zero counts are dropped.
func (r *Store) ReportSessions(ctx context.Context, instance string, counts map[string]int, ttl time.Duration) error {
	if err := registry.CheckReport(instance, counts, ttl); err != nil {
		return fmt.Errorf("registry: report sessions of %s: %w", instance, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("registry: report sessions of %s: %w", instance, err)
	}
	kept := make(map[string]int, len(counts))
	for home, n := range counts {
		if n > 0 {
			kept[home] = n
		}
	}
	raw, err := json.Marshal(kept)
	if err != nil {
		return fmt.Errorf("registry: report sessions of %s: encode: %w", instance, err)
	}
	nonce, about := r.claim.claimed(instance)
	if err := r.lostName(); err != nil && nonce != "" {
		// Once out, out for good: the run that took the name over freed
		// this one's locks and may have changed its homes' records, so
		// this run does not take the name back even once it is free.
		return fmt.Errorf("registry: report sessions of %s: %w", instance, err)
	}
	res, err := reportScript.Run(ctx, r.c, []string{r.keys.sessions, r.keys.versions, r.keys.names},
		instance, string(raw), ttl.Milliseconds(), r.nowArg(), nonce, about).StringSlice()
	if err != nil {
		return fmt.Errorf("registry: report sessions of %s: %w", instance, r.fail(ctx, err))
	}
	if len(res) == 2 && res[0] == "taken" {
		return fmt.Errorf("registry: report sessions of %s: %w", instance, r.nameLost(instance, res[1]))
	}
	return nil
}

// SetVersion records the wakegate version instance runs, listed with its
// session report (Reports) and dropped when the report expires.
func (r *Store) SetVersion(ctx context.Context, instance, version string) error {
	if err := r.c.HSet(ctx, r.keys.versions, instance, version).Err(); err != nil {
		return fmt.Errorf("registry: record the version of %s: %w", instance, r.fail(ctx, err))
	}
	return nil
}

// Reports returns every unexpired session report, ordered by instance.
func (r *Store) Reports(ctx context.Context) ([]registry.InstanceReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("registry: session reports: %w", err)
	}
	res, err := sessionsScript.Run(ctx, r.c, []string{r.keys.sessions, r.keys.versions, r.keys.names}, r.nowArg()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("registry: session reports: %w", r.fail(ctx, err))
	}
	out := make([]registry.InstanceReport, 0, len(res)/6)
	for i := 0; i+5 < len(res); i += 6 {
		exp, err1 := strconv.ParseInt(res[i+1], 10, 64)
		at, err2 := strconv.ParseInt(res[i+2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("registry: session report of %s: times %q %q: %w", res[i], res[i+1], res[i+2], err)
		}
		rep := registry.InstanceReport{Instance: res[i], ReportedAt: time.UnixMilli(at).UTC(), Expires: time.UnixMilli(exp).UTC(),
			Sessions: map[string]int{}, Version: res[i+4], Run: holderRun(res[i+5])}
		if err := json.Unmarshal([]byte(res[i+3]), &rep.Sessions); err != nil {
			return nil, fmt.Errorf("registry: session report of %s: %w", res[i], err)
		}
		out = append(out, rep)
	}
	sortReports(out)
	return out, nil
}

// FleetSessions returns the sum of a home's sessions over every
// instance's unexpired report, and its live stored leases
// (AddAdminLease); 0 when there are none.
func (r *Store) FleetSessions(ctx context.Context, homeID string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("registry: fleet sessions of %s: %w", homeID, err)
	}
	n, err := fleetSessionsScript.Run(ctx, r.c, []string{r.keys.sessions, r.keys.adminLeases}, homeID, r.nowArg()).Int()
	if err != nil {
		return 0, fmt.Errorf("registry: fleet sessions of %s: %w", homeID, r.fail(ctx, err))
	}
	return n, nil
}

// sortReports orders reports by instance.
func sortReports(reps []registry.InstanceReport) {
	slices.SortFunc(reps, func(a, b registry.InstanceReport) int { return strings.Compare(a.Instance, b.Instance) })
}
