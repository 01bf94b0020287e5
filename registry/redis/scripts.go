package redis

import goredis "github.com/redis/go-redis/v9"

// The Redis store's scripts. Each runs atomically on the server: the check
// of generation, owner and fence and the write it guards are one step for
// every gateway of the fleet. Every key a script touches shares the
// store's hash tag, so the scripts run on Redis Cluster too (one slot).
//
// Clock: a script takes "now" in milliseconds as its last argument; an
// empty one means the server's own clock (TIME), so that every gateway of
// a fleet judges leases and session reports by one clock. Tests pass a
// manual clock.
//
// Stored forms:
//   - records (homes, apps, claims, the target): JSON in one hash per kind,
//     read by the scripts for their "generation" and "owner" fields;
//   - a lease: "token|expires_ms|holder" in the locks hash, the holder
//     followed by "\x1f<attempt>\x1f<beat>" when the lease was taken by a
//     gateway of this version: attempt is the taker's nonce (so that a lock
//     command the client gave up on can be undone, abandonScript) and beat
//     is "1" when the lease dies with the holder's heartbeat (its session
//     report); and the last token of each lock name in the lockseq hash
//     (HINCRBY: never reused);
//   - a session report: "expires_ms|reported_ms|{json counts}" in the
//     sessions hash, one field per instance; an instance with no session
//     keeps a report of "{}" (its heartbeat), until it expires;
//   - an instance's version in the versions hash, dropped with its report;
//   - a run's claim on an instance name: "expires_ms|nonce|about" in the
//     names hash, renewed with the run's reports (names.go).

// luaNow is the clock prelude of every script that needs one.
const luaNow = `
local function now(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function lease(raw)
  if not raw then return nil end
  local tok, exp, rest = string.match(raw, '^(%d+)|(%d+)|(.*)$')
  local holder, attempt, beat = string.match(rest, '^([^\31]*)\31([^\31]*)\31(.*)$')
  if not holder then holder, attempt, beat = rest, '', '' end
  return {token = tonumber(tok), expires = tonumber(exp), holder = holder, attempt = attempt, beat = beat, rest = rest}
end
local function beating(sessions, instance, n)
  local rep = redis.call('HGET', sessions, instance)
  if not rep then return false end
  local exp = tonumber(string.match(rep, '^(%d+)|'))
  return exp ~= nil and n < exp
end
`

// casScript writes or deletes one record if generation, owner and fence
// match, and announces the change.
// KEYS: records hash, locks hash. ARGV: field, op ("put" or "del"),
// cond generation, cond owner, record JSON, fence lock, fence token,
// channel, change key, now.
// Reply: "ok", "notfound", "conflict:<why>" or "lost:<why>".
var casScript = goredis.NewScript(luaNow + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local gen, owner = 0, ''
if cur then
  local rec = cjson.decode(cur)
  gen = tonumber(rec['generation']) or 0
  if type(rec['owner']) == 'string' then owner = rec['owner'] end
end
local cg = tonumber(ARGV[3])
local stamp = 'stored generation ' .. gen .. ' owner "' .. owner .. '", expected generation ' .. cg .. ' owner "' .. ARGV[4] .. '"'
if ARGV[2] == 'put' and cg == 0 then
  if cur then return 'conflict:create: exists at generation ' .. gen end
else
  if not cur then return 'notfound' end
  if ARGV[2] == 'del' and cg == 0 then return 'conflict:' .. stamp end
  if gen ~= cg or owner ~= ARGV[4] then return 'conflict:' .. stamp end
end
if ARGV[6] ~= '' then
  local l = lease(redis.call('HGET', KEYS[2], ARGV[6]))
  if not l then return 'lost:fence ' .. ARGV[6] .. '#' .. ARGV[7] .. ': the lock is not held' end
  if l.token ~= tonumber(ARGV[7]) then
    return 'lost:fence ' .. ARGV[6] .. '#' .. ARGV[7] .. ': the lock\'s live token is ' .. string.format('%d', l.token)
  end
  if now(ARGV[10]) >= l.expires then return 'lost:fence ' .. ARGV[6] .. '#' .. ARGV[7] .. ': the lease expired' end
end
if ARGV[2] == 'put' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[5])
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('PUBLISH', ARGV[8], ARGV[9])
return 'ok'
`)

// lockScript takes a lock unless a live lease holds it. A lease bound to
// its holder's heartbeat is live only while the holder's session report
// is: a gateway that died holding a lock frees it within its heartbeat's
// TTL, not at the end of the lease. The new lease is bound when its holder
// has a live report (a gateway of a fleet; a holder that reports nothing
// keeps a plain lease).
// KEYS: locks hash, lockseq hash, sessions hash. ARGV: name, holder, ttl
// ms, now, attempt.
// Reply: {token, expires ms, holder}; token 0 means held (by holder until
// expires).
var lockScript = goredis.NewScript(luaNow + `
local n = now(ARGV[4])
local cur = lease(redis.call('HGET', KEYS[1], ARGV[1]))
if cur and n < cur.expires and (cur.beat ~= '1' or beating(KEYS[3], cur.holder, n)) then
  return {0, cur.expires, cur.holder}
end
local beat = ''
if beating(KEYS[3], ARGV[2], n) then beat = '1' end
local tok = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
local exp = n + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d|%d|%s\31%s\31%s', tok, exp, ARGV[2], ARGV[5], beat))
return {tok, exp, ARGV[2]}
`)

// abandonScript undoes a lock command whose reply the client never had:
// the lease goes if that very command took it (its attempt matches), and
// the release is announced; anything else is left alone.
// KEYS: locks hash. ARGV: name, attempt, channel.
// Reply: 1 when a lease was released, 0 otherwise.
var abandonScript = goredis.NewScript(luaNow + `
local cur = lease(redis.call('HGET', KEYS[1], ARGV[1]))
if not cur or cur.attempt ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
`)

// renewScript extends a live lease, keeping its token.
// KEYS: locks hash. ARGV: name, holder, token, ttl ms, now.
// Reply: {1, expires ms} or {0, why}.
var renewScript = goredis.NewScript(luaNow + `
local n = now(ARGV[5])
local cur = lease(redis.call('HGET', KEYS[1], ARGV[1]))
if not cur then return {0, 'not held'} end
if cur.holder ~= ARGV[2] or cur.token ~= tonumber(ARGV[3]) then
  return {0, 'held by ' .. cur.holder .. ' with token ' .. string.format('%d', cur.token)}
end
if n >= cur.expires then return {0, 'expired'} end
local exp = n + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d|%d|%s', cur.token, exp, cur.rest))
return {1, exp}
`)

// unlockScript releases a lease that is ours, live or expired, and
// announces the release.
// KEYS: locks hash. ARGV: name, holder, token, channel, now.
// Reply: "ok", "expired" (ours, released, but it had expired) or
// "lost:<why>" (not ours: nothing done).
var unlockScript = goredis.NewScript(luaNow + `
local cur = lease(redis.call('HGET', KEYS[1], ARGV[1]))
if not cur then return 'lost:not held' end
if cur.holder ~= ARGV[2] or cur.token ~= tonumber(ARGV[3]) then
  return 'lost:held by ' .. cur.holder .. ' with token ' .. string.format('%d', cur.token)
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[4], ARGV[1])
if now(ARGV[5]) >= cur.expires then return 'expired' end
return 'ok'
`)

// releaseHolderScript deletes every lease whose holder is ARGV[1], live
// or not, and announces each release.
// KEYS: locks hash. ARGV: holder, channel.
// Reply: the number of leases released.
var releaseHolderScript = goredis.NewScript(luaNow + `
local all = redis.call('HGETALL', KEYS[1])
local n = 0
for i = 1, #all, 2 do
  local l = lease(all[i + 1])
  if l and l.holder == ARGV[1] then
    redis.call('HDEL', KEYS[1], all[i])
    redis.call('PUBLISH', ARGV[2], all[i])
    n = n + 1
  end
end
return n
`)

// reportScript replaces an instance's session report and prunes expired
// reports of every instance, with their versions, and expired name
// claims. With a run's nonce it first renews that run's claim on the name
// (names.go), and writes nothing when another run's claim is live.
// KEYS: sessions hash, versions hash, names hash. ARGV: instance, counts
// JSON ("{}" for none), ttl ms, now, nonce ("" for none), about.
// Reply: {"ok"} or {"taken", holder's about}.
var reportScript = goredis.NewScript(luaNow + luaNames + `
local n = now(ARGV[4])
if ARGV[5] ~= '' then
  local holder = takeName(KEYS[3], ARGV[1], n, tonumber(ARGV[3]), ARGV[5], ARGV[6], '')
  if holder then return {'taken', holder} end
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local exp = tonumber(string.match(all[i + 1], '^(%d+)|'))
  if exp == nil or n >= exp then
    redis.call('HDEL', KEYS[1], all[i])
    redis.call('HDEL', KEYS[2], all[i])
  end
end
local claims = redis.call('HGETALL', KEYS[3])
for i = 1, #claims, 2 do
  local exp = nameClaim(claims[i + 1])
  if exp == nil or n >= exp then redis.call('HDEL', KEYS[3], claims[i]) end
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d|%d|%s', n + tonumber(ARGV[3]), n, ARGV[2]))
return {'ok'}
`)

// withdrawScript deletes an instance's session report, version and name
// claim, unless another run than the caller's claims the name: the report
// is then that run's.
// KEYS: sessions hash, versions hash, names hash. ARGV: instance, nonce
// ("" for none).
// Reply: "ok" or "taken".
var withdrawScript = goredis.NewScript(luaNames + `
local exp, nonce = nameClaim(redis.call('HGET', KEYS[3], ARGV[1]))
if exp and ARGV[2] ~= '' and nonce ~= ARGV[2] then return 'taken' end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 'ok'
`)

// sessionsScript returns every unexpired session report, with the
// instance's version and what the run holding its name said of itself.
// KEYS: sessions hash, versions hash, names hash. ARGV: now.
// Reply: a flat list of instance, expires ms, reported ms, counts JSON,
// version ("" when unknown), the live claim's about ("" when none).
var sessionsScript = goredis.NewScript(luaNow + `
local n = now(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local exp, at, counts = string.match(all[i + 1], '^(%d+)|(%d+)|(.*)$')
  if exp ~= nil and n < tonumber(exp) then
    table.insert(out, all[i])
    table.insert(out, exp)
    table.insert(out, at)
    table.insert(out, counts)
    table.insert(out, redis.call('HGET', KEYS[2], all[i]) or '')
    local about = ''
    local claim = redis.call('HGET', KEYS[3], all[i])
    if claim then
      local cexp, _, cabout = string.match(claim, '^(%d+)|([^|]*)|(.*)$')
      if cexp ~= nil and n < tonumber(cexp) then
        about = cabout
      end
    end
    table.insert(out, about)
  end
end
return out
`)
