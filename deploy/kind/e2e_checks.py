#!/usr/bin/env python3
"""End-to-end recovery checks against the kind cluster that deploy/kind/up.sh prepared.

Each check breaks one worker of the ``e2e`` Swarm the way a real cluster does — the container
OOM-killed, the Pod evicted through the Eviction API, its node stopped, an image that never pulls —
then waits until the controller fenced the attempt with the expected reason, answers a pending
decision with ``fresh`` (the stand-in agent never captures a native session), and requires exactly
one replacement Pod with the next generation and a reported continuity. It prints one JSON line.

Only the standard library and the ``kubectl`` / ``docker`` commands are used, so the script runs on
a laptop without this project installed. The pure functions at the top are unit-tested
(tests/unit/chart/test_kind_checks.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

DOMAIN = "swarm.agentihooks.io"
SWARM = "e2e"
BAD_IMAGE_SWARM = "e2e-image"
EXPECTED_REASON = {
    "oom": "oom_killed",
    "evict": "evicted",
    "node-loss": "node_lost",
    "bad-image": "image_pull",
}
CONTINUITIES = {"native", "reconstructed", "fresh"}
AWAITING = "awaiting decision"
BOUND = "bound"
# Run with `sh -c DECIDE_SCRIPT SWARM SEAT CHOICE` in an operator Pod: the CLI takes the Pod's token.
DECIDE_SCRIPT = (
    'AGENTIHOOKS_TOKEN="$AGENTIHOOKS_OPERATOR_TOKEN" exec agentihooks swarm "$0" restore-decision "$1" "$2"'
)

T = TypeVar("T")


class CheckFailed(Exception):
    """A check saw something other than exactly one replacement with a reported continuity."""


# -- pure helpers (unit-tested) ------------------------------------------------------------------
def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("labels") or {}


def seat_of(pod: Mapping[str, Any]) -> str | None:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    return annotations.get(f"{DOMAIN}/seat")


def generation_of(pod: Mapping[str, Any]) -> int:
    return int(_labels(pod).get(f"{DOMAIN}/generation", "0"))


def seat_pods(pods: Iterable[Mapping[str, Any]], swarm: str, seat: str) -> list[Mapping[str, Any]]:
    """The seat's worker Pods, oldest generation first."""
    mine = [p for p in pods if _labels(p).get(f"{DOMAIN}/swarm") == swarm and seat_of(p) == seat]
    return sorted(mine, key=generation_of)


def is_running(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    return all(
        c.get("ready") or c.get("state", {}).get("running") for c in status.get("containerStatuses") or []
    )


def replacements(
    pods: Iterable[Mapping[str, Any]], swarm: str, seat: str, after: int
) -> list[Mapping[str, Any]]:
    """Pods of the seat with a generation above the failed attempt's."""
    return [p for p in seat_pods(pods, swarm, seat) if generation_of(p) > after]


def running_replacements(
    pods: Iterable[Mapping[str, Any]], swarm: str, seat: str, after: int
) -> list[Mapping[str, Any]] | None:
    """The replacements once every one of them runs, else ``None`` (keep waiting)."""
    found = replacements(pods, swarm, seat, after)
    return found if found and all(is_running(p) for p in found) else None


def step_after_fence(card: Mapping[str, Any] | None) -> str | None:
    """``decide`` when the card awaits a choice, ``replaced`` once it is bound, ``None`` meanwhile."""
    if card is None:
        return None
    if card.get("binding") == AWAITING:
        return "decide"
    if card.get("binding") == BOUND or card.get("successor"):
        return "replaced"
    return None


def reported(card: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The card once the replacement reported its continuity, else ``None``."""
    return card if card and card.get("continuity") in CONTINUITIES else None


def execution_of(pod: Mapping[str, Any]) -> str:
    return str(_labels(pod).get(f"{DOMAIN}/execution-id", ""))


def card_for(status: Mapping[str, Any], seat: str, execution_id: str) -> Mapping[str, Any] | None:
    """The seat's handoff card for the fenced attempt ``execution_id`` (cards carry the fenced id)."""
    for card in status.get("handoffs") or []:
        if card.get("seat") == seat and card.get("execution_id") == execution_id:
            return dict(card)
    return None


def verdict(
    scenario: str, card: Mapping[str, Any], new_pods: list[Mapping[str, Any]], failed: int
) -> dict[str, Any]:
    """The check's result line; :class:`CheckFailed` names what is wrong."""
    want = EXPECTED_REASON[scenario]
    if card.get("reason") != want:
        raise CheckFailed(f"{scenario}: the fence reason is {card.get('reason')!r}, expected {want!r}")
    if len(new_pods) != 1:
        names = [p["metadata"]["name"] for p in new_pods]
        raise CheckFailed(f"{scenario}: expected exactly one replacement, found {len(new_pods)}: {names}")
    if generation_of(new_pods[0]) != failed + 1:
        raise CheckFailed(
            f"{scenario}: the replacement has generation {generation_of(new_pods[0])}, not {failed + 1}"
        )
    continuity = card.get("continuity")
    if continuity not in CONTINUITIES:
        raise CheckFailed(f"{scenario}: no continuity reported (card says {continuity!r})")
    return {
        "scenario": scenario,
        "reason": want,
        "replacements": 1,
        "replacement": new_pods[0]["metadata"]["name"],
        "generation": failed + 1,
        "continuity": continuity,
    }


# -- cluster access ------------------------------------------------------------------------------
class Cluster:
    def __init__(self, context: str, namespace: str, release: str, cluster: str, worker_image: str) -> None:
        self.context, self.namespace, self.release = context, namespace, release
        self.cluster, self.worker_image = cluster, worker_image

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        cmd = ["kubectl", "--context", self.context, "-n", self.namespace, *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120, check=False)
        if check and proc.returncode != 0:
            raise CheckFailed(f"kubectl {' '.join(args[:3])} failed: {proc.stderr.strip()}")
        return proc.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def pods(self) -> list[Mapping[str, Any]]:
        items: list[Mapping[str, Any]] = self.json("get", "pods", "-l", f"{DOMAIN}/swarm")["items"]
        return items

    def swarm_status(self, swarm: str) -> Mapping[str, Any]:
        status: Mapping[str, Any] = self.json("get", "swarm", swarm).get("status") or {}
        return status

    def decide(self, swarm: str, seat: str, choice: str) -> str:
        """`agentihooks swarm SWARM restore-decision SEAT CHOICE` inside an operator Pod, as the operator.

        The CLI reads AGENTIHOOKS_CONTROL_URL, which the chart sets; its token comes from the Pod's own
        AGENTIHOOKS_OPERATOR_TOKEN (mounted from the Secret), so no credential crosses this machine.
        """
        deployment = f"deploy/{self.release}-agentihooks-recovery"
        return self.kubectl("exec", deployment, "--", "sh", "-c", DECIDE_SCRIPT, swarm, seat, choice)


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float, every_s: float = 2.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)


# -- the four failures ---------------------------------------------------------------------------
def _oom(c: Cluster, pod: Mapping[str, Any]) -> None:
    # Grow past the LimitRange's 384Mi; with cgroup v2 the kernel kills the whole container (OOMKilled).
    hog = "b=[]\nwhile True: b.append(bytearray(64 << 20))"
    c.kubectl("exec", pod["metadata"]["name"], "--", "python3", "-c", hog, check=False)


def _evict(c: Cluster, pod: Mapping[str, Any]) -> None:
    name = pod["metadata"]["name"]
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": c.namespace},
    }
    c.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{c.namespace}/pods/{name}/eviction",
        "-f",
        "-",
        stdin=json.dumps(body),
    )


def _stop_node(c: Cluster, pod: Mapping[str, Any]) -> str:
    node = pod["spec"]["nodeName"]
    if not node.startswith(c.cluster):
        raise CheckFailed(f"node-loss: {node} is not a node of kind cluster {c.cluster}")
    subprocess.run(["docker", "stop", node], check=True, capture_output=True, timeout=120)
    return str(node)


def run(c: Cluster, scenario: str, timeout_s: float) -> dict[str, Any]:
    swarm, seat = (BAD_IMAGE_SWARM, "pull") if scenario == "bad-image" else (SWARM, scenario)
    stopped_node: str | None = None
    if scenario == "bad-image":
        c.kubectl("apply", "-f", "-", stdin=json.dumps(_bad_image_swarm(c.worker_image)))
        pod = wait_for(
            "the bad-image worker Pod", lambda: next(iter(seat_pods(c.pods(), swarm, seat)), None), 120
        )
    else:
        pod = wait_for(
            f"a running worker for seat {seat}",
            lambda: next((p for p in reversed(seat_pods(c.pods(), swarm, seat)) if is_running(p)), None),
            300,
        )
    failed, execution = generation_of(pod), execution_of(pod)
    try:
        if scenario == "oom":
            _oom(c, pod)
        elif scenario == "evict":
            _evict(c, pod)
        elif scenario == "node-loss":
            stopped_node = _stop_node(c, pod)
        # The card reads "recovering" until the controller decided; then "awaiting decision" (a choice
        # is needed) or it is bound to an automatic replacement.
        next_step = wait_for(
            f"a {EXPECTED_REASON[scenario]} handoff card for {seat} that is decided or awaits a choice",
            lambda: step_after_fence(card_for(c.swarm_status(swarm), seat, execution)),
            timeout_s,
        )
        if next_step == "decide":
            if scenario == "bad-image":  # fix the image first, or the replacement cannot start either
                c.kubectl(
                    "patch",
                    "swarm",
                    swarm,
                    "--type=merge",
                    "-p",
                    json.dumps({"spec": {"image": c.worker_image}}),
                )
            c.decide(swarm, seat, "fresh")
        wait_for(
            "a running replacement",
            lambda: running_replacements(c.pods(), swarm, seat, failed),
            timeout_s,
        )
        card = wait_for(
            "a reported continuity",
            lambda: reported(card_for(c.swarm_status(swarm), seat, execution)),
            timeout_s,
        )
        # Let a few more passes run: a duplicate replacement would show up here.
        time.sleep(15)
        return verdict(scenario, card, replacements(c.pods(), swarm, seat, failed), failed)
    finally:
        if stopped_node:
            subprocess.run(["docker", "start", stopped_node], check=False, capture_output=True, timeout=120)
        if scenario == "bad-image":
            c.kubectl("delete", "swarm", swarm, "--ignore-not-found", "--wait=false", check=False)


def _bad_image_swarm(good_image: str) -> dict[str, Any]:
    repository = good_image.rsplit(":", 1)[0]
    return {
        "apiVersion": "agentihooks.io/v1alpha1",
        "kind": "Swarm",
        "metadata": {"name": BAD_IMAGE_SWARM},
        "spec": {
            "image": f"{repository}:does-not-exist",
            "harness": {"name": "claude", "command": ["sleep", "infinity"]},
            "seats": [
                {"name": "pull", "project": "local:e2e", "task": {"id": "task-pull", "text": "Never starts."}}
            ],
            "recovery": {"automation": True, "imagePullGraceSeconds": 20, "passIntervalSeconds": 2},
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one kind end-to-end recovery check.")
    parser.add_argument("scenario", choices=sorted(EXPECTED_REASON))
    parser.add_argument("--context", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--release", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--worker-image", required=True)
    parser.add_argument("--timeout", type=float, default=420.0, help="seconds per waiting step")
    args = parser.parse_args(argv)
    cluster = Cluster(args.context, args.namespace, args.release, args.cluster, args.worker_image)
    try:
        result = run(cluster, args.scenario, args.timeout)
    except CheckFailed as e:
        print(json.dumps({"scenario": args.scenario, "ok": False, "error": str(e)}))
        return 1
    print(json.dumps({**result, "ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
