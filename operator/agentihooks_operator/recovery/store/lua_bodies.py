"""The bodies of the guarded write scripts (each runs after :data:`.lua.PRELUDE`).

Every body re-checks, inside the script, the facts its write depends on (the
attempt is the seat's current one, a fence exists, no decision was accepted
yet, ...) so two controllers or two threads can never both apply a step.
"""

from __future__ import annotations

from .held_lua import HELD_BODIES
from .relaunch_lua import RELAUNCH_BODIES

# Generation 1 of a batch of seats (``P.seats``): a seat that already has an attempt is skipped, so a
# batch sent again admits nothing twice. Each admitted attempt's ``launch`` is ``unknown`` from here.
ADMIT = r"""
local admitted = {}
for _, s in ipairs(P.seats) do
  if not redis.call('HGET', K['seats'], s.seat) then
    redis.call('HSET', K['attempt-records'], s.execution_id, s.attempt_json)
    redis.call('HSET', K['seats'], s.seat, s.execution_id)
    redis.call('HSET', K['launch-grants'], s.execution_id, s.grant_json)
    redis.call('HSET', K['account-slots'], s.execution_id, 'active')
    redis.call('HSET', K['worker-credentials'], s.execution_id, s.cred_hash)
    redis.call('HSETNX', K['ledger-tasks'], s.task_id, s.ledger_json)
    redis.call('HSET', K['recovery-work'], s.execution_id, 'launch')
    mark(s.execution_id, 'launch', 'unknown')
    admitted[#admitted + 1] = s.execution_id
  end
end
if #admitted > 0 then
  redis.call('HINCRBY', K['recovery-metrics'], 'admissions:first', #admitted)
  seats_moved(true)
end
return done({admitted=admitted, taken=#P.seats - #admitted})
"""

FENCE = r"""
local id = P.execution_id
local existing = redis.call('HGET', K['attempt-fences'], id)
if existing then return done({existing=true, fence=existing}) end
local a = jget(K['attempt-records'], id)
local cur = redis.call('HGET', K['seats'], P.seat)
if not a or cur ~= id then return refuse('not_current', {current=cur}) end
if tonumber(a.generation) ~= tonumber(P.observed_generation) then
  return refuse('generation_mismatch', {expected=a.generation})
end
local f = cjson.decode(P.fence_json)
local hb = jget(K['heartbeats'], id) or {}
local wm = nn(hb.archive_watermark)
-- An attempt whose image never started ran nothing, so it still holds the session it was launched to
-- reopen natively (a master's resume after the pull failure reopens it); any other attempt holds only
-- what it reported.
local planned = nil
if P.reason == 'image_pull' and type(a.directive) == 'table' and a.directive.recovery == 'native' then
  planned = nn(a.directive.session_id)
end
f.native_session = nn(hb.session_id) or planned or cjson.null
f.archive_watermark = wm or cjson.null
local final = nn(hb.final_watermark)
if P.reason == 'image_pull' then
  f.tail = 'The image never started, so the attempt wrote no transcript and nothing is lost.'
elseif final ~= nil and wm ~= nil and final == wm then
  f.tail = 'Nothing is lost: the final capture archived the transcript through record ' .. wm .. '.'
  f.final_capture = true
elseif wm == nil then
  f.tail = 'No transcript record was archived: everything the attempt wrote is lost; its length is unknown.'
else
  f.tail = 'Transcript written after record ' .. wm .. ' was not archived and is lost; its length is unknown.'
end
f.fenced_at_ms = now
f.controller_epoch = epoch
-- A death not proven (P.proven not true) of an attempt that renewed a worker lease: its replacement waits
-- until the lease (from the last renewal this script can see: later ones are refused once it ran) is out.
local lease_at, lease_ms = nn(hb.lease_at_ms), nn(hb.lease_ms)
if P.proven ~= true and lease_at and lease_ms then
  local stops_by = lease_at + lease_ms + P.margin_base_ms + math.floor(lease_ms * P.margin_rate)
  if stops_by > now then
    f.old_attempt_stops_by_ms = stops_by
    count('lease_waits_by_reason:' .. P.reason)
  end
end
local raw = cjson.encode(f)
redis.call('HSET', K['attempt-fences'], id, raw)
a.state = 'fenced'
jset(K['attempt-records'], id, a)
-- the revoked credential's hash is kept apart: its worker is answered "fenced", never a bare 403
local cred = redis.call('HGET', K['worker-credentials'], id)
if cred then redis.call('HSET', K['fenced-credentials'], id, cred) end
redis.call('HDEL', K['worker-credentials'], id)
local row = jget(K['ledger-tasks'], a.task_id)
if row and row.held ~= true then
  row.held_awaiting = row.awaiting
  row.held = true
  row.awaiting = 'recovery_pending'
  jset(K['ledger-tasks'], a.task_id, row)
end
redis.call('HSET', K['recovery-work'], id, 'fenced')
redis.call('HSET', K['seat-handoffs'], P.seat, id)
count('fences_by_reason:' .. P.reason)
event('fence', id, P.seat, a.generation, P.observed_generation, P.reason)
return done({existing=false, fence=raw})
"""

RELEASE = r"""
local id = P.execution_id
local f = jget(K['attempt-fences'], id)
if not f then return refuse('not_fenced') end
local rel = f.released
if type(rel) ~= 'table' then rel = {} end
for _, k in ipairs(rel) do if k == P.kind then return done({already=true}) end end
if P.kind == 'account' and #rel == 0 then return refuse('grant_first') end
if P.kind == 'grant' then
  local g = jget(K['launch-grants'], id)
  if g then g.state = 'revoked'; g.revoked_at_ms = now; jset(K['launch-grants'], id, g) end
  redis.call('HDEL', K['worker-credentials'], id)
else
  redis.call('HSET', K['account-slots'], id, 'ended')
  if nn(P.how) then f.account_release = P.how end
  f.held = nil
end
table.insert(rel, P.kind)
f.released = rel
jset(K['attempt-fences'], id, f)
count('releases:' .. P.kind)
return done({already=false})
"""

DECIDE = r"""
local id = P.execution_id
local f = jget(K['attempt-fences'], id)
if not f then return refuse('not_fenced') end
local raw = redis.call('HGET', K['attempt-recoveries'], id)
if raw then
  local d = cjson.decode(raw)
  if d.mode ~= 'recovery_pending' or P.expect == 'absent' then return refuse('decided', {existing=raw}) end
elseif P.expect == 'pending' then
  return refuse('not_pending')
end
local cur = redis.call('HGET', K['seats'], f.seat)
local ca = cur and jget(K['attempt-records'], cur)
local ad = nn(P.admission)
if ad then
  if cur ~= id then return refuse('seat_moved') end
  redis.call('HSET', K['attempt-records'], ad.execution_id, ad.attempt_json)
  redis.call('HSET', K['seats'], f.seat, ad.execution_id)
  seats_moved()
  redis.call('HSET', K['launch-grants'], ad.execution_id, ad.grant_json)
  redis.call('HSET', K['account-slots'], ad.execution_id, 'active')
  redis.call('HSET', K['worker-credentials'], ad.execution_id, ad.cred_hash)
  redis.call('HSET', K['recovery-work'], ad.execution_id, 'launch')
  local row = jget(K['ledger-tasks'], ad.task_id)
  if row then
    row.recovery = cjson.decode(ad.ledger_recovery_json)
    jset(K['ledger-tasks'], ad.task_id, row)
  end
  count('admissions:replacement')
  count('decisions_by_choice:' .. P.mode)
  count('decisions_by_decider:' .. P.decider_kind)
else
  count('decisions_by_choice:recovery_pending')
end
redis.call('HSET', K['attempt-recoveries'], id, P.decision_json)
event('recovery', id, f.seat, ca and ca.generation, f.generation, P.detail)
return done({decision=P.decision_json})
"""

OUTCOME = r"""
local id = P.execution_id
local existing = redis.call('HGET', K['restore-outcomes'], id)
if existing then return refuse('reported', {existing=existing}) end
local a = current(id)
if not a then return refuse('not_current') end
local stored = cjson.decode(P.stored_json)
stored.reported_at_ms = now
local raw = cjson.encode(stored)
redis.call('HSET', K['restore-outcomes'], id, raw)
local row = jget(K['ledger-tasks'], a.task_id)
if row then
  if row.held == true then
    row.awaiting = row.held_awaiting
    row.held = false
    row.held_awaiting = cjson.null
    row.restores = (tonumber(nn(row.restores)) or 0) + 1
    count('ledger_restores')
  end
  row.recovery = stored
  jset(K['ledger-tasks'], a.task_id, row)
end
count('restore_outcomes_by_type:' .. P.recovery)
event('outcome', id, a.seat, a.generation, a.generation, P.recovery)
mark(id, 'outcome', 'ok')
return done({stored=raw})
"""

CREDENTIAL = r"""
if not current(P.execution_id) then return refuse('not_current') end
redis.call('HSET', K['worker-credentials'], P.execution_id, P.cred_hash)
-- P.resend: the launch is about to be sent again; until an answer says otherwise, its outcome is unknown
local j = P.resend and jget(K['attempt-journal'], P.execution_id)
if j and j['launch'] and j['launch'].status == 'unknown' then
  j['launch'].inflight = true
  jset(K['attempt-journal'], P.execution_id, j)
end
return done({})
"""

# A worker trades the credential its Pod was started with for one only it knows (once: the first
# credential then matches nothing, so whoever else read it from the Pod's environment holds nothing).
EXCHANGE = r"""
if not current(P.execution_id) then return refuse('not_current') end
local stored = redis.call('HGET', K['worker-credentials'], P.execution_id)
if stored ~= P.offered then return refuse('not_bootstrap') end
redis.call('HSET', K['worker-credentials'], P.execution_id, P.cred_hash)
return done({})
"""

HEARTBEAT = r"""
local id = P.execution_id
local a = current(id)
if not a then return refuse('not_current') end
local hb = jget(K['heartbeats'], id) or {}
-- P.lease: a renewal of the worker lease, for the duration the attempt was launched with
local lease_ms = nn(a.worker_lease_ms)
if P.lease == true and lease_ms then
  hb.lease_at_ms = now
  hb.lease_ms = lease_ms
end
if nn(P.session_id) then hb.session_id = P.session_id end
local wm = nn(P.watermark)
if wm then
  local old = nn(hb.archive_watermark)
  if old == nil or wm >= old then hb.archive_watermark = wm end
  if P.final == true then hb.final_watermark = wm end
end
hb.at_ms = now
jset(K['heartbeats'], id, hb)
return done({lease_ms = lease_ms, renewed_at_ms = now})
"""

# The operator confirmed that a fenced attempt has stopped (its node is known dead): its replacement no
# longer waits for the attempt's worker lease. Once per fence; a repeat answers the same confirmation.
CONFIRM_STOPPED = r"""
local id = P.execution_id
local f = jget(K['attempt-fences'], id)
if not f or f.seat ~= P.seat then return refuse('not_fenced') end
if nn(f.stop_confirmed_at_ms) then return done({replayed=true, fence=cjson.encode(f)}) end
local until_ms = nn(f.old_attempt_stops_by_ms)
if not until_ms or until_ms <= now then return refuse('not_waiting') end
f.waited_until_ms = until_ms
f.old_attempt_stops_by_ms = nil
f.stop_confirmed_at_ms = now
f.stop_confirmed_by = P.by
local raw = cjson.encode(f)
redis.call('HSET', K['attempt-fences'], id, raw)
count('lease_wait_overrides:' .. P.by)
event('recovery', id, f.seat, nil, f.generation, 'the lease wait skipped: stop confirmed by ' .. P.by)
return done({replayed=false, fence=raw})
"""

PAUSE = r"""
if P.paused then redis.call('SET', K['recovery-paused'], tostring(epoch))
else redis.call('DEL', K['recovery-paused']) end
return done({})
"""

# A launch the launcher could not send yet (``LaunchBlocked``): the step stays ``unknown`` and carries
# why, since when; a new or changed reason is one ``launch_blocked`` telemetry entry (one Event).
BLOCKED = r"""
local j = jget(K['attempt-journal'], P.execution_id) or {}
local prev = j['launch']
if not prev or prev.status ~= 'unknown' then return refuse('not_pending') end
local changed = prev.detail ~= P.detail
local since = prev.since_ms
if changed or not since then since = now end
local tries = (prev.tries or 0) + 1
local retry = P.retry_ms and (now + P.retry_ms) or nil
j['launch'] = {status='unknown', epoch=epoch, at_ms=now, detail=P.detail, reason=P.reason, since_ms=since,
               tries=tries, retry_at_ms=retry}
jset(K['attempt-journal'], P.execution_id, j)
if changed then event('launch_blocked', P.execution_id, P.seat, P.generation, nil, P.detail) end
return done({changed=changed})
"""

# Journal marks, dropped requests and counters, with no other effect.
MARKS = r"""
if P.drop then for _, r in ipairs(P.drop) do redis.call('HDEL', K['recovery-requests'], r) end end
if P.counts then for _, c in ipairs(P.counts) do count(c) end end
return done({})
"""

BODIES = {
    "admit": ADMIT,
    "fence": FENCE,
    "release": RELEASE,
    "decide": DECIDE,
    "outcome": OUTCOME,
    "credential": CREDENTIAL,
    "exchange": EXCHANGE,
    "heartbeat": HEARTBEAT,
    "confirm_stopped": CONFIRM_STOPPED,
    "pause": PAUSE,
    "marks": MARKS,
    "blocked": BLOCKED,
    **HELD_BODIES,
    **RELAUNCH_BODIES,
}
