"""The Lua scripts every recovery write runs as.

Each write script starts with the same guard: the swarm's ``control-owner``
must name this controller and the epoch it acquired, and ``control-epoch``
must still be that epoch. Otherwise the script writes nothing and answers
``{"lease": ...}``. After the guard, one body does its checks and writes, and
the journal marks that belong to it are applied in the same script, so a
step's effect and its journal record can never disagree.

Scripts receive every key of the swarm (``keys.SCRIPT_PARTS`` order; one hash
slot thanks to the hash tag) and ``ARGV = holder, epoch, now_ms|"", payload
JSON, stream maxlen, token``.
"""

from __future__ import annotations

from .keys import SCRIPT_PARTS

_KEYS = ", ".join(f"['{p}']=KEYS[{i + 1}]" for i, p in enumerate(SCRIPT_PARTS))

PRELUDE = (
    "local K = {"
    + _KEYS
    + "}\n"
    + r"""
local holder = ARGV[1]
local epoch = tonumber(ARGV[2])
local now
if ARGV[3] ~= '' then now = tonumber(ARGV[3]) else
  local t = redis.call('TIME'); now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local P = cjson.decode(ARGV[4])
local maxlen = ARGV[5]
local raw_owner = redis.call('GET', K['control-owner'])
if not raw_owner then return cjson.encode({lease='absent'}) end
local owner = cjson.decode(raw_owner)
if owner.owner ~= holder or tonumber(owner.epoch) ~= epoch
   or tonumber(redis.call('GET', K['control-epoch']) or '0') ~= epoch then
  return cjson.encode({lease='lost', epoch=owner.epoch})
end
local function nn(v) if v == nil or v == cjson.null then return nil end return v end
local function jget(key, field)
  local r = redis.call('HGET', key, field)
  if r then return cjson.decode(r) end
  return nil
end
local function jset(key, field, v) redis.call('HSET', key, field, cjson.encode(v)) end
local function count(name) redis.call('HINCRBY', K['recovery-metrics'], name, 1) end
local function event(kind, exec, seat, expected, observed, detail)
  redis.call('XADD', K['recovery-events'], 'MAXLEN', '~', maxlen, '*', 'type', kind,
    'execution_id', exec, 'seat', seat, 'expected_generation', tostring(nn(expected) or ''),
    'observed_generation', tostring(nn(observed) or ''), 'epoch', tostring(epoch),
    'detail', detail or '', 'at_ms', tostring(now))
end
-- A step record of a held recovery (``held`` or a resumed ``step``): never carries a token.
local function step_event(kind, e)
  redis.call('XADD', K['recovery-events'], 'MAXLEN', '~', maxlen, '*', 'type', kind,
    'execution_id', e.execution_id, 'seat', e.seat, 'expected_generation', '', 'observed_generation', '',
    'epoch', tostring(epoch), 'detail', e.detail or '', 'at_ms', tostring(now),
    'parent_call', e.call, 'path', e.path, 'resumed', e.resumed and '1' or '0',
    'observed', nn(e.observed) or '', 'sent', (e.sent == true and '1') or (e.sent == false and '0') or '')
end
local function mark(exec, step, status)
  local j = jget(K['attempt-journal'], exec) or {}
  j[step] = {status=status, epoch=epoch, at_ms=now}
  jset(K['attempt-journal'], exec, j)
end
local function done(result)
  if P.step_events then for _, e in ipairs(P.step_events) do step_event('step', e) end end
  if P.marks then for _, m in ipairs(P.marks) do mark(m[1], m[2], m[3]) end end
  if P.finish then for _, e in ipairs(P.finish) do redis.call('HDEL', K['recovery-work'], e) end end
  result.ok = true
  result.now = now
  return cjson.encode(result)
end
local function refuse(why, extra)
  local r = extra or {}
  r.ok = false
  r.refused = why
  return cjson.encode(r)
end
-- Every write of the seats map leaves this write's token (ARGV[6], random) as the map's version ``v``;
-- a write that adds seats leaves it as the version of its seat names ``k`` too. A pass then tells
-- "unchanged" in O(1) (:mod:`.seatsmap`), and no version ever comes back.
local function seats_moved(added)
  local token = ARGV[6] or (tostring(now) .. ':' .. tostring(epoch))
  redis.call('HSET', K['seats-version'], 'v', token)
  if added then redis.call('HSET', K['seats-version'], 'k', token) end
end
local function current(exec)
  local a = jget(K['attempt-records'], exec)
  if not a or a.state == 'fenced' or redis.call('HGET', K['seats'], a.seat) ~= exec then return nil end
  return a
end
"""
)

LEASE = r"""
local lease_ms = tonumber(ARGV[3])
local now
if ARGV[4] ~= '' then now = tonumber(ARGV[4]) else
  local t = redis.call('TIME'); now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local mine = tonumber(ARGV[2])
local raw = redis.call('GET', KEYS[1])
if raw then
  local o = cjson.decode(raw)
  local ours = ARGV[5] and ARGV[5] ~= '' and o.incarnation == ARGV[5]
  if o.owner ~= ARGV[1] or (mine ~= 0 and tonumber(o.epoch) ~= mine and not ours) then
    return cjson.encode({state='held', owner=o.owner, epoch=o.epoch})
  end
  if tonumber(o.epoch) == mine then
    o.expires_at = now + lease_ms
    redis.call('SET', KEYS[1], cjson.encode(o), 'PX', lease_ms)
    return cjson.encode({state='renewed', epoch=o.epoch})
  end
  if ours then
    o.expires_at = now + lease_ms
    redis.call('SET', KEYS[1], cjson.encode(o), 'PX', lease_ms)
    return cjson.encode({state='acquired', epoch=o.epoch, adopted=true})
  end
end
local e = redis.call('INCR', KEYS[2])
local record = {owner=ARGV[1], epoch=e, expires_at=now + lease_ms}
if ARGV[5] and ARGV[5] ~= '' then record.incarnation = ARGV[5] end
redis.call('SET', KEYS[1], cjson.encode(record), 'PX', lease_ms)
return cjson.encode({state='acquired', epoch=e})
"""

RELEASE_LEASE = r"""
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local o = cjson.decode(raw)
if o.owner == ARGV[1] and tonumber(o.epoch) == tonumber(ARGV[2]) then redis.call('DEL', KEYS[1]) return 1 end
return 0
"""
