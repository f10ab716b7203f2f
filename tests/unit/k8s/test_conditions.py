"""The Swarm's conditions: their standard shape, when they are written, and writers that race.

The API here is a dict with resourceVersions (the edge of a pure unit test);
the real API server's behaviour is in tests/integration/operator/test_conditions_real.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from agentihooks_operator.k8s import conditions, specstatus
from agentihooks_operator.k8s.conditions import READY, Verdict, of_pass, ready
from agentihooks_operator.k8s.errors import ApiError
from testsupport.kstatus import status_of


class Api:
    """get/patch of one Swarm's status with optimistic concurrency, as the API server does."""

    def __init__(self, conds: list[dict[str, Any]] | None = None, *, generation: int = 1) -> None:
        self.obj: dict[str, Any] | None = {
            "metadata": {"name": "s", "namespace": "ns", "resourceVersion": "1", "generation": generation},
            "status": {"conditions": conds or [], "observedGeneration": generation},
        }
        self.patches = 0
        self.before_patch: list[Any] = []  # callables run between a read and the next patch

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.obj)

    def patch(self, resource: str, namespace: str, name: str, body: dict[str, Any], sub: str = "") -> None:
        assert sub == "status"
        if self.before_patch:
            self.before_patch.pop(0)()
        if self.obj is None:
            raise ApiError(404, "PATCH", "swarms/s", "NotFound")
        if body["metadata"]["resourceVersion"] != self.obj["metadata"]["resourceVersion"]:
            raise ApiError(409, "PATCH", "swarms/s", "Conflict", "the object has been modified")
        self.obj["status"].update(body["status"])
        self.obj["metadata"]["resourceVersion"] = str(int(self.obj["metadata"]["resourceVersion"]) + 1)
        self.patches += 1

    def cond(self, kind: str) -> dict[str, Any]:
        assert self.obj is not None
        return conditions.held_in(self.obj)[kind]


def put(api: Api, verdicts: list[Verdict], generation: int | None = 1, **kw: Any) -> bool:
    return conditions.put(api, "ns", "s", verdicts, generation=generation, **kw)  # type: ignore[arg-type]


def test_a_condition_has_the_standard_shape() -> None:
    api = Api()
    assert put(api, [ready(True, "Reconciled", "fine")], generation=4)
    c = api.cond(READY)
    assert set(c) == {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}
    assert (c["status"], c["reason"], c["observedGeneration"]) == ("True", "Reconciled", 4)
    assert c["lastTransitionTime"].endswith("Z")


def test_the_same_verdict_is_not_written_twice() -> None:
    api = Api()
    assert put(api, [ready(True, "Reconciled", "fine")])
    assert not put(api, [ready(True, "Reconciled", "fine")])
    assert api.patches == 1


def test_the_transition_time_moves_only_with_the_status() -> None:
    api = Api(
        [{"type": READY, "status": "True", "reason": "Paused", "message": "p", "lastTransitionTime": "T0"}]
    )
    put(api, [ready(True, "Reconciled", "fine")])
    assert api.cond(READY)["lastTransitionTime"] == "T0"  # same status, another reason
    put(api, [ready(False, "LaunchBlocked", "blocked")])
    assert api.cond(READY)["lastTransitionTime"] != "T0"


def test_other_writers_conditions_are_kept() -> None:
    api = Api([{"type": "SpecValid", "status": "True", "reason": "Valid", "message": "ok"}])
    put(api, [ready(True, "Reconciled", "fine")])
    assert set(conditions.held_in(api.obj)) == {"SpecValid", READY}


def test_a_write_that_raced_another_is_done_again_from_a_fresh_read() -> None:
    api = Api()

    def other_writer() -> None:  # the validate handler writes SpecValid between this read and patch
        assert api.obj is not None
        api.obj["status"]["conditions"].append({"type": "SpecValid", "status": "True"})
        api.obj["metadata"]["resourceVersion"] = "7"

    api.before_patch.append(other_writer)
    assert put(api, [ready(False, "RedisUnavailable", "down")])
    assert set(conditions.held_in(api.obj)) == {"SpecValid", READY}  # neither write was lost


def test_a_write_that_keeps_racing_gives_up_without_writing() -> None:
    api = Api()

    def bump() -> None:
        assert api.obj is not None
        api.obj["metadata"]["resourceVersion"] += "0"

    api.before_patch.extend([bump] * conditions.TRIES)
    assert not put(api, [ready(True, "Reconciled", "fine")])
    assert api.patches == 0


def test_a_swarm_gone_is_no_write_and_other_refusals_are_raised() -> None:
    api = Api()
    api.obj = None
    assert not put(api, [ready(True, "Reconciled", "fine")])
    api = Api()

    def refuse(*_: Any, **__: Any) -> None:
        raise ApiError(403, "PATCH", "swarms/s", "Forbidden")

    api.patch = refuse  # type: ignore[method-assign]
    with pytest.raises(ApiError):
        put(api, [ready(True, "Reconciled", "fine")])


def test_only_over_keeps_what_a_pass_said() -> None:
    api = Api()
    put(api, [ready(False, "LaunchBlocked", "blocked")])
    # the validate handler's Ready=Unknown replaces only an InvalidSpec Ready (or none)
    put(api, specstatus.valid(None, 1), only_over={READY: {specstatus.INVALID}})
    assert api.cond(READY)["reason"] == "LaunchBlocked"
    assert api.cond("SpecValid")["status"] == "True"
    put(api, specstatus.invalid("seat x: no task"))
    assert api.cond(READY)["reason"] == specstatus.INVALID
    put(api, specstatus.valid(None, 2), generation=2, only_over={READY: {specstatus.INVALID}})
    assert (api.cond(READY)["status"], api.cond(READY)["reason"]) == ("Unknown", "Reconciling")


def test_ready_of_a_pass() -> None:
    assert of_pass([], paused=False) == ready(True, "Reconciled", of_pass([], paused=False).message)
    assert of_pass([], paused=True).reason == "Paused"
    v = of_pass([(f"s{i}", "no account") for i in range(5)], paused=True)
    assert (v.status, v.reason) == ("False", "LaunchBlocked")
    assert "seat s0: no account" in v.message and "(and 2 more)" in v.message
    assert "s3" not in v.message


def test_kstatus_reads_the_conditions_as_flux_and_argo_do() -> None:
    api = Api(generation=3)
    put(api, specstatus.invalid("seat x: no task"), generation=3)
    assert status_of(api.obj) == "Failed"
    put(api, specstatus.valid(None, 3), generation=3, only_over={READY: {specstatus.INVALID}})
    assert status_of(api.obj) == "InProgress"  # Ready=Unknown until a pass says more
    put(api, [of_pass([], paused=False)], generation=3)
    assert status_of(api.obj) == "Current"
    put(api, [of_pass([("a", "no grant")], paused=False)], generation=3)
    assert status_of(api.obj) == "InProgress"
    assert api.obj is not None
    api.obj["metadata"]["generation"] = 4  # a new spec not yet observed
    put(api, [of_pass([], paused=False)], generation=3)
    assert status_of(api.obj) == "InProgress"


def test_a_verdict_for_an_older_spec_never_replaces_one_for_a_newer() -> None:
    """A pass that read generation 4 ends after an edit to 5 made the spec invalid: InvalidSpec stays."""
    api = Api(generation=5)
    put(api, specstatus.invalid("seat x: no task"), generation=5, observed=True)
    assert not put(api, [of_pass([], paused=False)], generation=4)
    assert api.cond(READY)["reason"] == specstatus.INVALID
    assert api.obj is not None and api.obj["status"]["observedGeneration"] == 5
    assert status_of(api.obj) == "Failed"
