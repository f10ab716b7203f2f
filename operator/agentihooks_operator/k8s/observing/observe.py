"""Build the recovery core's observations from Pods, Nodes and what Redis says is current.

The attempts to observe come from Redis (``Recovery.current_attempts``),
not from the Pod list: a Pod deleted before any pass saw it is then still
observed, as ``gone``, and fenced. The image-pull grace is counted from the
first pass that saw the attempt waiting on a pull failure; that time lives in
the swarm's ``image-pull-since`` hash (the original keyspace's name), so a
restarted or new lease holder keeps counting from the same moment.

Pods that carry the swarm's label but another ``controller-owner`` value than
the original's ``agentihooks-swarm-<slug>`` are foreign (:func:`split_foreign`):
the pass reports them and never touches them. An attempt whose Pod is foreign
is observed ``pending`` — never fenced, retired or replaced — until its Pod is
this swarm's again.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import redis

from ...recovery.models import AttemptObservation
from ...recovery.store.keys import SwarmKeys
from ...recovery.store.records import AttemptRecord
from ..building.pods import label, owned_by, pod_name
from .classify import Verdict, apply_pull_grace, classify, nothing_runs

#: Annotation value that marks a spawn superseded as a legacy specification (replaced fresh).
SUPERSEDED = (label("superseded"), "legacy-specification")


#: How long the noted stop reasons outlive the last stop noted.
STOPS_TTL_S = 24 * 3600


def pull_since_key(keys: SwarmKeys) -> str:
    return keys.image_pull_since


class PullGrace:
    """First-seen times of image-pull failures, per execution, in Redis (one round trip per pass).

    It also keeps why a held ``stopping`` attempt was asked to stop (``attempt-stops``): its Pod may be
    deleted right after its containers end, before any pass saw them ended, and the attempt, then
    ``gone``, is still fenced with the reason the Pod showed (``evicted``) rather than ``node_lost``.
    """

    def __init__(self, client: redis.Redis, keys: SwarmKeys, clock: Callable[[], int]) -> None:
        self.client = client
        self.key = pull_since_key(keys)
        self.stops_key = keys.attempt_stops
        self.clock = clock

    def first_seen(self, failing: Iterable[str], clear: Iterable[str]) -> dict[str, int]:
        """Record ``failing`` executions not seen failing before, forget ``clear`` ones; first-seen ms."""
        failing, clear = list(failing), list(clear)
        if not failing and not clear:
            return {}
        pipe = self.client.pipeline(transaction=True)
        if clear:
            pipe.hdel(self.key, *clear)
        now = self.clock()
        for eid in failing:
            pipe.hsetnx(self.key, eid, now)
        if failing:
            pipe.hmget(self.key, failing)
        answers = pipe.execute()
        if not failing:
            return {}
        return {eid: int(v) for eid, v in zip(failing, answers[-1], strict=True) if v is not None}

    def stops(self, stopping: Mapping[str, str], ended: Iterable[str], gone: Iterable[str]) -> dict[str, str]:
        """Note ``stopping`` attempts' reasons and forget ``ended`` ones; the noted reasons of ``gone``
        ones. A gone attempt's entry is kept until its fence is surely written (a pass may fail before
        it): the hash expires :data:`STOPS_TTL_S` after its last note."""
        ended, gone = list(ended), list(gone)
        if not stopping and not ended and not gone:
            return {}
        pipe = self.client.pipeline(transaction=True)
        for eid, reason in stopping.items():
            pipe.hsetnx(self.stops_key, eid, reason)
        if stopping:
            pipe.expire(self.stops_key, STOPS_TTL_S)
        if ended:
            pipe.hdel(self.stops_key, *ended)
        if gone:
            pipe.hmget(self.stops_key, gone)
        answers = pipe.execute()
        if not gone:
            return {}
        return {eid: _s(v) for eid, v in zip(gone, answers[-1], strict=True) if v is not None}


def split_foreign(
    pods: Mapping[str, Mapping[str, Any]], swarm: str
) -> tuple[dict[str, Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    """``(ours, foreign)`` by name: foreign Pods lack the swarm's ``controller-owner`` value."""
    ours: dict[str, Mapping[str, Any]] = {}
    foreign: dict[str, Mapping[str, Any]] = {}
    for name, pod in pods.items():
        (ours if owned_by(pod, swarm) else foreign)[name] = pod
    return ours, foreign


def observe(
    attempts: Iterable[AttemptRecord],
    pods: Mapping[str, Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]] | None,
    *,
    grace: PullGrace,
    grace_ms: int,
    node_lost_after_s: float,
    now_ms: int,
    foreign: Collection[str] = frozenset(),
) -> list[AttemptObservation]:
    """One observation per current attempt; ``nodes`` is ``None`` when nodes cannot be listed.

    ``foreign`` names Pods another controller owns: an attempt whose Pod is one of
    them is ``pending`` whatever that Pod shows (it is left alone, never fenced).
    """
    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    verdicts: list[tuple[AttemptRecord, Verdict]] = []
    for attempt in attempts:
        if pod_name(attempt.execution_id) in foreign:
            verdicts.append((attempt, Verdict("pending")))
            continue
        pod = pods.get(pod_name(attempt.execution_id))
        node = None
        if pod is not None and nodes is not None:
            node = nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        verdict = classify(
            pod, node=node, node_known=nodes is not None, now=now, node_lost_after_s=node_lost_after_s
        )
        verdicts.append((attempt, verdict))
    first = grace.first_seen(
        [a.execution_id for a, v in verdicts if v.pull_failure],
        [a.execution_id for a, v in verdicts if not v.pull_failure],
    )
    stopped = grace.stops(
        {a.execution_id: str(v.reason) for a, v in verdicts if v.state == "stopping"},
        [a.execution_id for a, v in verdicts if v.state == "failed"],
        [a.execution_id for a, v in verdicts if v.state == "gone"],
    )
    out: list[AttemptObservation] = []
    for attempt, verdict in verdicts:
        graced = apply_pull_grace(
            verdict, first_seen_ms=first.get(attempt.execution_id), now_ms=now_ms, grace_ms=grace_ms
        )
        if graced.state == "gone" and attempt.execution_id in stopped:
            graced = Verdict("gone", stopped[attempt.execution_id])  # type: ignore[arg-type]
        out.append(
            AttemptObservation(
                execution_id=attempt.execution_id,
                seat=attempt.seat,
                generation=attempt.generation,
                state=graced.state,
                reason=graced.reason,
                superseded_legacy=_superseded(pods.get(pod_name(attempt.execution_id))),
                proven=graced.state == "failed"
                and graced.reason != "node_lost"
                and nothing_runs(pods.get(pod_name(attempt.execution_id))),
            )
        )
    return out


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _superseded(pod: Mapping[str, Any] | None) -> bool:
    """Whether the Pod carries the legacy-specification superseded annotation."""
    annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(SUPERSEDED[0]) == SUPERSEDED[1])
