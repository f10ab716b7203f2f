"""The benchmarks' bare baseline keeps measuring after etcd has compacted the probe Pod's revision.

``StatusProbe`` (bench/support/realplane.py) watched from the Pod's own
resourceVersion; when minutes passed between two probes the API server had
moved its watch window past that revision and ended the watch with 410 Gone,
and the probe came back short. Here the API server is restarted between two
measurements (its new watch cache starts at the store's current revision),
which ends the probe's watch and makes the Pod's own revision too old.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.support.realplane import StatusProbe


async def test_the_status_probe_measures_again_after_etcd_compacted_its_revision(real_cluster: Any) -> None:
    probe = StatusProbe(real_cluster)
    await probe.create()
    assert len(await probe.measure(3)) == 3
    old = (await real_cluster.http.get(probe.path)).json()["metadata"]["resourceVersion"]
    # move the store past the Pod's revision, then restart the API server: its new watch cache begins
    # at the current revision, as an old one's window has moved on after minutes of other changes
    for i in range(5):
        r = await real_cluster.http.post(
            f"/api/v1/namespaces/{real_cluster.namespace}/configmaps",
            json={"metadata": {"name": f"filler-{i}"}, "data": {"i": str(i)}},
        )
        r.raise_for_status()
    await asyncio.to_thread(real_cluster.plane.restart_apiserver)
    # the old revision is gone: a watch from it is refused (what the probe ran into before)
    params = {"watch": "true", "resourceVersion": old, "fieldSelector": f"metadata.name={probe.NAME}"}
    async with real_cluster.http.stream(
        "GET", f"/api/v1/namespaces/{real_cluster.namespace}/pods", params=params
    ) as stream:
        first = await anext(aiter(stream.aiter_lines()))
    assert '"code":410' in first.replace(" ", "") or "too old" in first
    assert len(await probe.measure(3)) == 3
