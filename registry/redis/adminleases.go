package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// An operator's lease on a home (POST /admin/homes/{id}/leases) is, in a
// fleet, a record of the store rather than a session of the gateway that
// took it: it counts in FleetSessions on every gateway, outlives the
// gateway that took it, and any gateway can end it. Stored form: one field
// "<home>/<lease id>" per lease in the leases hash, its expiry in
// milliseconds as value; lease ids come from one counter, unique in the
// fleet. Expired leases are pruned as the fleet's sessions are read.

// adminLeaseAddScript stores a lease.
// KEYS: leases hash, lease counter. ARGV: home, ttl ms, now.
// Reply: {lease id, expires ms}.
var adminLeaseAddScript = goredis.NewScript(luaNow + `
local id = redis.call('INCR', KEYS[2])
local exp = now(ARGV[3]) + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1] .. '/' .. id, string.format('%d', exp))
return {id, exp}
`)

// adminLeaseEndScript ends a lease.
// KEYS: leases hash. ARGV: home, lease id, now.
// Reply: 1 if the lease was live, 0 if it was unknown or had expired.
var adminLeaseEndScript = goredis.NewScript(luaNow + `
local f = ARGV[1] .. '/' .. ARGV[2]
local exp = redis.call('HGET', KEYS[1], f)
if not exp then return 0 end
redis.call('HDEL', KEYS[1], f)
if now(ARGV[3]) >= tonumber(exp) then return 0 end
return 1
`)

// fleetSessionsScript sums a home's sessions over the unexpired session
// reports and its live stored leases, and prunes expired leases.
// KEYS: sessions hash, leases hash. ARGV: home, now.
var fleetSessionsScript = goredis.NewScript(luaNow + `
local n = now(ARGV[2])
local total = 0
local reports = redis.call('HGETALL', KEYS[1])
for i = 1, #reports, 2 do
  local exp, counts = string.match(reports[i + 1], '^(%d+)|%d+|(.*)$')
  if exp ~= nil and n < tonumber(exp) then
    local c = cjson.decode(counts)[ARGV[1]]
    if type(c) == 'number' then total = total + c end
  end
end
local leases = redis.call('HGETALL', KEYS[2])
local prefix = ARGV[1] .. '/'
for i = 1, #leases, 2 do
  local exp = tonumber(leases[i + 1])
  if exp == nil or n >= exp then
    redis.call('HDEL', KEYS[2], leases[i])
  elseif string.sub(leases[i], 1, #prefix) == prefix then
    total = total + 1
  end
end
return total
`)

// AddAdminLease stores an operator's lease on home for ttl (see the top
// of this file) and returns its id, unique in the fleet, and its expiry.
func (r *Store) AddAdminLease(ctx context.Context, home string, ttl time.Duration) (uint64, time.Time, error) {
	if home == "" || ttl <= 0 {
		return 0, time.Time{}, fmt.Errorf("registry: add lease on %q for %s: a home and a positive ttl are required", home, ttl)
	}
	res, err := adminLeaseAddScript.Run(ctx, r.c, []string{r.keys.adminLeases, r.keys.adminLeaseSeq},
		home, ttl.Milliseconds(), r.nowArg()).Int64Slice()
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("registry: add lease on %s: %w", home, r.fail(ctx, err))
	}
	if len(res) != 2 {
		return 0, time.Time{}, fmt.Errorf("registry: add lease on %s: unexpected reply %v", home, res)
	}
	return uint64(res[0]), time.UnixMilli(res[1]).UTC(), nil
}

// EndAdminLease ends a stored lease on home; it reports whether the lease
// was live (false when unknown or expired).
func (r *Store) EndAdminLease(ctx context.Context, home string, lease uint64) (bool, error) {
	n, err := adminLeaseEndScript.Run(ctx, r.c, []string{r.keys.adminLeases}, home, lease, r.nowArg()).Int()
	if err != nil {
		return false, fmt.Errorf("registry: end lease %d on %s: %w", lease, home, r.fail(ctx, err))
	}
	return n == 1, nil
}
