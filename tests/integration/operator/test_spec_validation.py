"""An invalid Swarm spec is refused: by the API server where the CRD schema can say so (a 422 naming
each field), otherwise by the operator as a status condition and a permanent handler error. Either way
nothing launches."""

from __future__ import annotations

import asyncio

from testsupport.kstatus import status_of
from testsupport.kube import eventually, running_operator
from testsupport.realcluster import RealCluster as Cluster
from testsupport.realcluster import swarm_body

from .conftest import swarm_spec


async def test_the_api_server_refuses_a_spec_the_schema_rules_out(cluster: Cluster) -> None:
    bad = swarm_spec()
    bad["harness"]["name"] = "gemini"
    bad["seats"][0]["name"] = "Not_A_Seat"
    r = await cluster.http.post(
        f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms",
        json={
            "apiVersion": "agentihooks.io/v1alpha1",
            "kind": "Swarm",
            "metadata": {"name": "x"},
            "spec": bad,
        },
    )
    assert r.status_code == 422
    causes = r.json()["details"]["causes"]
    fields = {c.get("field") for c in causes}
    assert {"spec.harness.name", "spec.seats[0].name"} <= fields, causes
    assert await cluster.get(f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms/x") is None


async def test_the_api_server_refuses_a_seat_or_master_named_twice(cluster: Cluster) -> None:
    """Seats are keyed by name and masters by agent (map-type lists): a duplicate is refused at create
    and at update, naming the list and the value, and the stored Swarm is unchanged."""
    base = f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms"
    master = {"agent": "lead", "credentialSecret": "lead-token"}

    twice = swarm_spec(2)
    twice["seats"][1]["name"] = "eng-1"
    masters = {**swarm_spec(), "masters": [master, {**master, "credentialSecret": "other"}]}
    for name, spec, field in (
        ("dup-seat", twice, "spec.seats[1]"),
        ("dup-master", masters, "spec.masters[1]"),
    ):
        r = await cluster.http.post(base, json=swarm_body(name, spec))
        assert r.status_code == 422, r.text
        causes = r.json()["details"]["causes"]
        assert any(c.get("field") == field and c.get("reason") == "FieldValueDuplicate" for c in causes), (
            causes
        )
        assert await cluster.get(f"{base}/{name}") is None

    good = swarm_spec(2)
    assert (await cluster.http.post(base, json=swarm_body("unique", good))).status_code == 201
    stored = await cluster.get(f"{base}/unique")
    r = await cluster.http.patch(
        f"{base}/unique",
        json={"spec": {"seats": [*good["seats"], {**good["seats"][0], "task": {"id": "t-9", "text": "x"}}]}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 422 and "Duplicate value" in r.text, r.text
    after = await cluster.get(f"{base}/unique")
    assert after is not None and stored is not None and after["spec"] == stored["spec"]


async def test_the_api_server_refuses_a_swarm_name_too_long_for_its_pod_label(cluster: Cluster) -> None:
    """``controller-owner=agentihooks-swarm-<name>`` must fit a label value: 45 characters pass, 46 do not."""
    base = f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms"
    for name, status in (("s" * 46, 422), ("s" * 45, 201)):
        r = await cluster.http.post(
            base,
            json={
                "apiVersion": "agentihooks.io/v1alpha1",
                "kind": "Swarm",
                "metadata": {"name": name},
                "spec": swarm_spec(),
            },
        )
        assert r.status_code == status, r.text
    assert "a Swarm name is at most 45 characters" in str(
        (
            await cluster.http.post(
                base,
                json={
                    "apiVersion": "agentihooks.io/v1alpha1",
                    "kind": "Swarm",
                    "metadata": {"name": "t" * 50},
                    "spec": swarm_spec(),
                },
            )
        ).json()
    )
    assert await cluster.get(f"{base}/{'s' * 46}") is None


async def test_invalid_spec_sets_condition_and_launches_nothing(cluster: Cluster, redis_url: str) -> None:
    bad = _operator_only_invalid()
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("broken", bad)

        async def condition() -> dict | None:
            conds = (await cluster.swarm("broken")).get("status", {}).get("conditions") or []
            return next((c for c in conds if c["type"] == "SpecValid"), None)

        cond = await eventually(condition, what="SpecValid condition")
        assert cond["status"] == "False"
        assert "checkpointStore.claim needs checkpointStore.root" in cond["message"]
        swarm = await cluster.swarm("broken")
        assert cond["observedGeneration"] == swarm["metadata"]["generation"]
        held = {c["type"]: c for c in swarm["status"]["conditions"]}
        assert (held["Ready"]["status"], held["Ready"]["reason"]) == ("False", "InvalidSpec")
        assert (held["Stalled"]["status"], held["Stalled"]["reason"]) == ("True", "InvalidSpec")
        assert status_of(swarm) == "Failed"  # what kstatus (Flux, Argo CD) reads: nothing will happen
        assert await _ready_column(cluster, "broken") == ("False", "InvalidSpec")

        async def event() -> list[dict]:
            return [e for e in await cluster.events() if e["reason"] == "InvalidSpec"]

        [posted] = await eventually(event, what="the InvalidSpec Event")
        assert posted["type"] == "Warning" and posted["involvedObject"]["name"] == "broken"
        assert posted["involvedObject"]["uid"] == swarm["metadata"]["uid"]
        assert posted["message"].startswith(f"swarm {cluster.namespace}/broken: the spec is invalid: ")
        assert "checkpointStore.claim needs checkpointStore.root" in posted["message"]
        await asyncio.sleep(1.0)  # a few pass intervals: still nothing may launch
        assert await cluster.pods() == []
        assert cluster.count("create", "pods") == 0


async def test_fixing_the_spec_starts_the_swarm(cluster: Cluster, redis_url: str) -> None:
    bad = _operator_only_invalid()
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("later", bad)

        async def valid(expected: str) -> bool:
            conds = (await cluster.swarm("later")).get("status", {}).get("conditions") or []
            return any(c["type"] == "SpecValid" and c["status"] == expected for c in conds)

        await eventually(lambda: valid("False"), what="SpecValid False")
        r = await cluster.http.patch(
            f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms/later",
            json={"spec": {"checkpointStore": None}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        r.raise_for_status()
        await eventually(lambda: valid("True"), what="SpecValid True after the fix")
        pods = await eventually(lambda: cluster.pods("later"), what="first Pod after the fix")
        assert len(pods) == 1

        # Both the condition and the pass's status name the generation they were computed for (2: the
        # fix); the condition kept no stale generation from the invalid spec.
        async def observed() -> bool:
            swarm = await cluster.swarm("later")
            status, generation = swarm.get("status") or {}, swarm["metadata"]["generation"]
            conds = {c["type"]: c for c in status.get("conditions") or []}
            return (
                generation == 2
                and status.get("observedGeneration") == generation
                and conds["SpecValid"].get("observedGeneration") == generation
            )

        await eventually(observed, what="observedGeneration of the fixed spec")

        async def current() -> bool:  # Stalled gone, Ready from the first pass of the fixed spec
            return status_of(await cluster.swarm("later")) == "Current"

        await eventually(current, what="kstatus Current once the spec is fixed")
        held = {c["type"]: c for c in (await cluster.swarm("later"))["status"]["conditions"]}
        assert held["Stalled"]["status"] == "False" and held["Ready"]["reason"] == "Reconciled"
        assert held["Ready"]["observedGeneration"] == 2
        assert await _ready_column(cluster, "later") == ("True", "Reconciled")


async def test_a_root_no_volume_holds_is_refused_until_a_claim_is_named(
    cluster: Cluster, redis_url: str
) -> None:
    """``checkpointStore.root`` without ``remote``: the worker Pods need a volume that outlives them
    there. Without one, the Swarm's ``CheckpointVolume`` condition and a ``LaunchBlocked`` Event say
    why and how to fix it, and no Pod is created; naming a claim launches Pods that mount it."""
    spec = swarm_spec()
    spec["checkpointStore"] = {"root": "/checkpoints"}
    said = "checkpointStore.root /checkpoints is backed by no volume on the worker Pods"
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("rooted", spec)

        async def condition(status: str) -> dict | None:
            conds = (await cluster.swarm("rooted")).get("status", {}).get("conditions") or []
            held = {c["type"]: c for c in conds}
            volume = held.get("CheckpointVolume")
            if volume is None or volume["status"] != status:
                return None
            assert held["SpecValid"]["status"] == "True"  # both conditions are kept
            return volume

        cond = await eventually(lambda: condition("False"), what="CheckpointVolume False")
        assert cond["message"].startswith(said) and "checkpointStore.claim" in cond["message"]

        async def blocked() -> bool:
            events = [e for e in await cluster.events() if e["reason"] == "LaunchBlocked"]
            return any(e["involvedObject"]["name"] == "rooted" and said in e["message"] for e in events)

        await eventually(blocked, what="the LaunchBlocked Event naming the root")

        async def not_ready() -> dict | None:
            ready = {c["type"]: c for c in (await cluster.swarm("rooted"))["status"]["conditions"]}.get(
                "Ready"
            )
            return ready if ready and ready["reason"] == "LaunchBlocked" else None

        ready = await eventually(not_ready, what="Ready False: the launch is blocked")
        assert ready["status"] == "False" and "seat eng-1: " in ready["message"] and said in ready["message"]
        assert status_of(await cluster.swarm("rooted")) == "InProgress"
        await asyncio.sleep(1.0)  # a few pass intervals: still nothing may launch
        assert await cluster.pods("rooted") == []
        assert cluster.count("create", "pods") == 0
        claim = {  # the claim's owner lends it to the namespace's Swarms (docs/security.md)
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "rooted-checkpoints",
                "labels": {"swarm.agentihooks.io/pod-template": "allowed"},
            },
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        }
        r = await cluster.http.post(
            f"/api/v1/namespaces/{cluster.namespace}/persistentvolumeclaims", json=claim
        )
        assert r.status_code == 201, r.text
        r = await cluster.http.patch(
            f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms/rooted",
            json={"spec": {"checkpointStore": {"root": "/checkpoints", "claim": "rooted-checkpoints"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        r.raise_for_status()
        await eventually(lambda: condition("True"), what="CheckpointVolume True once a claim is named")
        [pod] = await eventually(lambda: cluster.pods("rooted"), what="the first Pod once a claim is named")
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["checkpoints"]["persistentVolumeClaim"] == {"claimName": "rooted-checkpoints"}
        [container] = pod["spec"]["containers"]
        assert {"name": "checkpoints", "mountPath": "/checkpoints"} in container["volumeMounts"]


async def _ready_column(cluster: Cluster, name: str) -> tuple[str, str]:
    """The Ready and Reason printer columns as ``kubectl get swarms -o wide`` shows them."""
    columns = await cluster.columns(name)
    return columns["Ready"], columns["Reason"]


def _operator_only_invalid() -> dict[str, object]:
    """A spec the CRD schema admits and the operator refuses: a claim with no root to mount it at."""
    bad = swarm_spec()
    bad["checkpointStore"] = {"claim": "checkpoints"}
    return bad
