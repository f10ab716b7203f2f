"""Retention on a real local store and a real S3 API (moto server, boto3).

Five checkpoints of one attempt and two of another: the rule keeps each attempt's newest N, every
checkpoint the controller names and every young one; the rest are removed pointer first, and their
objects once no remaining record lists them and the grace period passed. Every kept checkpoint still
verifies (no object it lists was deleted), an object shared with a kept checkpoint stays, an object a
capture in flight uploaded (no record yet, or a manifest without its pointer) stays through the grace
period, and a dry run removes nothing but says what would go.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from agentihooks_checkpoint.checks import check_content
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.retention import OBJECTS, RetentionRule, collect
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.validator import Validator
from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint

SCOPE = StoreScope(swarm="example", task_id="task-1", task_generation=1)
LATER = 2 * 3600.0  # the run happens two hours after the captures
RULE = RetentionRule(keep_newest=2, keep_younger_s=3600, grace_s=3600)


@pytest.fixture
def store(any_store: CheckpointStore) -> CheckpointStore:
    return any_store


def captures(store: CheckpointStore, tmp_path: Path) -> tuple[list[BuiltCheckpoint], list[BuiltCheckpoint]]:
    a = [
        build_checkpoint(store, SCOPE, tmp_path / "a", checkpoint_id=f"a-{n}", sequence=n,
                         execution_id="exe-a", session_id="s-a", records=4 + n)
        for n in range(1, 6)
    ]  # fmt: skip
    b = [
        build_checkpoint(store, SCOPE, tmp_path / "b", checkpoint_id=f"b-{n}", sequence=10 + n,
                         execution_id="exe-b", execution_generation=2, session_id="s-b", records=4 + n)
        for n in range(1, 3)
    ]  # fmt: skip
    return a, b


def ids(store: CheckpointStore) -> set[str]:
    return {c.checkpoint_id for c in store.list_checkpoints(SCOPE)}


def verifies(store: CheckpointStore, built: BuiltCheckpoint) -> bool:
    r = built.record
    v = Validator().verify(
        store, SCOPE, built.checkpoint_id, execution_id=r.authority.execution_id,
        execution_generation=r.authority.execution_generation,
    )  # fmt: skip
    return v.ok


def test_the_rule_keeps_the_newest_the_named_and_the_young(store: CheckpointStore, tmp_path: Path) -> None:
    a, b = captures(store, tmp_path)
    objects_before = len(store.list_keys(SCOPE, OBJECTS))
    done = collect(store, SCOPE, RULE, named={"a-1"}, now=time.time() + LATER)
    assert sorted(done.checkpoints) == ["a-2", "a-3"]  # a-1 is named, a-4/a-5 and b-* are the newest
    assert ids(store) == {"a-1", "a-4", "a-5", "b-1", "b-2"}
    for built in (a[0], a[3], a[4], *b):
        assert verifies(store, built), built.checkpoint_id  # nothing a kept record lists was taken
    assert done.objects > 0 and done.bytes > 0
    assert len(store.list_keys(SCOPE, OBJECTS)) == objects_before - done.objects
    kept_digests = {i.digest for x in (a[0], a[3], a[4], *b) for i in check_content(x.record)}
    gone = {i.digest for x in (a[1], a[2]) for i in check_content(x.record)} - kept_digests
    assert gone and all(store.size_of(SCOPE, object_key(d)) is None for d in gone)
    shared = {i.digest for x in (a[1], a[2]) for i in check_content(x.record)} & kept_digests
    assert all(store.size_of(SCOPE, object_key(d)) is not None for d in shared)

    again = collect(store, SCOPE, RULE, named={"a-1"}, now=time.time() + LATER)
    assert again.checkpoints == [] and again.objects == 0  # nothing left to take


def test_young_checkpoints_and_objects_in_flight_stay(store: CheckpointStore, tmp_path: Path) -> None:
    captures(store, tmp_path)
    upload = tmp_path / "in-flight"
    upload.write_bytes(b"an object a capture uploaded before its record")
    store.write_file(SCOPE, object_key("ab" * 32), upload)
    done = collect(store, SCOPE, RULE, named=set(), now=time.time())  # everything is young
    assert done.checkpoints == [] and done.objects == 0
    assert store.size_of(SCOPE, object_key("ab" * 32)) is not None
    later = collect(store, SCOPE, RULE, named=set(), now=time.time() + LATER)
    assert store.size_of(SCOPE, object_key("ab" * 32)) is None  # unlisted and past the grace period
    assert later.objects >= 1


def test_a_dry_run_removes_nothing(store: CheckpointStore, tmp_path: Path) -> None:
    captures(store, tmp_path)
    keys = sorted(store.list_keys(SCOPE, ""))
    done = collect(store, SCOPE, RULE, named=set(), now=time.time() + LATER, dry_run=True)
    assert done.dry_run and sorted(done.checkpoints) == ["a-1", "a-2", "a-3"] and done.bytes > 0
    assert sorted(store.list_keys(SCOPE, "")) == keys
