"""Write scripts of refused restores and relaunches (run after :data:`.lua.PRELUDE`, under the lease).

``refusal`` stores what a replacement reported before it exited: it must still
be the seat's current, unfenced attempt with no outcome stored. The first
report is kept; a repeat returns it. The refused attempt's grant is revoked, its
account slot ended and its credential deleted in the same script.

``relaunch`` gives the refused attempt's authority up (grant revoked, slot
ended, credential deleted, state ``relaunched``: it is not fenced, it failed
nothing) and admits the seat's next generation with the same directive, the
launch marked ``unknown`` and the refused Pod's removal marked ``unknown`` in
the same script, so a crash after it leaves both to the journal. A refusal is
relaunched at most once: ``relaunched_as`` is set in the same script, and a
second relaunch of it is refused with the first one's answer. A ``fresh``
relaunch rewrites the fenced attempt's decision (``attempt-recoveries``) in the
same script as a fresh decision by the caller; its ``replacement`` keeps naming
the first replacement, from which the cards follow the relaunches.
"""

from __future__ import annotations

REFUSAL = r"""
local id = P.execution_id
local a = current(id)
if not a then return refuse('not_current') end
if redis.call('HEXISTS', K['restore-outcomes'], id) == 1 then return refuse('reported') end
local existing = redis.call('HGET', K['restore-refusals'], id)
if existing then return done({existing=true, refusal=existing}) end
local r = cjson.decode(P.refusal_json)
r.reported_at_ms = now
r.epoch = epoch
local raw = cjson.encode(r)
redis.call('HSET', K['restore-refusals'], id, raw)
-- The refused replacement runs nothing from here on: its grant, account slot and credential go now,
-- not when someone relaunches it (the decision and the refusal stay for that relaunch).
local g = jget(K['launch-grants'], id)
if g and g.state ~= 'revoked' then
  g.state = 'revoked'; g.revoked_at_ms = now; jset(K['launch-grants'], id, g)
end
redis.call('HSET', K['account-slots'], id, 'ended')
redis.call('HDEL', K['worker-credentials'], id)
local row = jget(K['ledger-tasks'], a.task_id)
if row and type(row.recovery) == 'table' then
  row.recovery.restore_refused = P.reason
  jset(K['ledger-tasks'], a.task_id, row)
end
count('restore_refusals:' .. P.token)
event('restore_refused', id, a.seat, a.generation, a.generation, P.reason)
return done({existing=false, refusal=raw})
"""

RELAUNCH = r"""
local id = P.refused
local raw = redis.call('HGET', K['restore-refusals'], id)
if not raw then return refuse('not_refused') end
local r = cjson.decode(raw)
if nn(r.relaunched_as) then return refuse('relaunched', {refusal=raw}) end
local a = jget(K['attempt-records'], id)
if not a or a.state ~= 'admitted' or redis.call('HGET', K['seats'], a.seat) ~= id then
  return refuse('not_current')
end
if redis.call('HEXISTS', K['restore-outcomes'], id) == 1 then return refuse('reported') end
a.state = 'relaunched'
jset(K['attempt-records'], id, a)
local g = jget(K['launch-grants'], id)
if g then g.state = 'revoked'; g.revoked_at_ms = now; jset(K['launch-grants'], id, g) end
redis.call('HSET', K['account-slots'], id, 'ended')
redis.call('HDEL', K['worker-credentials'], id)
local new = P.execution_id
redis.call('HSET', K['attempt-records'], new, P.attempt_json)
redis.call('HSET', K['seats'], a.seat, new)
seats_moved()
redis.call('HSET', K['launch-grants'], new, P.grant_json)
redis.call('HSET', K['account-slots'], new, 'active')
redis.call('HSET', K['worker-credentials'], new, P.cred_hash)
redis.call('HSET', K['recovery-work'], new, 'launch')
redis.call('HSET', K['recovery-work'], id, 'retire')
r.relaunched_as = new
r.relaunched_at_ms = now
r.relaunched_by = P.relaunched_by
local out = cjson.encode(r)
redis.call('HSET', K['restore-refusals'], id, out)
if P.decision_fresh and nn(P.decision_of) then
  local d = jget(K['attempt-recoveries'], P.decision_of)
  if d then
    if d.accepted_choice == nil or d.accepted_choice == cjson.null then d.accepted_choice = d.mode end
    d.mode = 'fresh'
    d.checkpoint = cjson.null
    d.directive = cjson.decode(P.fresh_directive_json)
    d.decided_by = P.relaunched_by
    d.decided_at_ms = now
    d.controller_epoch = epoch
    jset(K['attempt-recoveries'], P.decision_of, d)
  end
end
local row = jget(K['ledger-tasks'], a.task_id)
if row then
  if nn(P.ledger_recovery_json) then
    row.recovery = cjson.decode(P.ledger_recovery_json)
  elseif type(row.recovery) == 'table' then
    row.recovery.replacement = new
    row.recovery.restore_refused = nil
  end
  if type(row.recovery) == 'table' then
    row.recovery.relaunches = (tonumber(nn(row.recovery.relaunches)) or 0) + 1
  end
  jset(K['ledger-tasks'], a.task_id, row)
end
count('relaunches')
count('admissions:relaunch')
event('relaunch', new, a.seat, tonumber(a.generation) + 1, a.generation,
  'relaunch of ' .. id .. ' after its restore was refused (' .. r.reason .. ')')
return done({refusal=out})
"""

RELAUNCH_BODIES = {"refusal": REFUSAL, "relaunch": RELAUNCH}
