"""The controller's retention keeps every checkpoint a record names, and counts what it removed.

Real Redis, a real local store. An attempt captured four checkpoints; its newest was damaged, so the
automation resumed from the third (a decision that names it). A retention run keeping one checkpoint
per attempt and nothing for its age removes the first two only: the newest by the rule, the third
because the decision names it. A dry run removes nothing and counts what it would have; a disabled
rule does nothing; a replica without the lease runs nothing.
"""

from __future__ import annotations

from pathlib import Path

from agentihooks_checkpoint.checks import check_content
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_operator.swarm import RetentionSpec
from testsupport.recovery import observe

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)


def damage(root: Path, digest: str) -> None:
    [path] = [p for p in root.rglob("*") if p.is_file() and str(p).endswith(object_key(digest))]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def with_rule(spec, **rule):  # type: ignore[no-untyped-def]
    base = {"keep_newest": 1, "keep_younger_seconds": 0, "grace_seconds": 600}
    return spec.model_copy(update={"retention": RetentionSpec(**(base | rule))})


def resumed_from_the_third(make, spec, checkpoint, store):  # type: ignore[no-untyped-def]
    r = make()
    first = r.ensure_seats(spec)[0].execution_id
    r.report_session(first, "sess-1")
    built = [checkpoint(first, session_id="sess-1", records=4 + n) for n in range(1, 5)]
    earlier = {i.digest for b in built[:3] for i in check_content(b.record)}
    damage(store.root, next(i.digest for i in check_content(built[3].record) if i.digest not in earlier))
    report = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"}))
    [decision] = report.decisions
    assert decision.checkpoint == built[2].checkpoint_id
    return r, built


def listed(store) -> set[str]:  # type: ignore[no-untyped-def]
    return {c.checkpoint_id for c in store.list_checkpoints(SCOPE)}


def test_a_named_checkpoint_is_kept_and_the_run_is_counted(make, spec, checkpoint, store, client) -> None:  # type: ignore[no-untyped-def]
    r, built = resumed_from_the_third(make, spec, checkpoint, store)
    dry = r.collect_garbage(with_rule(spec, dry_run=True))
    assert (
        dry is not None
        and dry.dry_run
        and sorted(dry.checkpoints) == sorted(b.checkpoint_id for b in built[:2])
    )
    assert listed(store) == {b.checkpoint_id for b in built}  # a dry run removes nothing
    done = r.collect_garbage(with_rule(spec))
    assert done is not None and sorted(done.checkpoints) == sorted(b.checkpoint_id for b in built[:2])
    assert listed(store) == {built[2].checkpoint_id, built[3].checkpoint_id}
    counters = {k.decode(): int(v) for k, v in client.hgetall(r.keys.recovery_metrics).items()}
    assert counters["retention_checkpoints:dry_run"] == 2
    assert counters["retention_checkpoints:collected"] == 2
    assert r.collect_garbage(with_rule(spec, enabled=False)).checkpoints == []  # type: ignore[union-attr]


def test_only_the_lease_holder_collects(make, spec, checkpoint, store) -> None:  # type: ignore[no-untyped-def]
    _, built = resumed_from_the_third(make, spec, checkpoint, store)
    other = make(holder="ctl-b")
    assert other.collect_garbage(with_rule(spec)) is None
    assert listed(store) == {b.checkpoint_id for b in built}
