"""Only a checkpoint whose objects hash to its record is offered or resumed automatically.

An object corrupted in place at its recorded size passes the listing's presence and size checks.
The controller used to offer it, and resume it without asking, into a certain ``corrupt_object``
refusal by the replacement. Here, on a real store, real Redis and the live control API: the newer
checkpoint of a seat has one object rewritten at the same size; the automation resumes from the
older, intact one, the API's listing names that one as the newest usable, and each checkpoint is
hashed once however often it is looked at.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentihooks_checkpoint.checks import check_content
from agentihooks_checkpoint.layout import object_key
from testsupport.control_api import World, make_world

PROJECT = "github.com/example/app"


def corrupt_at_same_size(w: World, digest: str) -> Path:
    [path] = [
        p for p in w.tmp.joinpath("store").rglob("*") if p.is_file() and str(p).endswith(object_key(digest))
    ]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def test_a_same_size_corrupted_checkpoint_is_passed_over_for_the_older_intact_one(
    redis_url: str, tmp_path: Path
) -> None:
    with make_world(redis_url, tmp_path) as w:
        recovery, spec = w.recoveries["swarm-a"], w.specs["swarm-a"]
        eid = w.first["swarm-a"].execution_id
        older = w.checkpoint(eid, records=6, project_id=PROJECT)
        newer = w.checkpoint(eid, records=8, project_id=PROJECT)
        assert newer.record.checkpoint_sequence > older.record.checkpoint_sequence
        shared = {i.digest for i in check_content(older.record)}
        mine = [i for i in check_content(newer.record) if i.digest not in shared]
        assert mine, "the newer checkpoint has objects of its own"
        corrupt_at_same_size(w, mine[0].digest)

        r = w.call("GET", "/v1/swarms/swarm-a/seats/eng-1/checkpoints", w.tokens["operator"])
        assert r.status_code == 200, r.text
        body = r.json()
        listed = {c["checkpoint_id"]: c for c in body["checkpoints"]}
        assert listed[newer.checkpoint_id]["complete"] is True  # by size: still looks complete
        assert body["newest_compatible"] == older.checkpoint_id  # by hash: passed over

        w.fail(paused=False)  # automation on: a native checkpoint of the fenced session resumes at once
        fence = json.loads(w.client.hget(recovery.keys.attempt_fences, eid))
        assert fence["native_session"] == "sess-1"
        decision = json.loads(w.client.hget(recovery.keys.attempt_recoveries, eid))
        assert decision["directive"]["checkpoint_id"] == older.checkpoint_id
        assert decision["directive"]["recovery"] == "native"
        assert decision["directive"]["watermark"] == older.watermark

        verifications = recovery._ctx.verifications
        assert verifications is not None
        runs = verifications.runs
        for _ in range(3):  # cards and listings look again: answered from memory
            recovery.cards(spec)
            w.call("GET", "/v1/swarms/swarm-a/seats/eng-1/checkpoints", w.tokens["operator"])
        assert verifications.runs == runs
        assert runs == 2  # each checkpoint hashed once: the corrupted one, then the intact one


def test_with_only_a_corrupted_checkpoint_nothing_is_resumed_without_asking(
    redis_url: str, tmp_path: Path
) -> None:
    with make_world(redis_url, tmp_path) as w:
        recovery = w.recoveries["swarm-a"]
        eid = w.first["swarm-a"].execution_id
        only = w.checkpoint(eid, project_id=PROJECT)
        corrupt_at_same_size(w, check_content(only.record)[0].digest)
        launched = set(w.launcher.pods)
        w.fail(paused=False)
        waiting = json.loads(w.client.hget(recovery.keys.attempt_recoveries, eid))
        assert (waiting["mode"], waiting["directive"], waiting["replacement"]) == (
            "recovery_pending",
            None,
            None,
        )
        assert set(w.launcher.pods) <= launched  # the fenced Pod retired, no replacement launched
        [card] = recovery.cards(w.specs["swarm-a"])
        assert card.checkpoint is None and card.resume_available is False


def test_a_checkpoint_corrupted_after_it_verified_is_no_longer_offered(
    redis_url: str, tmp_path: Path
) -> None:
    """The user's report: the newest checkpoint verified, then one of its objects was overwritten with
    same-size garbage; it was still offered and auto-resumed (the verdict was remembered for good).
    Now each look re-reads the objects' identities (a stat here) and hashes again when one moved."""
    with make_world(redis_url, tmp_path) as w:
        recovery = w.recoveries["swarm-a"]
        eid = w.first["swarm-a"].execution_id
        older = w.checkpoint(eid, records=6, project_id=PROJECT)
        newer = w.checkpoint(eid, records=8, project_id=PROJECT)
        shared = {i.digest for i in check_content(older.record)}
        mine = [i for i in check_content(newer.record) if i.digest not in shared]

        def newest() -> str:
            r = w.call("GET", "/v1/swarms/swarm-a/seats/eng-1/checkpoints", w.tokens["operator"])
            assert r.status_code == 200, r.text
            return str(r.json()["newest_compatible"])

        assert newest() == newer.checkpoint_id
        verifications = recovery._ctx.verifications
        assert verifications is not None
        hashed = verifications.runs
        assert newest() == newer.checkpoint_id and verifications.runs == hashed  # unchanged: no hashing
        assert verifications.rechecks > 0

        path = corrupt_at_same_size(w, mine[0].digest)  # after it verified
        assert newest() == older.checkpoint_id
        # the moved checkpoint hashed again, and the older one for the first time (never needed before)
        assert verifications.runs == hashed + 2

        w.fail(paused=False)
        decision = json.loads(w.client.hget(recovery.keys.attempt_recoveries, eid))
        assert decision["directive"]["checkpoint_id"] == older.checkpoint_id

        # restored from backup (the same bytes again): it verifies, and is offered again
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
        assert newest() == newer.checkpoint_id
