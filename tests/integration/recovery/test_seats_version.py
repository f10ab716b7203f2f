"""The seats map is read once per change, on real Redis: a quiet pass reads no seat, every write of
the map moves its version, and a map made again (flushed, restored) is never taken for the old one.
"""

from __future__ import annotations

import re

from agentihooks_operator.k8s.scope import Scope
from agentihooks_operator.recovery.store import lua, lua_bodies, relaunch_lua
from agentihooks_operator.recovery.store.seatsmap import SeatsReader
from testsupport.counting import CountingConnection, counted
from testsupport.recovery import observe, swarm_spec


def test_every_script_that_writes_the_seats_map_moves_its_version() -> None:
    bodies = {n: v for m in (lua_bodies, relaunch_lua) for n, v in vars(m).items() if isinstance(v, str)}
    writers = {n: b for n, b in bodies.items() if re.search(r"HSET', K\['seats'\]", b)}
    assert {"ADMIT", "DECIDE", "RELAUNCH"} <= writers.keys()
    for name, body in writers.items():
        assert "seats_moved(" in body, f"{name} writes the seats map without moving its version"
    assert "seats_moved(true)" in writers["ADMIT"]  # seats added: the names' version moves too
    assert "local function seats_moved" in lua.PRELUDE


def test_a_quiet_pass_reads_no_seat_and_a_replacement_is_read_once(make, redis_url, checkpoint) -> None:  # type: ignore[no-untyped-def]
    client = counted(redis_url)
    r = make(client=client)
    spec = swarm_spec(50)
    r.acquire()
    plans = r.ensure_seats(spec)
    assert len(plans) == 50
    names = r._admitted._reader  # the seat check's reader
    scope = Scope(client, r.keys)
    scope.chosen({}, [], [])  # the first read of the map
    assert r.ensure_seats(spec) == []  # the names once more: the admission above moved them
    seen_names, seen_map = names.reads, scope._reader.reads
    for _ in range(3):  # quiet: nothing admitted, nothing replaced
        before = CountingConnection.sent
        assert r.ensure_seats(spec) == []
        assert CountingConnection.sent - before == 1  # the version alone
        scope.chosen({}, [], [])
    assert (names.reads, scope._reader.reads) == (seen_names, seen_map)

    failed = plans[7]
    r.report_session(failed.execution_id, "sess-1")
    checkpoint(
        failed.execution_id, session_id="sess-1", task_id=failed.task_id
    )  # so the automated policy resumes it now
    r.reconcile(
        spec, observe([(failed.execution_id, failed.seat, 1)], failed={failed.execution_id: "oom_killed"})
    )
    replacement = client.hget(r.keys.seats, failed.seat).decode()
    assert replacement != failed.execution_id
    chosen = scope.chosen({}, [], [])  # the map changed: read once, the new attempt chosen
    assert scope._reader.reads == seen_map + 1
    assert replacement in {a.execution_id for a in chosen}
    scope.chosen({}, [], [])
    assert scope._reader.reads == seen_map + 1
    assert r.ensure_seats(spec) == [] and names.reads == seen_names  # a replacement adds no seat

    grown = swarm_spec(51)
    added = r.ensure_seats(grown)
    assert [p.seat for p in added] == [grown.seats[-1].name]
    assert r.ensure_seats(grown) == [] and names.reads == seen_names + 1


def test_a_map_made_again_is_read_again_and_its_seats_admitted(make, client) -> None:  # type: ignore[no-untyped-def]
    """Redis lost the swarm (a flush, a restore from an old copy): the readers' tokens never match it."""
    r = make()
    spec = swarm_spec(3)
    r.acquire()
    assert len(r.ensure_seats(spec)) == 3
    reader = SeatsReader(client, r.keys, "map")
    assert reader.moved() is not None and reader.moved() is None
    token = reader.token
    client.delete(r.keys.seats, r.keys.seats_version, r.keys.attempt_records)
    assert reader.moved() == []  # read again: empty, under a new token
    assert reader.token != token
    client.flushdb()  # everything lost, the lease too: the same holder takes it again
    assert r.acquire()
    again = r.ensure_seats(spec)  # its copy of the seat names does not hide the lost seats
    assert sorted(p.seat for p in again) == ["eng-1", "eng-2", "eng-3"]
    assert r.ensure_seats(spec) == []  # and none is admitted twice
    assert client.hlen(r.keys.seats) == 3


def test_a_map_an_older_release_left_without_a_version_gets_one_from_its_first_reader(make, client) -> None:  # type: ignore[no-untyped-def]
    r = make()
    spec = swarm_spec(2)
    r.acquire()
    r.ensure_seats(spec)
    client.delete(r.keys.seats_version)  # as an older release left it
    reader = SeatsReader(client, r.keys, "names")
    assert sorted(reader.moved() or []) == ["eng-1", "eng-2"]
    assert client.hget(r.keys.seats_version, "k").decode() == reader.token
    assert reader.moved() is None


def test_a_full_read_of_every_current_attempt_is_not_bounded_by_luas_stack(make, client) -> None:  # type: ignore[no-untyped-def]
    """Before, one ``unpack`` of every seat's attempt failed past about 8,000 seats ('too many
    results to unpack'): the full pass of a large swarm failed every time."""
    from agentihooks_operator.recovery.store.reads import current_attempts

    r = make()
    spec = swarm_spec(9000)
    r.acquire()
    assert len(r.ensure_seats(spec, batch=1000)) == 9000
    found = current_attempts(r._w)
    assert len(found) == 9000 and len({a.seat for a in found}) == 9000
