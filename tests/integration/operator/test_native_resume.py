"""With a real checkpoint store and a native checkpoint, the operator resumes without asking.

The checkpoint is captured by the real capture code into a local store; the
failed attempt held the same native session. The replacement's launch record
carries the native directive (checkpoint, session, watermark) and the fenced
attempt it restores from.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentihooks_checkpoint.directive import Continuity, RestoreOutcome
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from testsupport import kubelet as kl
from testsupport.checkpoints import build_checkpoint
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import eid, fenced, has_events, launch_record, replacement, running_seat


async def test_oom_killed_attempt_resumes_natively(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    store = LocalStore(tmp_path / "checkpoints")
    async with running_operator(cluster, redis_url, catalog=store) as memo:
        spec = swarm_spec(interval=0.2)
        spec["seats"][0]["project"] = "local:fixture"
        await cluster.create_swarm("example", spec)
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        built = await asyncio.to_thread(
            build_checkpoint,
            store,
            StoreScope(swarm="example", task_id="t-1", task_generation=1, namespace=cluster.namespace),
            tmp_path / "work",
            kind="claude",
            checkpoint_id="ckpt-7",
            execution_id=lost,
            compatibility_key="2.1.0",
        )
        assert built.session_id is not None
        runner = await eventually(
            lambda: memo["passes"].get((cluster.namespace, "example")), what="swarm pass"
        )
        await asyncio.to_thread(runner.recovery.report_session, lost, built.session_id)

        await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
        record = await fenced(redis_url, "example", lost)
        assert record.reason == "oom_killed" and record.native_session == built.session_id
        second = await replacement(cluster, "example", 2)  # no choice was made by anyone
        launch = await launch_record(cluster, eid(second))
        assert launch.restore is not None
        assert launch.restore.recovery is Continuity.NATIVE
        assert launch.restore.checkpoint_id == "ckpt-7"
        assert launch.restore.session_id == built.session_id
        assert launch.restore.watermark == built.watermark
        assert launch.restore_from is not None and launch.restore_from.execution_id == lost
        assert launch.registration is not None and launch.registration.projects == ["local:fixture"]
        await has_events(cluster, "Swarm", "example", {"Fenced", "Decided", "Replaced"})
        await has_events(cluster, "Pod", second["metadata"]["name"], {"Replaced"})

        async def recovering() -> bool:
            status = (await cluster.swarm("example")).get("status") or {}
            return status.get("recovering") == 1 and status.get("awaitingDecision") == 0

        await eventually(recovering, what="status counts the seat as recovering until its outcome")

        # The replacement reports what it restored (what the control API does for the worker).
        outcome = RestoreOutcome(
            execution_id=eid(second),
            recovery=Continuity.NATIVE,
            checkpoint_id="ckpt-7",
            session_id=built.session_id,
            watermark=built.watermark,
        )
        await asyncio.to_thread(runner.recovery.report_outcome, eid(second), outcome)
        await has_events(cluster, "Swarm", "example", {"RestoreReported"})
        await has_events(cluster, "Pod", second["metadata"]["name"], {"RestoreReported"})

        async def card_native() -> bool:
            cards = ((await cluster.swarm("example")).get("status") or {}).get("handoffs") or []
            return bool(cards) and cards[0]["continuity"] == "native" and cards[0]["binding"] == "bound"

        await eventually(card_native, what="card shows native continuity")
        status = (await cluster.swarm("example"))["status"]
        assert status["recovering"] == 0 and status["awaitingDecision"] == 0
    assert cluster.count("create", "pods") == 2
