"""The real node's harness refuses what it cannot do, naming why, and a killed run leaves nothing.

The node touches the whole machine (an address on ``lo``, a bridge, iptables chains, ``kubepods``
cgroups, containerd's shims and mounts), so its failures must be plain and its clean-up complete:

* a second node while one runs is refused with the lock's path and the holder's pid, and the
  refused one's teardown leaves the running node alone;
* the kubelet's port taken on the node address is refused before anything starts, naming the
  port and the process holding it; nothing is left, and once the port is free the node comes up;
* a run killed with a container running (its lock gone with it, its containerd, kubelet, shims,
  mounts, network namespace, chains and cgroups left behind) does not trip the next run, which
  clears all of it, runs a Pod, and leaves nothing behind when it ends.

Each test brings its own node up on the session's control plane (never beside another module's).
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from testsupport.images import PROBE_REF, probe_image
from testsupport.realnode import (
    IMAGES,
    NODE_IP,
    POD_TEMPLATE,
    REPO,
    ROOT,
    NodeUnavailable,
    RealNode,
    clean,
    leftovers,
    why_not,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsUser": 1000}


@pytest.fixture
def plane(control_plane: Any) -> Iterator[Any]:
    reason = why_not()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real-node tier cannot run here: {reason}")
        pytest.skip(f"no real node: {reason}")
    yield control_plane
    with (ROOT / "lock").open("a+") as lock:  # a test that failed half-way: nothing of it stays
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        clean()


def _pod(plane: Any, name: str) -> dict[str, Any]:
    """A probe Pod (busybox, waits until stopped) on the real node, created in ``default``."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            **POD_TEMPLATE,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "probe", "image": PROBE_REF, "imagePullPolicy": "Never", "securityContext": SECURITY}
            ],
        },
    }
    with plane.client() as http:
        r = http.post("/api/v1/namespaces/default/pods", json=pod)
        assert r.status_code == 201, r.text
    return pod


def _running(plane: Any, name: str) -> bool:
    with plane.client() as http:
        r = http.get(f"/api/v1/namespaces/default/pods/{name}")
    statuses = (r.json().get("status") or {}).get("containerStatuses") or [] if r.status_code == 200 else []
    return bool(statuses and "running" in (statuses[0].get("state") or {}))


def _gone(plane: Any, name: str) -> None:
    with plane.client() as http:
        http.delete(f"/api/v1/namespaces/default/pods/{name}", params={"gracePeriodSeconds": "0"})


def _until(check: Callable[[], bool], what: str, within: float = 90.0) -> None:
    """Poll ``check`` until true; a guard against a hang, not a bound on speed."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {within:.0f} s"
        time.sleep(0.3)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_second_node_is_refused_naming_the_holder_and_the_first_runs_on(plane: Any) -> None:
    first = RealNode(plane).up()
    try:
        second = RealNode(plane)
        with pytest.raises(NodeUnavailable, match=rf"another run \(pid {os.getpid()}\) holds the real node"):
            second.up()
        second.down()  # what every caller does after a failed up: here it must touch nothing
        by_hand = subprocess.run([str(REPO / "scripts" / "node.sh"), "clean"], capture_output=True, text=True)
        assert by_hand.returncode == 1, by_hand
        assert f"a run (pid {os.getpid()}) holds" in by_hand.stderr and "nothing cleaned" in by_hand.stderr
        assert all(p.poll() is None for p in first.procs.values()), "the refused node stopped the first"
        first.wait_ready(30)
    finally:
        first.down()
    assert leftovers() == []
    check = subprocess.run([str(REPO / "scripts" / "node.sh"), "check"], capture_output=True, text=True)
    assert check.stdout.strip() == "this machine can host a real node", check


def test_a_taken_kubelet_port_is_named_with_its_holder_and_nothing_is_left(plane: Any) -> None:
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("0.0.0.0", 10250))  # every address: the node's too
    squatter.listen()
    node = RealNode(plane)
    try:
        with pytest.raises(NodeUnavailable) as refused:
            node.up()
        message = str(refused.value)
        assert f"tcp port 10250 on {NODE_IP}" in message and "the kubelet" in message, message
        assert f"pid {os.getpid()} (" in message, message  # the holder, named
        assert "kubelet" not in node.procs and "containerd" not in node.procs  # refused before starting
        node.down()
        assert leftovers() == []
    finally:
        squatter.close()
    RealNode(plane).up().down()  # the port free again: the node comes up (and goes) as usual
    assert leftovers() == []


def test_a_killed_run_leaves_nothing_the_next_run_trips_on(plane: Any) -> None:
    killed = RealNode(plane).up()
    killed.import_image(probe_image(IMAGES))
    _pod(plane, "left-running")
    _until(lambda: _running(plane, "left-running"), "the probe running")
    pids = [p.pid for p in killed.procs.values()]
    shims = [int(ln.split()[0]) for ln in os.popen("pgrep -f containerd-shim-runc-v2").read().splitlines()]
    assert shims, "a running container has its shim"
    # The run dies here: the lock goes with its process; everything the node started stays behind.
    assert killed._lock is not None
    killed._lock.close()
    killed.procs.clear()
    found = leftovers()
    assert any(f.startswith("process") for f in found) and any(f.startswith("mount") for f in found)
    assert any(f.startswith("network namespace") for f in found), found

    node = RealNode(plane).up()  # clears what the killed run left, then starts
    try:
        assert not [p for p in pids + shims if _alive(p)], (
            "the killed run's processes outlived the next start"
        )
        _gone(plane, "left-running")
        node.import_image(probe_image(IMAGES))
        _pod(plane, "after-the-kill")
        _until(lambda: _running(plane, "after-the-kill"), "a Pod on the next node")
        _gone(plane, "after-the-kill")
    finally:
        node.down()
    assert leftovers() == []
