"""Retention: superseded checkpoints are collected by the users' rule; what a kept record lists never is.

Continuous capture commits a checkpoint every few seconds, each a whole one, so
a store would grow without end. :func:`collect` removes, in one scope (a task
generation), the checkpoints the rule does not keep, then the objects no kept
record lists:

* **kept checkpoints**: per attempt, the newest ``keep_newest``; every
  checkpoint named by the controller (a fence, decision, directive or relaunch:
  ``named``); every checkpoint younger than ``keep_younger_s``; every record that
  cannot be read (it is not ours to judge); and anything not committed.
* **a checkpoint is removed pointer first**: once its write-once pointer is gone
  it is no longer listed or offered; then its manifest. A crash in between
  leaves a manifest nothing points to, removed by a later run.
* **mark and sweep**: the objects every remaining record lists (all attempts of
  the scope, whatever their age) are marked; an unmarked object is removed only
  once it is older than ``grace_s``, so the objects a capture in flight uploaded
  before writing its record are never taken (a capture commits within its
  ``checkpoint_seconds``, at most 300 s; the grace is longer).

``dry_run`` removes nothing and reports what would go. This is not the rollback
"cache" the spec warns about: nothing a kept record lists is ever deleted, and a
checkpoint is removed only by the rule, never because space ran short.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from .catalog import CheckpointSummary
from .errors import ObjectMissing, RecordRefused, StoreError
from .layout import CHECKPOINTS, object_key, pointer_key
from .record import RECORD_SIZE_CAP, parse_record
from .scope import StoreScope, safe_segment
from .stores.base import CheckpointStore

OBJECTS = "objects/"


@dataclass(frozen=True)
class RetentionRule:
    keep_newest: int = 10
    keep_younger_s: float = 3600.0
    grace_s: float = 3600.0


@dataclass
class Collected:
    """What one run removed (or, in a dry run, would remove)."""

    checkpoints: list[str] = field(default_factory=list)
    objects: int = 0
    bytes: int = 0
    dry_run: bool = False


def superseded(
    listed: list[CheckpointSummary], named: set[str], rule: RetentionRule, now: float
) -> list[str]:
    """The checkpoint ids ``rule`` lets go (newest first within each attempt)."""
    by_attempt: dict[str, list[CheckpointSummary]] = defaultdict(list)
    for c in listed:
        by_attempt[c.execution_id].append(c)
    out = []
    for rows in by_attempt.values():
        rows.sort(key=lambda c: c.checkpoint_sequence, reverse=True)
        for c in rows[rule.keep_newest :]:
            if c.checkpoint_id in named or _age(c, now) < rule.keep_younger_s:
                continue
            out.append(c.checkpoint_id)
    return out


def collect(
    store: CheckpointStore,
    scope: StoreScope,
    rule: RetentionRule,
    named: set[str],
    *,
    now: float | None = None,
    dry_run: bool = False,
) -> Collected:
    """One retention run over ``scope``; raises :class:`StoreError` when the store cannot delete."""
    now = time.time() if now is None else now
    done = Collected(dry_run=dry_run)
    listed = store.list_checkpoints(scope)
    gone = set(superseded(listed, named, rule, now))
    for cid in sorted(gone):
        try:
            record_key, _ = store.read_pointer(scope, cid)
        except (StoreError, ValueError):
            continue
        if not dry_run:
            store.delete(scope, pointer_key(cid))  # no longer listed or offered from here on
            store.delete(scope, record_key)
        done.checkpoints.append(cid)
    marked = _marked(store, scope, skip=gone)
    for key in store.list_keys(scope, OBJECTS):
        if key in marked:
            continue
        at = store.modified_at(scope, key)
        if at is None or now - at < rule.grace_s:
            continue  # a capture in flight may still list it
        size = store.size_of(scope, key) or 0
        if not dry_run:
            store.delete(scope, key)
        done.objects += 1
        done.bytes += size
    return done


def _marked(store: CheckpointStore, scope: StoreScope, *, skip: set[str]) -> set[str]:
    """Every object a record of ``scope`` lists, but for the records of ``skip`` (being removed).

    Read from the manifests themselves, pointer or not, so a record being committed right now (its
    manifest written, its pointer not yet) keeps its objects too; an unreadable manifest marks
    nothing, and its objects fall to the grace period only."""
    marked: set[str] = set()
    skipped = {safe_segment(cid) for cid in skip}
    for key in store.list_keys(scope, CHECKPOINTS):
        parts = key.split("/")
        if len(parts) != 3 or not parts[2].startswith("manifest-") or parts[1] in skipped:
            continue
        try:
            record = parse_record(store.read_bytes(scope, key, RECORD_SIZE_CAP))
            marked.update(object_key(d) for d in record.artifact_hashes.values())
            marked.update(object_key(e.digest) for e in record.artifacts or [])
            marked.update(object_key(s.digest) for parts in (record.segments or {}).values() for s in parts)
        except (ObjectMissing, StoreError, ValueError, RecordRefused):
            continue
    return marked


def _age(c: CheckpointSummary, now: float) -> float:
    try:
        created = datetime.fromisoformat(c.created_at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0  # unknown age: kept as young
    return now - created
