"""The move of one swarm's Redis keys to today's names, step by step (``agentihooks admin migrate-keys``).

:class:`KeyMigration` plans and applies it; the command in :mod:`.admin` prints it. Old keys are
the original swarm v2's ``<root>:swarm:<slug>:<part>`` and an earlier release's
``<root>:swarm:{<slug>}:<part>``; the target is ``<root>:swarm:{<namespace>/<slug>}:<part>``.

On one primary (or under Sentinel) each step is one WATCH/MULTI transaction that re-checks every
lease record: a run killed at any point leaves every key under exactly one name. A Redis Cluster
cannot move a key between slots in a transaction, so there a move is ``RESTORE`` at the new name
then ``DEL`` of the old, after the same lease checks: a run killed between the two leaves an
identical copy under both names, which the next run finds (``same``) and drops. No operator of
this release runs meanwhile (it refuses to start while old keys exist).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import redis
from pydantic import ValidationError

from ..recovery.store.keys import SwarmKeys
from ..recovery.store.layout import glob_literal
from ..recovery.store.records import AttemptRecord

Action = Literal[
    "move", "same", "merge", "raise-epoch", "keep-epoch", "adopt", "drop-stale-lease", "conflict"
]
#: Words printed for each action, dry run first and applied second.
WORDS: dict[Action, tuple[str, str]] = {
    "move": ("would move", "moved"),
    "same": ("would drop (an identical copy exists at the new name)", "dropped (identical copy kept)"),
    "merge": ("would merge into", "merged into"),
    "raise-epoch": ("would raise the epoch at", "raised the epoch at"),
    "keep-epoch": ("would drop (the new name holds a larger or equal epoch)", "dropped (larger epoch kept)"),
    "adopt": ("would move this product's attempt records to", "moved this product's attempt records to"),
    "drop-stale-lease": ("would drop the expired lease record", "dropped the expired lease record"),
    "conflict": ("CONFLICT, left alone:", "CONFLICT, left alone:"),
}
_ROOT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


@dataclass(frozen=True)
class Step:
    """One thing to do with ``source`` (the original's name) and ``target``; ``detail`` says what."""

    action: Action
    source: str
    target: str
    detail: str = ""

    def line(self, applied: bool) -> str:
        word = WORDS[self.action][1 if applied else 0]
        tail = f" ({self.detail})" if self.detail else ""
        if self.action == "drop-stale-lease":
            return f"{word} {self.source}"
        if self.action in ("same", "keep-epoch"):
            return f"{word}: {self.source}{tail}"
        if self.action == "conflict":
            return f"{word} {self.source} / {self.target}{tail}"
        return f"{word}: {self.source} -> {self.target}{tail}"


class LeaseHeld(Exception):
    """A controller holds the swarm's lease: ``key`` is its record, ``holder`` who and at which epoch."""

    def __init__(self, key: str, holder: str) -> None:
        super().__init__(holder)
        self.key = key
        self.holder = holder


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _holder(raw: Any) -> str:
    try:
        owner = json.loads(_text(raw))
        return f"{owner['owner']} (epoch {owner['epoch']})"
    except (ValueError, TypeError, KeyError):
        return f"an unreadable lease record {_text(raw)[:64]!r}"


Write = Callable[[Any], Any]


class KeyMigration:
    """Plans and applies the move of one swarm's keys to ``keys`` (their names today); each write is
    one WATCH/MULTI transaction."""

    def __init__(self, client: redis.Redis, keys: SwarmKeys, *, cluster: bool = False) -> None:
        self.r = client
        self.keys = keys
        #: A Redis Cluster: moves are RESTORE then DEL, never a transaction (see the module).
        self.cluster = cluster
        #: Where old keys live, in the order they move: the original's unbraced names, then (for a
        #: namespaced target) an earlier release's name-only hash tag.
        self.sources: tuple[str, ...] = (keys.unbraced(""),)
        if keys.namespace is not None:
            self.sources += (SwarmKeys(keys.prefix, keys.swarm).braced(""),)
        #: Every lease record that must be free: each old layout's, and the target's.
        self.owners = (*(src + "control-owner" for src in self.sources), keys.control_owner)

    # -- the lease -------------------------------------------------------------------------------
    def _now_ms(self) -> int:
        seconds, micros = self.r.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def _stale(self, key: str) -> bool:
        """The original's lease record left without a time-to-live after its ``expires_at`` passed."""
        if key != self.owners[0] or self.r.pttl(key) != -1:
            return False
        try:
            expires = int(json.loads(_text(self.r.get(key)))["expires_at"])
        except (ValueError, TypeError, KeyError):
            return False
        return expires <= self._now_ms()

    def check_lease(self) -> list[Step]:
        """Raise :class:`LeaseHeld` while a lease is held; a stale original record becomes a step."""
        steps: list[Step] = []
        for key in self.owners:
            raw = self.r.get(key)
            if raw is None:
                continue
            if self._stale(key):
                steps.append(Step("drop-stale-lease", key, key))
                continue
            raise LeaseHeld(key, _holder(raw))
        return steps

    # -- planning --------------------------------------------------------------------------------
    def original_keys(self) -> list[str]:
        """Every key under an old name of this swarm but its lease records, the original's first."""
        out: list[str] = []
        for src in self.sources:
            found = {_text(k) for k in self.r.scan_iter(match=glob_literal(src) + "*", count=500)}
            out += sorted(found - set(self.owners))
        return out

    def _target_of(self, source: str) -> str:
        src = next(p for p in self.sources if source.startswith(p))
        return self.keys.braced(source[len(src) :])

    def _content(self, key: str) -> tuple[str, Any]:
        kind = _text(self.r.type(key))
        readers: dict[str, Callable[[], Any]] = {
            "string": lambda: self.r.get(key),
            "hash": lambda: self.r.hgetall(key),
            "set": lambda: self.r.smembers(key),
            "list": lambda: self.r.lrange(key, 0, -1),
            "zset": lambda: self.r.zrange(key, 0, -1, withscores=True),
            "stream": lambda: self.r.xrange(key),
        }
        return kind, readers[kind]() if kind in readers else None

    def _epoch(self, key: str) -> int | None:
        raw = self.r.get(key)
        try:
            return 0 if raw is None else int(_text(raw))
        except ValueError:
            return None

    def plan_key(self, source: str) -> tuple[Step, Write | None]:
        """The step for one original key and the write that does it (``None``: nothing to write)."""
        target = self._target_of(source)
        if target == self.keys.control_epoch:
            old, new = self._epoch(source), self._epoch(target)
            if old is None or new is None:
                return Step("conflict", source, target, "an epoch that is not an integer"), None
            if old > new:
                return Step("raise-epoch", source, target, f"{new} -> {old}"), lambda p: (
                    p.set(target, old),
                    p.delete(source),
                )
            return Step("keep-epoch", source, target, f"{new} >= {old}"), lambda p: p.delete(source)
        if not self.r.exists(target):
            step = Step("move", source, target, _text(self.r.type(source)))
            return step, partial(self._move, source, target)
        (kind_a, a), (kind_b, b) = self._content(source), self._content(target)
        if kind_a == kind_b and a is not None and a == b:
            return Step("same", source, target, kind_a), lambda p: p.delete(source)
        if kind_a == kind_b == "hash":
            clash = sorted(_text(f) for f in set(a) & set(b) if a[f] != b[f])
            if clash:
                return Step("conflict", source, target, f"hash fields differ: {', '.join(clash[:5])}"), None
            missing = {f: v for f, v in a.items() if f not in b}
            step = Step("merge", source, target, f"{len(missing)} new fields")
            return step, lambda p: (p.hset(target, mapping=missing), p.delete(source))
        return Step("conflict", source, target, f"{kind_a} here, {kind_b} at the new name"), None

    def _ours_in_executions(self) -> dict[str, Any]:
        source = self.keys.braced("executions")
        out: dict[str, Any] = {}
        if _text(self.r.type(source)) != "hash":
            return out
        for field, raw in self.r.hgetall(source).items():
            try:
                AttemptRecord.model_validate_json(raw)
            except ValidationError:
                continue  # the original's AgentRecord (or anything else): not ours, left in place
            out[_text(field)] = raw
        return out

    def plan_adopt(self) -> tuple[Step, Write | None] | None:
        """This product's attempt records kept under ``executions`` by an earlier build, if any."""
        source, target = self.keys.braced("executions"), self.keys.attempt_records
        ours = self._ours_in_executions()
        if not ours:
            return None
        theirs = {_text(f): v for f, v in self.r.hgetall(target).items()}
        clash = sorted(f for f, v in ours.items() if f in theirs and theirs[f] != v)
        if clash:
            return Step("conflict", source, target, f"attempt records differ: {', '.join(clash[:5])}"), None
        step = Step("adopt", source, target, f"{len(ours)} attempt records")
        return step, lambda p: (p.hset(target, mapping=ours), p.hdel(source, *ours))

    def plan(self) -> list[Step]:
        """Everything the migration would do now (raises :class:`LeaseHeld` while a lease is held)."""
        steps = self.check_lease()
        steps += [self.plan_key(k)[0] for k in self.original_keys()]
        adopt = self.plan_adopt()
        return steps + ([adopt[0]] if adopt else [])

    # -- applying ----------------------------------------------------------------------------------
    def _move(self, source: str, target: str, p: Any) -> None:
        """Move one key keeping its value and TTL: RENAMENX, or (a cluster) RESTORE then DEL."""
        if not self.cluster:
            p.renamenx(source, target)
            return
        data, ttl = self.r.dump(source), self.r.pttl(source)
        p.restore(target, max(int(ttl), 0), data)  # refused (BUSYKEY) if the name was taken meanwhile
        p.delete(source)

    def _free(self) -> None:
        for key in self.owners:
            raw = self.r.get(key)
            if raw is not None and not self._stale(key):
                raise LeaseHeld(key, _holder(raw))

    def _transaction(
        self, watch: list[str], compute: Callable[[], tuple[Step, Write | None] | None]
    ) -> Step | None:
        """Plan again under WATCH (the keys and both lease records), then write in MULTI/EXEC.

        A lease taken, or a key changed, between the check and EXEC aborts the write; the
        loop then plans again (and refuses if a lease is now held). On a cluster: the same checks,
        then the writes in order, without a transaction (see the module).
        """
        if self.cluster:
            self._free()
            planned = compute()
            if planned is None:
                return None
            step, write = planned
            if write is not None:
                pipe = self.r.pipeline(transaction=False)
                write(pipe)
                pipe.execute()
            return step
        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(*watch, *self.owners)  # type: ignore[no-untyped-call]
                    self._free()
                    planned = compute()
                    if planned is None:
                        pipe.unwatch()
                        return None
                    step, write = planned
                    if write is None:
                        pipe.unwatch()
                        return step
                    pipe.multi()
                    write(pipe)
                    pipe.execute()
                    return step
                except redis.WatchError:
                    continue

    def apply(self) -> Iterator[Step]:
        """Do every step, yielding each once done (a conflict is yielded and left untouched)."""
        for step in self.check_lease():  # only a stale record of the original's comes back here
            self._transaction([], partial(_drop, step))
            yield step
        for key in self.original_keys():
            target = self._target_of(key)
            result = self._transaction([key, target], partial(self.plan_key, key))
            if result is not None:
                yield result
        source, target = self.keys.braced("executions"), self.keys.attempt_records
        adopted = self._transaction([source, target], self.plan_adopt)
        if adopted is not None:
            yield adopted


def _drop(step: Step) -> tuple[Step, Write]:
    return step, lambda p: p.delete(step.source)
