"""The controller's retention runs: which of a swarm's checkpoints are named, and the sweep of its scopes.

The rule itself and the store's side are :mod:`agentihooks_checkpoint.retention`.
Here the controller adds what only it knows: every checkpoint a record in Redis
names (an attempt's directive, a decision's checkpoint and directive, a
verified outcome's checkpoint) is kept whatever its age, and the scopes to sweep
are those of the swarm's attempts (task, task generation, store namespace).
Only the lease holder runs it (it reads the records it guards); a run that finds
the catalog is no store it can delete from does nothing. What was reclaimed is
counted in the swarm's recovery counters (``retention_bytes:<collected|dry_run>``
and ``retention_checkpoints:<...>``, exported as
``agentihooks_retention_reclaimed_bytes_total`` and
``agentihooks_retention_checkpoints_total``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from agentihooks_checkpoint.errors import StoreError
from agentihooks_checkpoint.retention import Collected, RetentionRule, collect
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore

from ..swarm import SwarmSpec
from .context import Ctx

log = logging.getLogger("agentihooks.recovery")


def named_and_scopes(ctx: Ctx) -> tuple[set[str], set[tuple[str, int, str | None]]]:
    """Every checkpoint id a record of the swarm names, and the checkpoint scopes of its attempts."""
    w = ctx.w
    pipe = w.client.pipeline(transaction=False)
    pipe.hgetall(w.keys.attempt_records)
    pipe.hgetall(w.keys.attempt_recoveries)
    pipe.hgetall(w.keys.restore_outcomes)
    records, decisions, outcomes = pipe.execute()
    w.trip()
    named: set[str] = set()
    scopes: set[tuple[str, int, str | None]] = set()
    for raw in records.values():
        rec = _json(raw)
        if "task_id" in rec and "task_generation" in rec:
            scopes.add((str(rec["task_id"]), int(rec["task_generation"]), rec.get("store_namespace")))
        named.update(_ids(rec.get("directive")))
    for raw in [*decisions.values(), *outcomes.values()]:
        rec = _json(raw)
        named.update(_ids(rec.get("directive")))
        for field in ("checkpoint", "checkpoint_id"):
            if isinstance(rec.get(field), str):
                named.add(rec[field])
    return named, scopes


def collect_swarm(ctx: Ctx, spec: SwarmSpec) -> Collected:
    """One retention run over every scope of the swarm, by its ``spec.retention``."""
    r = spec.retention
    total = Collected(dry_run=r.dry_run)
    store = ctx.catalog
    if not r.enabled or not isinstance(store, CheckpointStore):
        return total
    rule = RetentionRule(
        keep_newest=r.keep_newest, keep_younger_s=r.keep_younger_seconds, grace_s=r.grace_seconds
    )
    named, scopes = named_and_scopes(ctx)
    for task_id, generation, namespace in sorted(scopes, key=lambda s: (s[0], s[1], s[2] or "")):
        scope = StoreScope(swarm=ctx.swarm, task_id=task_id, task_generation=generation, namespace=namespace)
        try:
            done = collect(store, scope, rule, named, dry_run=r.dry_run)
        except StoreError as e:  # the next run tries again; nothing half-done is unsafe (pointer first)
            log.warning("retention of task %s stopped: %s", task_id, e)
            continue
        total.checkpoints += done.checkpoints
        total.objects += done.objects
        total.bytes += done.bytes
    mode = "dry_run" if r.dry_run else "collected"
    if total.bytes or total.checkpoints:
        pipe = ctx.w.client.pipeline(transaction=False)
        pipe.hincrby(ctx.w.keys.recovery_metrics, f"retention_bytes:{mode}", total.bytes)
        pipe.hincrby(ctx.w.keys.recovery_metrics, f"retention_checkpoints:{mode}", len(total.checkpoints))
        pipe.execute()
        log.info(
            "retention of swarm %s%s: %d checkpoints, %d objects, %d bytes",
            ctx.w.keys.label,
            " (dry run: nothing removed)" if r.dry_run else "",
            len(total.checkpoints),
            total.objects,
            total.bytes,
        )
    return total


def _json(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _ids(directive: object) -> set[str]:
    if isinstance(directive, dict) and isinstance(directive.get("checkpoint_id"), str):
        return {directive["checkpoint_id"]}
    return set()
