package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/registry"
)

// An instance name is one gateway's in a fleet: its leases, its heartbeat
// and the homes it runs are all keyed by it. A run of a gateway claims its
// name before it takes any lock (ClaimName), and renews the claim with
// every heartbeat. The claim carries the run's nonce, so that the server,
// which runs the claims of two gateways one after the other, tells two runs
// apart even when they start in the same instant: the second is refused.
// A run that finds its name claimed by another one later (it was paused or
// cut off past its heartbeat's TTL, and a new run took the name over) has
// its heartbeat refused from then on: it no longer speaks for the name,
// and the fleet counts it gone.

// NameTakenError is the error of a claim or a heartbeat refused because
// another run holds the instance name. It wraps registry.ErrNameTaken.
type NameTakenError struct {
	// Instance is the name.
	Instance string
	// Holder is what the holding run said of itself when it claimed the
	// name (ClaimName's about), "" when it said nothing.
	Holder string
}

func (e *NameTakenError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("instance %q is held by another gateway run", e.Instance)
	}
	return fmt.Sprintf("instance %q is held by another gateway run (%s)", e.Instance, holderText(e.Holder))
}

// holderText names the run an about describes: "pid N on HOST" when it is
// a JSON object with host and pid, as a gateway's is; else about itself.
func holderText(about string) string {
	if run := holderRun(about); run != "" {
		return run
	}
	return about
}

// holderRun is "pid N on HOST" for an about that is a JSON object with
// host and pid, as a gateway's is; "" for any other.
func holderRun(about string) string {
	var id struct {
		Host string `json:"host"`
		PID  int    `json:"pid"`
	}
	if json.Unmarshal([]byte(about), &id) != nil || id.Host == "" || id.PID <= 0 {
		return ""
	}
	return fmt.Sprintf("pid %d on %s", id.PID, id.Host)
}

func (e *NameTakenError) Unwrap() error { return registry.ErrNameTaken }

// nameClaim is this store's claim on its gateway's instance name, renewed
// with each of its heartbeats; lost is set once a heartbeat was refused.
type nameClaim struct {
	mu       sync.Mutex
	instance string
	nonce    string
	about    string
	lost     error
}

// claimed returns the nonce and about of the claim on instance, "" when
// this store claimed no such name.
func (c *nameClaim) claimed(instance string) (nonce, about string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.instance != instance {
		return "", ""
	}
	return c.nonce, c.about
}

// ClaimName claims instance for this run of a gateway, named by nonce (no
// '|'; unique per run) and described by about (shown to a run refused the
// name), for ttl. It fails with a *NameTakenError when another run's claim
// on the name is live, unless that run's nonce is replace: a run the
// caller knows has ended ("" for none). A claim lives on through this
// store's heartbeats under instance (ReportSessions), each of which renews
// it for the report's own TTL, and ends with WithdrawReport.
func (r *Store) ClaimName(ctx context.Context, instance, nonce, about, replace string, ttl time.Duration) error {
	switch {
	case instance == "":
		return errors.New("registry: claim an instance name: no name")
	case nonce == "" || strings.Contains(nonce, "|"):
		return fmt.Errorf("registry: claim instance %q: bad run nonce %q", instance, nonce)
	case ttl <= 0:
		return fmt.Errorf("registry: claim instance %q: ttl %s is not positive", instance, ttl)
	}
	res, err := claimScript.Run(ctx, r.c, []string{r.keys.names}, instance, nonce, about, ttl.Milliseconds(), r.nowArg(), replace).StringSlice()
	if err != nil {
		return fmt.Errorf("registry: claim instance %q: %w", instance, r.fail(ctx, err))
	}
	if len(res) == 2 && res[0] == "taken" {
		return &NameTakenError{Instance: instance, Holder: res[1]}
	}
	r.claim.mu.Lock()
	r.claim.instance, r.claim.nonce, r.claim.about, r.claim.lost = instance, nonce, about, nil
	r.claim.mu.Unlock()
	return nil
}

// NameClaim is a run's live claim on an instance name.
type NameClaim struct {
	// Nonce names the run.
	Nonce string
	// About is what the run said of itself.
	About string
	// Expires is when the claim lapses unless the run renews it.
	Expires time.Time
}

// NameHolder returns the live claim on instance, if there is one.
// Gateways of versions that claim no name leave none.
func (r *Store) NameHolder(ctx context.Context, instance string) (NameClaim, bool, error) {
	res, err := nameHolderScript.Run(ctx, r.c, []string{r.keys.names}, instance, r.nowArg()).StringSlice()
	if err != nil {
		return NameClaim{}, false, fmt.Errorf("registry: the holder of instance %q: %w", instance, r.fail(ctx, err))
	}
	if len(res) != 3 {
		return NameClaim{}, false, nil
	}
	exp, err := strconv.ParseInt(res[0], 10, 64)
	if err != nil {
		return NameClaim{}, false, fmt.Errorf("registry: the holder of instance %q: expiry %q: %w", instance, res[0], err)
	}
	return NameClaim{Nonce: res[1], About: res[2], Expires: time.UnixMilli(exp).UTC()}, true, nil
}

// nameLost records that a heartbeat of the claimed name was refused, for
// Unavailable, and returns the error to report.
func (r *Store) nameLost(instance, holder string) error {
	err := &NameTakenError{Instance: instance, Holder: holder}
	r.claim.mu.Lock()
	r.claim.lost = err
	r.claim.mu.Unlock()
	return err
}

// lostName returns why this store's heartbeats are refused, nil while
// they are not.
func (r *Store) lostName() error {
	r.claim.mu.Lock()
	defer r.claim.mu.Unlock()
	return r.claim.lost
}

// claimScript claims an instance name for a run unless another run's
// claim on it is live.
// KEYS: names hash. ARGV: instance, nonce, about, ttl ms, now, the nonce
// of an ended run whose claim may be replaced ("" for none).
// Reply: {"ok"} or {"taken", holder's about}.
var claimScript = goredis.NewScript(luaNow + luaNames + `
local holder = takeName(KEYS[1], ARGV[1], now(ARGV[5]), tonumber(ARGV[4]), ARGV[2], ARGV[3], ARGV[6])
if holder then return {'taken', holder} end
return {'ok'}
`)

// nameHolderScript returns a live claim on a name.
// KEYS: names hash. ARGV: instance, now.
// Reply: {expires ms, nonce, about}, or {} when no claim is live.
var nameHolderScript = goredis.NewScript(luaNow + luaNames + `
local exp, nonce, about = nameClaim(redis.call('HGET', KEYS[1], ARGV[1]))
if exp and now(ARGV[2]) < exp then return {string.format('%d', exp), nonce, about} end
return {}
`)

// luaNames parses a stored name claim, "expires_ms|nonce|about"
// (nameClaim), and claims or renews one (takeName): unless another run's
// claim is live, and is not that of replace (an ended run, "" for none),
// the claim becomes nonce's for ttl ms from n; else the live holder's
// about is returned.
const luaNames = `
local function nameClaim(raw)
  if not raw then return nil end
  local exp, nonce, about = string.match(raw, '^(%d+)|([^|]*)|(.*)$')
  if not exp then return nil end
  return tonumber(exp), nonce, about
end
local function takeName(names, instance, n, ttl, mine, about, replace)
  local exp, nonce, held = nameClaim(redis.call('HGET', names, instance))
  if exp and n < exp and nonce ~= mine and (replace == '' or nonce ~= replace) then return held end
  redis.call('HSET', names, instance, string.format('%d|%s|%s', n + ttl, mine, about))
  return nil
end
`
