"""Lua bodies of held recoveries: open, claim, re-hold, issue a token, drop (after :data:`.lua.PRELUDE`).

Held recoveries are JSON fields of the swarm's ``held-recoveries`` hash, keyed
by call id. Each script first drops records whose ``expires_at_ms`` passed, so
expiry follows the controller's clock (injectable in tests) and survives a
restart. At most ``P.max`` live records exist; opening one more drops the one
opened first. Only a token's SHA-256 hex is ever stored.
"""

from __future__ import annotations

_LIVE = r"""
local function live_records()
  local all = redis.call('HGETALL', K['held-recoveries'])
  local live = {}
  for i = 1, #all, 2 do
    local r = cjson.decode(all[i + 1])
    if tonumber(r.expires_at_ms) <= now then redis.call('HDEL', K['held-recoveries'], all[i])
    else table.insert(live, r) end
  end
  return live
end
local function keep(r)
  redis.call('HSET', K['held-recoveries'], r.call, cjson.encode(r))
  redis.call('PEXPIRE', K['held-recoveries'], 2 * tonumber(P.ttl_ms or 1800000))
end
"""

HOLD_OPEN = (
    _LIVE
    + r"""
local id = P.execution_id
local f = jget(K['attempt-fences'], id)
if not f then return refuse('not_fenced') end
local live = live_records()
for _, r in ipairs(live) do if r.execution_id == id then return refuse('open', {call=r.call}) end end
if P.reopen and #live >= tonumber(P.max) then return refuse('full') end
local seq = redis.call('HINCRBY', K['recovery-metrics'], 'held:opened', 1)
local rec = {call=P.call, execution_id=id, seat=f.seat, step=P.step, since_ms=now,
  expires_at_ms=now + tonumber(P.ttl_ms), token_hash='', plan=P.plan, seq=seq, state='held'}
keep(rec)
table.insert(live, rec)
while #live > tonumber(P.max) do
  local oldest = 1
  for i, r in ipairs(live) do if tonumber(r.seq) < tonumber(live[oldest].seq) then oldest = i end end
  redis.call('HDEL', K['held-recoveries'], live[oldest].call)
  count('held:dropped')
  table.remove(live, oldest)
end
f.held = {step=P.step, call=P.call, since_ms=now}
jset(K['attempt-fences'], id, f)
step_event('held', {execution_id=id, seat=f.seat, call=P.call, path=P.step, resumed=false,
  detail=P.detail})
return done({record=cjson.encode(rec)})
"""
)

HOLD_CLAIM = (
    _LIVE
    + r"""
live_records()
local r = jget(K['held-recoveries'], P.call)
if not r or r.state ~= 'held' then return refuse('not_found') end
if r.token_hash == '' or r.token_hash ~= P.token_hash then return refuse('token') end
r.state = 'resuming'
r.expires_at_ms = now + tonumber(P.ttl_ms)
keep(r)
return done({record=cjson.encode(r)})
"""
)

HOLD_AGAIN = (
    _LIVE
    + r"""
live_records()
local r = jget(K['held-recoveries'], P.call)
if not r or r.state ~= 'resuming' then return refuse('not_found') end
r.state = 'held'
r.token_hash = P.token_hash
r.expires_at_ms = now + tonumber(P.ttl_ms)
keep(r)
local f = jget(K['attempt-fences'], r.execution_id)
if f and P.held then
  f.held = {step=r.step, call=r.call, since_ms=now}
  jset(K['attempt-fences'], r.execution_id, f)
  step_event('held', {execution_id=r.execution_id, seat=r.seat, call=r.call, path=r.step, resumed=true,
    detail=P.detail})
end
return done({record=cjson.encode(r)})
"""
)

HOLD_TOKEN = (
    _LIVE
    + r"""
live_records()
local r = jget(K['held-recoveries'], P.call)
if not r or r.state ~= 'held' then return refuse('not_found') end
r.token_hash = P.token_hash
keep(r)
return done({record=cjson.encode(r)})
"""
)

HOLD_DROP = r"""
redis.call('HDEL', K['held-recoveries'], P.call)
return done({})
"""

HELD_BODIES = {
    "hold_open": HOLD_OPEN,
    "hold_claim": HOLD_CLAIM,
    "hold_again": HOLD_AGAIN,
    "hold_token": HOLD_TOKEN,
    "hold_drop": HOLD_DROP,
}
