"""A simulated kubelet against the real API server: a Node, its Lease, bindings and Pod statuses.

What a kubelet does that the operator can see, through the same API calls:
it registers a Node and keeps its Lease in ``kube-node-lease`` renewed (the
node lifecycle controller of kube-controller-manager decides readiness from
that), binds Pods to its Node with the ``binding`` subresource (there is no
scheduler here), writes container states through ``pods/<name>/status``, and
finishes a graceful Pod deletion once it "stopped" the containers. When it
stops renewing (node loss), the real controller marks the Node NotReady,
taints it and evicts its Pods, and those Pods stay Terminating, as on a
cluster whose node is gone. It speaks as the admin identity (a real kubelet's
``system:node:<name>`` identity and NodeRestriction are not what is under
test). The test suite uses it directly (``testsupport.node`` re-exports it,
with status documents from ``testsupport.kubelet``); the demo's kubelet
(:mod:`agentihooks_demo.kubelet`) uses it through :class:`RealApi`, which
also runs its worker processes, on ``--control-plane`` and ``--evidence``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from .controlplane import ControlPlane
from .podstatus import NODE

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
MERGE = {"Content-Type": "application/merge-patch+json"}


def _now(micro: bool = False) -> str:
    now = datetime.now(tz=UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if micro else now.strftime("%Y-%m-%dT%H:%M:%SZ")


class RealKubelet:
    """One simulated kubelet for a namespace; it may run several Nodes."""

    def __init__(
        self,
        plane: ControlPlane,
        namespace: str,
        *,
        renew_seconds: float = 1.0,
        stop_seconds: float = 1.0,
        status_beats: int = 10,
    ) -> None:
        self.plane = plane
        #: Every this many Lease renewals the Node's Ready condition is posted too (a kubelet's node
        #: status heartbeat); 1 keeps a node Ready for a controller that sees the status but not the
        #: Lease (the fault campaign: after an API server restart its node lifecycle controller kept
        #: marking a healthy node Unknown between status posts, every 10 s).
        self.status_beats = status_beats
        #: How long a deleted Pod's container takes to stop before the Pod is removed.
        self.stop_seconds = stop_seconds
        #: Called with a deleted Pod before its container's exit is written (the demo stops the process).
        self.before_stop: Callable[[dict[str, Any]], Awaitable[None]] | None = None
        self.namespace = namespace
        self.renew_seconds = renew_seconds
        self._http = plane.async_client()
        self._alive: dict[str, asyncio.Task[None]] = {}
        self._nodes: set[str] = set()
        self._reaper = asyncio.create_task(self._reap_forever())

    async def close(self) -> None:
        for task in [self._reaper, *self._alive.values()]:
            task.cancel()
        for task in [self._reaper, *self._alive.values()]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for node in self._nodes:  # a node left behind would count toward the next test's zone health
            with contextlib.suppress(httpx.HTTPError):
                await self._http.delete(f"/api/v1/nodes/{node}")
        await self._http.aclose()

    def _pod_path(self, name: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{name}"

    # -- nodes -----------------------------------------------------------------------------------
    async def put_node(self, name: str, *, ready: str = "True", since: datetime | None = None) -> None:
        """``ready="True"``: the Node is registered and heartbeating. Otherwise its kubelet goes silent
        (the node lifecycle controller then marks it NotReady/Unknown, as on a cluster)."""
        if ready != "True":
            await self.stop_heartbeat(name)
            return
        if name in self._alive:
            return
        r = await self._http.get(f"/api/v1/nodes/{name}")
        if r.status_code == 404:
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
                },
            }
            r = await self._http.post("/api/v1/nodes", json=body)
            if r.status_code not in (201, 409):
                r.raise_for_status()
        self._nodes.add(name)
        await self._post_ready(name)
        self._alive[name] = asyncio.create_task(self._heartbeat(name))

    async def _post_ready(self, name: str) -> None:
        now = _now()
        conditions = [
            {
                "type": t,
                "status": "False",
                "reason": f"KubeletHas{r}",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
                "message": f"kubelet has {r}",
            }
            for t, r in (
                ("MemoryPressure", "SufficientMemory"),
                ("DiskPressure", "NoDiskPressure"),
                ("PIDPressure", "SufficientPID"),
            )
        ]
        conditions.append(
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
                "message": "kubelet is posting ready status",
            }
        )
        status = {
            "conditions": conditions,
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        }
        r = await self._http.patch(f"/api/v1/nodes/{name}/status", json={"status": status}, headers=MERGE)
        r.raise_for_status()

    async def _renew(self, name: str) -> None:
        body: dict[str, Any] = {
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _now(micro=True)}
        }
        r = await self._http.patch(f"{LEASES}/{name}", json=body, headers=MERGE)
        if r.status_code == 404:
            node = (await self._http.get(f"/api/v1/nodes/{name}")).json()
            body["metadata"] = {
                "name": name,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
                ],
            }
            body |= {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
            r = await self._http.post(LEASES, json=body)
        r.raise_for_status()

    async def _heartbeat(self, name: str) -> None:
        beats = 0
        loop = asyncio.get_running_loop()
        renewed = loop.time()
        while True:
            with contextlib.suppress(httpx.HTTPError):
                await self._renew(name)
                beats += 1
                # The Ready condition's heartbeat, less often than the Lease; and at once after a gap
                # (the API server was away, or this loop was held up): the node lifecycle controller
                # may have marked the node Unknown meanwhile, and a kubelet that reaches it again
                # says Ready straight away rather than up to ten beats later.
                late = loop.time() - renewed > 3 * self.renew_seconds
                renewed = loop.time()
                if beats % self.status_beats == 0 or late:
                    await self._post_ready(name)
            await asyncio.sleep(self.renew_seconds)

    async def stop_heartbeat(self, name: str) -> None:
        task = self._alive.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def delete_node(self, name: str) -> None:
        await self.stop_heartbeat(name)
        r = await self._http.delete(f"/api/v1/nodes/{name}")
        if r.status_code != 404:
            r.raise_for_status()

    # -- pods ------------------------------------------------------------------------------------
    async def bind(self, name: str, node: str) -> None:
        pod = (await self._http.get(self._pod_path(name))).json()
        if pod.get("spec", {}).get("nodeName"):
            return
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        r = await self._http.post(self._pod_path(name) + "/binding", json=body)
        if r.status_code == 409:  # bound meanwhile (a kube-scheduler runs beside a real node): to us?
            pod = (await self._http.get(self._pod_path(name))).json()
            if pod.get("spec", {}).get("nodeName") == node:
                return
        r.raise_for_status()

    async def set_status(self, name: str, status: dict[str, Any], *, node_name: str | None = None) -> None:
        """Bind (when ``node_name`` is given) and write ``status`` as the kubelet would.

        A status whose containers started (running or terminated) waits, as a real kubelet's
        ``ContainerCreating`` does, until the ConfigMaps and Secrets the Pod uses exist."""
        if node_name:
            await self.put_node(node_name)
            await self.bind(name, node_name)
        pod = (await self._http.get(self._pod_path(name))).json()
        if _started(status):
            await wait_for_mounts(self._http, self.namespace, pod)
        r = await patch_status(self._http, self._pod_path(name), named_after(pod, status))
        if r.status_code >= 400:
            raise AssertionError(f"status of {name} refused: {r.status_code} {r.text}")

    async def delete(self, name: str) -> None:
        """A Pod deleted by someone (graceful); this kubelet finishes it like any other deletion."""
        r = await self._http.delete(self._pod_path(name))
        r.raise_for_status()

    async def evict(self, name: str) -> None:
        """The Eviction API (what ``kubectl drain`` uses): the API server marks and deletes the Pod."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": self.namespace},
        }
        r = await self._http.post(self._pod_path(name) + "/eviction", json=body)
        r.raise_for_status()

    async def _reap_forever(self) -> None:
        """Finish graceful deletions of Pods on live Nodes, as a kubelet does: the container gets
        SIGTERM and exits (a terminated state is written), then the Pod object is removed. Pods on
        a silent or deleted Node are left Terminating, as on a cluster."""
        seen: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        while True:
            with contextlib.suppress(httpx.HTTPError):
                r = await self._http.get(f"/api/v1/namespaces/{self.namespace}/pods")
                for pod in r.json().get("items", []) if r.status_code == 200 else []:
                    meta = pod["metadata"]
                    node = pod.get("spec", {}).get("nodeName")
                    if not meta.get("deletionTimestamp") or (node is not None and node not in self._alive):
                        continue
                    first = seen.setdefault(meta["uid"], loop.time())
                    if node is not None and loop.time() - first < self.stop_seconds:
                        continue
                    if node is not None:
                        await self._stopped(await self._stopping(pod))
                    await self._http.request(
                        "DELETE",
                        self._pod_path(meta["name"]),
                        json={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
                    )
            await asyncio.sleep(0.2)

    async def _stopping(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Run :attr:`before_stop` for a deleted Pod; the Pod as it is afterwards."""
        if self.before_stop is None:
            return pod
        await self.before_stop(pod)
        return dict((await self._http.get(self._pod_path(pod["metadata"]["name"]))).json())

    async def _stopped(self, pod: dict[str, Any]) -> None:
        """The container's exit after SIGTERM (143), unless it had already terminated."""
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if not statuses or any("terminated" in (c.get("state") or {}) for c in statuses):
            return
        now = _now()
        term = {"exitCode": 143, "reason": "Error", "startedAt": now, "finishedAt": now}
        body = {
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {**c, "state": {"terminated": term}, "ready": False, "started": False} for c in statuses
                ],
            }
        }
        await self._http.patch(self._pod_path(pod["metadata"]["name"]) + "/status", json=body, headers=MERGE)


def keep_node_alive(plane: ControlPlane, name: str, *, period: float = 1.0) -> Callable[[], None]:
    """A Node that stays Ready for the whole session (its own thread renews its Lease).

    The node lifecycle controller stops evicting when every Node of a zone is
    NotReady (it assumes the control plane lost the network), so node-loss
    tests need a healthy Node beside the one they lose. Returns ``stop``.
    """
    stop = threading.Event()

    def run() -> None:
        async def main() -> None:
            kubelet = RealKubelet(plane, "default", renew_seconds=period)
            await kubelet.put_node(name)
            await asyncio.to_thread(stop.wait)
            kubelet._nodes.discard(name)
            await kubelet.close()

        asyncio.run(main())

    thread = threading.Thread(target=run, name=f"node-{name}", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(10)

    return halt


def _started(status: dict[str, Any]) -> bool:
    return any(
        {"running", "terminated"} & set((c.get("state") or {}).keys())
        for c in status.get("containerStatuses") or []
    )


def mounted_objects(pod: dict[str, Any]) -> list[tuple[str, str]]:
    """The (resource, name) of every ConfigMap and Secret the Pod mounts or reads into its environment."""
    spec = pod.get("spec") or {}
    found: list[tuple[str, str]] = []
    for volume in spec.get("volumes") or []:
        if "configMap" in volume:
            found.append(("configmaps", volume["configMap"]["name"]))
        if "secret" in volume:
            found.append(("secrets", volume["secret"]["secretName"]))
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for item in container.get("env") or []:
            ref = (item.get("valueFrom") or {}).get("secretKeyRef") or {}
            if ref.get("name") and not ref.get("optional"):
                found.append(("secrets", ref["name"]))
    return list(dict.fromkeys(found))


async def mounts_missing(http: httpx.AsyncClient, namespace: str, pod: dict[str, Any]) -> list[str]:
    """The ConfigMaps and Secrets the Pod needs that do not exist (yet)."""
    missing = []
    for resource, name in mounted_objects(pod):
        r = await http.get(f"/api/v1/namespaces/{namespace}/{resource}/{name}")
        if r.status_code == 404:
            missing.append(f"{resource}/{name}")
        else:
            r.raise_for_status()
    return missing


#: How long a started status waits for the Pod's ConfigMaps and Secrets before the test fails.
MOUNT_WAIT_S = 30.0


async def wait_for_mounts(http: httpx.AsyncClient, namespace: str, pod: dict[str, Any]) -> None:
    """Wait (``ContainerCreating``) until the Pod's ConfigMaps and Secrets exist; AssertionError after
    :data:`MOUNT_WAIT_S`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + MOUNT_WAIT_S
    while missing := await mounts_missing(http, namespace, pod):
        if loop.time() > end:
            name = (pod.get("metadata") or {}).get("name")
            raise AssertionError(f"pod {name} cannot start: {', '.join(missing)} still missing")
        await asyncio.sleep(0.05)


async def patch_status(http: httpx.AsyncClient, pod_path: str, status: dict[str, Any]) -> httpx.Response:
    """Write ``status`` through ``<pod_path>/status`` as a kubelet does (a merge patch).

    Lists are replaced wholesale by a merge patch; what the new status lacks is nulled out.
    """
    body = {"status": {k: None for k in ("reason", "message", "containerStatuses", "conditions")} | status}
    return await http.patch(pod_path + "/status", json=body, headers=MERGE)


def named_after(pod: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """The status with its container entries named after the Pod's own containers."""
    out = dict(status)
    for key, spec_key in (("containerStatuses", "containers"), ("initContainerStatuses", "initContainers")):
        names = [c["name"] for c in pod.get("spec", {}).get(spec_key) or []]
        if key in out and out[key] is not None:
            if not names:
                out.pop(key)
                continue
            out[key] = [
                {
                    **c,
                    "name": names[min(i, len(names) - 1)],
                    "image": pod["spec"][spec_key][min(i, len(names) - 1)]["image"],
                }
                for i, c in enumerate(out[key])
            ]
    return out


class RealApi:
    """The demo kubelet's view of a real API server: one Node (``demo-node``) kept Ready by a
    :class:`RealKubelet`, Pods bound to it with the binding subresource, and graceful deletions
    finished (terminated state written, then the Pod removed) once the demo has stopped the
    container's processes."""

    description = "real kube-apiserver"

    def __init__(self, plane: ControlPlane, namespace: str, node: str = NODE) -> None:
        self.namespace = namespace
        self.node = node
        self.http = plane.async_client()
        self.kubelet = RealKubelet(plane, namespace)

    async def start(self, on_delete: Callable[[str], Awaitable[None]]) -> None:
        async def before_stop(pod: dict[str, Any]) -> None:
            await on_delete(str(pod["metadata"]["name"]))

        self.kubelet.before_stop = before_stop
        await self.kubelet.put_node(self.node)

    async def bind(self, pod: dict[str, Any]) -> None:
        await self.kubelet.bind(str(pod["metadata"]["name"]), self.node)

    def creatable(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """The API server sets uid, resourceVersion and creationTimestamp itself."""
        return metadata

    async def close(self) -> None:
        await self.kubelet.close()
        await self.http.aclose()
