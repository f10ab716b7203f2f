"""A replacement launched by an API decision while a pass is running is not lost to that pass.

Found by the ledger page's end-to-end test on a loaded CI machine: the master's decision was
accepted and its replacement launched in the API's thread while the holder's pass was between
reading the Pods and reconciling. The pass had read the Pods before the replacement's Pod
existed; the core then read the journal after the launch had finished, saw nothing in flight
and fenced the brand-new attempt as ``node_lost``: a second failure, a second fence, a seat back
to awaiting a decision. Here the interleaving is made deterministic, on the real control plane
with the real operator: the replacement's create is held until a pass (full or incremental) has
read the Pods without it, and that pass is held, before it reads the journal, until the launch
has finished.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from agentihooks_operator.recovery.errors import RecoveryRefused
from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.recovery import keys_of

from .conftest import swarm_spec
from .flows import eid, fence, fenced, gen, replacement, running_seat


def _decide(recovery: Any, execution_id: str) -> None:
    """The master's ``fresh``, as the API applies it (in its own thread), once the seat awaits it."""
    deadline = time.monotonic() + 60
    while True:
        try:
            recovery.decide(execution_id, "fresh", "operator")
            return
        except RecoveryRefused as e:
            if e.reason != "not_pending" or time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # fenced, the decision step not yet written


async def test_a_replacement_launched_by_a_decision_during_a_pass_is_not_fenced(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    key = (cluster.namespace, "example")
    async with running_operator(cluster, redis_url, operator_id="op-a") as memo:
        await cluster.create_swarm("example", swarm_spec(interval=0.2))
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
        await fenced(redis_url, "example", lost)
        runner = await eventually(lambda: memo["passes"].get(key), what="the holder's pass")
        ctx = runner.recovery._ctx

        create_go, pass_read, pass_go = threading.Event(), threading.Event(), threading.Event()
        launch: Callable[[Any], Any] = ctx.launcher.launch

        def held_launch(plan: Any) -> Any:
            if plan.generation == 2:
                create_go.wait(60)
            return launch(plan)

        recheck = runner._recheck_gone

        def held_recheck(attempts: list[Any], observations: list[Any], observe_again: Any) -> Any:
            # Every pass, full or incremental, comes here after its Pod reads and before the
            # journal is read: the window the lost launch fell into.
            new = {a.execution_id for a in attempts if a.generation == 2}
            if not pass_read.is_set() and any(o.execution_id in new for o in observations):
                pass_read.set()  # this pass observed the replacement before its Pod existed
                pass_go.wait(60)
            return recheck(attempts, observations, observe_again)

        ctx.launcher.launch = held_launch
        runner._recheck_gone = held_recheck
        deciding = threading.Thread(target=_decide, args=(runner.recovery, lost))
        try:
            deciding.start()
            await eventually(
                pass_read.is_set, timeout=60, what="a pass that read the Pods while the launch is held"
            )
            create_go.set()
            await eventually(
                lambda: not deciding.is_alive(), timeout=60, what="the decision's launch finished"
            )
            work = keys_of(client, "example").recovery_work
            second = await replacement(cluster, "example", 2)
            new = eid(second)
            assert client.hget(work, new) is None, "the launch is over: nothing left in flight"
        finally:
            create_go.set()
            pass_go.set()
        # the held pass goes on, and later passes too: the new attempt is not lost
        done = memo["results"].get(key)
        await eventually(
            lambda: memo["results"].get(key) is not done, timeout=60, what="the held pass ending"
        )
        for _ in range(3):
            last = memo["results"].get(key)
            await eventually(
                lambda last=last: memo["results"].get(key) is not last, timeout=60, what="a next pass"
            )
        assert fence(redis_url, "example", new) is None, "the replacement was fenced as lost"
        await kubelet.set_status(second["metadata"]["name"], kl.running(), node_name="kind-worker")
        assert [gen(p) for p in await cluster.pods("example")] == [2]
    client.close()
    assert cluster.count("create", "pods") == 2
