"""The escalation probe on the real control plane: a Swarm author gains nothing a Pod author lacks.

An account that may write Swarms, but may not create Pods nor read Secrets, tries every trick of a
Pod template that would borrow the operator's rights: the operator's ServiceAccount, a mounted token,
Secrets it cannot read (volume, projected, ``envFrom``, ``secretKeyRef``), the labels the chart's
NetworkPolicies admit to Redis, a privileged or host-mounting container, and the namespace's data and
credentials a Pod author would need rights for: a PersistentVolumeClaim mounted, cloned into an
``ephemeral`` volume or kept as the checkpoint store, an ``imagePullSecrets`` entry, a provider Secret
(``harness.credentials``). Each is refused: at
admission by the CRD's CEL rules where the rule is static (422, the message naming the field, no
Swarm stored), otherwise by the operator before it creates anything (the seat's card and a
``LaunchBlocked`` Event name the field and the rule; no Pod, Secret or ConfigMap is created). A
Secret or claim its owner opted in with ``swarm.agentihooks.io/pod-template: allowed`` is usable, once.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import pytest
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.realcluster import service_account_token

from .conftest import swarm_spec
from .flows import running_seat

SWARMS = "/apis/agentihooks.io/v1alpha1/namespaces/{ns}/swarms"
AUTHOR = "swarm-author"
OPT_IN = {"swarm.agentihooks.io/pod-template": "allowed"}
TEMPLATE = "the Swarm's Pod template is refused: "


def _spec(template: dict[str, Any]) -> dict[str, Any]:
    spec = swarm_spec()
    spec["podTemplate"] = template
    return spec


async def _admin(cluster: Cluster, path: str, body: dict[str, Any]) -> None:
    r = await cluster.http.post(path, json=body)
    assert r.status_code in (200, 201, 409), r.text


@pytest.fixture
async def author(cluster: Cluster) -> Any:
    """An httpx client logged in as an account that may write Swarms and nothing else."""
    ns = cluster.namespace
    await _admin(
        cluster,
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": AUTHOR}},
    )
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{kind}"
    await _admin(
        cluster,
        rbac.format(ns=ns, kind="roles"),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": AUTHOR},
            "rules": [
                {
                    "apiGroups": ["agentihooks.io"],
                    "resources": ["swarms"],
                    "verbs": ["create", "get", "list", "patch", "update", "delete"],
                }
            ],
        },
    )
    await _admin(
        cluster,
        rbac.format(ns=ns, kind="rolebindings"),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": AUTHOR},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": AUTHOR},
            "subjects": [{"kind": "ServiceAccount", "name": AUTHOR, "namespace": ns}],
        },
    )
    for name, labels in (("redis-auth", {}), ("team-ca", OPT_IN)):
        await _admin(
            cluster,
            f"/api/v1/namespaces/{ns}/secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "labels": labels},
                "stringData": {"password": "hunter2-not-for-swarm-authors"},
            },
        )
    for name, labels in (("team-data", {}), ("lent-data", OPT_IN)):
        await _admin(
            cluster,
            f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "labels": labels},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
            },
        )
    token = service_account_token(cluster.plane, ns, AUTHOR)
    async with httpx.AsyncClient(
        base_url=cluster.url,
        verify=ssl.create_default_context(cafile=str(cluster.plane.ca.cert)),
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    ) as http:
        # What the account is: no Pods, no Secrets.
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
        assert (await http.post(f"/api/v1/namespaces/{ns}/pods", json=pod)).status_code == 403
        assert (await http.get(f"/api/v1/namespaces/{ns}/secrets/redis-auth")).status_code == 403
        assert (
            await http.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/team-data")
        ).status_code == 403
        yield http


def _ephemeral(**claim: Any) -> dict[str, Any]:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}, **claim}
    return {"name": "w", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}


STATIC = [
    ({"spec": {"automountServiceAccountToken": True}}, "automountServiceAccountToken"),
    ({"spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}}, "podTemplate.spec.volumes: only"),
    (
        {
            "spec": {
                "volumes": [
                    {"name": "tok", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
                ]
            }
        },
        "projected.sources: only configMap, secret and downwardAPI",
    ),
    ({"spec": {"container": {"securityContext": {"privileged": True}}}}, "never privileged"),
    ({"spec": {"container": {"securityContext": {"allowPrivilegeEscalation": True}}}}, "may not escalate"),
    (
        {"spec": {"container": {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}}},
        "capabilities.add",
    ),
    ({"spec": {"securityContext": {"runAsUser": 0}}}, "runAsUser: never root"),
    ({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}}, "never unconfined"),
    (
        {
            "spec": {
                "volumes": [
                    _ephemeral(
                        dataSource={
                            "kind": "VolumeSnapshot",
                            "name": "s",
                            "apiGroup": "snapshot.storage.k8s.io",
                        }
                    )
                ]
            }
        },
        "spec.dataSource: an ephemeral volume may be made from a PersistentVolumeClaim",
    ),
    (
        {
            "spec": {
                "volumes": [
                    _ephemeral(
                        dataSourceRef={"kind": "PersistentVolumeClaim", "name": "x", "namespace": "other"}
                    )
                ]
            }
        },
        "dataSourceRef.namespace: a Swarm clones claims of its own namespace only",
    ),
    ({"spec": {"volumes": [_ephemeral(volumeName="pv-1")]}}, "spec.volumeName: a Swarm's ephemeral volume"),
    ({"spec": {"volumes": [_ephemeral(selector={"matchLabels": {"a": "b"}})]}}, "spec.selector: a Swarm's"),
    ({"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}}, "appArmorProfile: a worker"),
    (
        {"spec": {"container": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}}},
        "seLinuxOptions: only the container SELinux types",
    ),
    (
        {"spec": {"securityContext": {"windowsOptions": {"hostProcess": True}}}},
        "windowsOptions.hostProcess: a worker is never a host process",
    ),
    ({"spec": {"container": {"securityContext": {"procMount": "Unmasked"}}}}, "procMount: only the Default"),
    (
        {"spec": {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}},
        "sysctls: only the safe sysctls",
    ),
    (
        {"spec": {"container": {"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}}},
        "capabilities.drop: must include ALL",
    ),
    ({"metadata": {"labels": {"app.kubernetes.io/component": "operator"}}}, "app.kubernetes.io/component"),
    ({"metadata": {"labels": {"app.kubernetes.io/component": "redis"}}}, "app.kubernetes.io/component"),
]


@pytest.mark.parametrize(("template", "message"), STATIC, ids=[m for _, m in STATIC])
async def test_admission_refuses_each_static_trick(
    cluster: Cluster, author: httpx.AsyncClient, template: dict[str, Any], message: str
) -> None:
    body = {"apiVersion": "agentihooks.io/v1alpha1", "kind": "Swarm", "metadata": {"name": "probe"}}
    r = await author.post(SWARMS.format(ns=cluster.namespace), json={**body, "spec": _spec(template)})
    assert r.status_code == 422, r.text
    assert message in r.json()["message"]
    assert await cluster.get(SWARMS.format(ns=cluster.namespace) + "/probe") is None


def _operator_account(cluster: Cluster) -> str:
    return str(next(d for d in cluster.rbac if d["kind"] == "ServiceAccount")["metadata"]["name"])


async def _blocked(cluster: Cluster, swarm: str, text: str) -> dict[str, Any] | None:
    for card in ((await cluster.swarm(swarm)).get("status") or {}).get("handoffs") or []:
        if card.get("binding") == "launch blocked" and text in (card.get("launch_blocked") or ""):
            return dict(card)
    return None


async def _blocked_event(cluster: Cluster, swarm: str, text: str) -> bool:
    return any(
        e["reason"] == "LaunchBlocked" and e["involvedObject"]["name"] == swarm and text in e["message"]
        for e in await cluster.events()
    )


def _borrowings() -> list[tuple[str, dict[str, Any], str, str]]:
    """``(name, spec, text, card prefix)``: the namespace's data and credentials, never lent."""
    unlent = "may be used by a Swarm only when it carries the label swarm.agentihooks.io/pod-template"
    vols = "podTemplate.spec.volumes"
    provider = swarm_spec()
    provider["harness"]["credentials"] = {"secretName": "redis-auth"}
    store = swarm_spec()
    store["checkpointStore"] = {"root": "/checkpoints", "claim": "team-data"}
    clone = {"kind": "PersistentVolumeClaim", "name": "team-data"}
    return [
        (
            "claim",
            _spec(
                {"spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "team-data"}}]}}
            ),
            f"{vols}[d].persistentVolumeClaim: PersistentVolumeClaim 'team-data' {unlent}",
            TEMPLATE,
        ),
        (
            "clone",
            _spec({"spec": {"volumes": [_ephemeral(dataSource=clone)]}}),
            f"{vols}[w].ephemeral.volumeClaimTemplate.spec.dataSource: PersistentVolumeClaim 'team-data'",
            TEMPLATE,
        ),
        (
            "pull",
            _spec({"spec": {"imagePullSecrets": [{"name": "redis-auth"}]}}),
            f"podTemplate.spec.imagePullSecrets[0]: Secret 'redis-auth' {unlent}",
            TEMPLATE,
        ),
        ("store", store, f"checkpointStore.claim: PersistentVolumeClaim 'team-data' {unlent}", "checkpoint"),
        ("provider", provider, f"harness.credentials: Secret 'redis-auth' {unlent}", "harness"),
    ]


def _tricks(operator_account: str) -> list[tuple[str, dict[str, Any], str, str]]:
    """``(name, spec, text, card prefix)``, the Pod template's tricks first."""
    return [
        (n, _spec(t), text, TEMPLATE) for n, t, text in _template_tricks(operator_account)
    ] + _borrowings()


def _template_tricks(operator_account: str) -> list[tuple[str, dict[str, Any], str]]:
    c = "podTemplate.spec.container"
    return [
        ("op-sa", {"spec": {"serviceAccountName": operator_account}}, "the operator's own ServiceAccount"),
        ("other-sa", {"spec": {"serviceAccountName": "default"}}, "'default' is not among the accounts"),
        (
            "vol",
            {"spec": {"volumes": [{"name": "r", "secret": {"secretName": "redis-auth"}}]}},
            "podTemplate.spec.volumes[r].secret: Secret 'redis-auth' may be used by a Swarm only",
        ),
        (
            "proj",
            {
                "spec": {
                    "volumes": [{"name": "p", "projected": {"sources": [{"secret": {"name": "redis-auth"}}]}}]
                }
            },
            "projected.sources[0].secret: Secret 'redis-auth'",
        ),
        (
            "envfrom",
            {"spec": {"container": {"envFrom": [{"secretRef": {"name": "redis-auth"}}]}}},
            f"{c}.envFrom[0].secretRef: Secret 'redis-auth'",
        ),
        (
            "keyref",
            {
                "spec": {
                    "container": {
                        "env": [
                            {
                                "name": "P",
                                "valueFrom": {"secretKeyRef": {"name": "redis-auth", "key": "password"}},
                            }
                        ]
                    }
                }
            },
            f"{c}.env[P].valueFrom.secretKeyRef: Secret 'redis-auth'",
        ),
    ]


async def test_the_operator_refuses_what_admission_cannot_know_and_creates_nothing(
    cluster: Cluster, author: httpx.AsyncClient, redis_url: str
) -> None:
    ns = cluster.namespace
    account = _operator_account(cluster)
    tricks = _tricks(account)
    # the operator's account lives in the Swarms' namespace here: a single-namespace trial, allowed
    settings = {
        "operator_service_account": account,
        "operator_namespace": ns,
        "allow_operator_namespace": True,
    }
    async with running_operator(cluster, redis_url, **settings):
        for name, spec, _, _ in tricks:
            body = {"apiVersion": "agentihooks.io/v1alpha1", "kind": "Swarm", "metadata": {"name": name}}
            r = await author.post(SWARMS.format(ns=ns), json={**body, "spec": spec})
            assert r.status_code == 201, r.text  # admission cannot know the cluster's accounts or Secrets
        for name, _, text, prefix in tricks:
            card = await eventually(lambda n=name, t=text: _blocked(cluster, n, t), what=f"{name}: card")
            assert card["launch_blocked"].startswith(prefix), card
            assert "hunter2" not in str(card)
        # the card is written before the Event is posted: wait for each swarm's Event, then read them all
        for name, _, text, _ in tricks:
            await eventually(lambda n=name, t=text: _blocked_event(cluster, n, t), what=f"{name}: event")
        events = [e for e in await cluster.events() if e["reason"] == "LaunchBlocked"]
        assert not any("hunter2" in str(e) for e in events)
    for verb_resource in ("pods", "secrets", "configmaps"):
        assert cluster.count("create", verb_resource) == 0, verb_resource
    assert await cluster.pods() == []


async def test_a_swarm_in_the_operators_own_namespace_gets_no_pods(
    cluster: Cluster, author: httpx.AsyncClient, redis_url: str
) -> None:
    """That namespace holds the operator's ServiceAccount and the Redis password: a Swarm there, with
    no Pod template at all, is blocked naming the rule, and nothing of an attempt is created."""
    ns = cluster.namespace
    settings = {"operator_service_account": _operator_account(cluster), "operator_namespace": ns}
    rule = f"a Swarm may not run in {ns!r}, the operator's own namespace"
    body = {"apiVersion": "agentihooks.io/v1alpha1", "kind": "Swarm", "metadata": {"name": "beside"}}
    async with running_operator(cluster, redis_url, **settings):
        r = await author.post(SWARMS.format(ns=ns), json={**body, "spec": swarm_spec()})
        assert r.status_code == 201, r.text
        card = await eventually(lambda: _blocked(cluster, "beside", rule), what="the blocked card")
        assert "metadata.namespace" in card["launch_blocked"]

        async def reported() -> bool:
            events = [e for e in await cluster.events() if e["reason"] == "LaunchBlocked"]
            return any(e["involvedObject"]["name"] == "beside" and rule in e["message"] for e in events)

        await eventually(reported, what="the LaunchBlocked Event naming the rule")
    for resource in ("pods", "secrets", "configmaps"):
        assert cluster.count("create", resource) == 0, resource
    assert await cluster.pods() == []


async def test_a_secret_and_a_claim_their_owners_opted_in_are_usable(
    cluster: Cluster, author: httpx.AsyncClient, kubelet: Kubelet, redis_url: str
) -> None:
    template = {
        "spec": {
            "volumes": [
                {"name": "ca", "secret": {"secretName": "team-ca"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "lent-data"}},
                _ephemeral(dataSource={"kind": "PersistentVolumeClaim", "name": "lent-data"}),
            ],
            "imagePullSecrets": [{"name": "team-ca"}],
        }
    }
    body = {"apiVersion": "agentihooks.io/v1alpha1", "kind": "Swarm", "metadata": {"name": "opted"}}
    async with running_operator(cluster, redis_url):
        r = await author.post(SWARMS.format(ns=cluster.namespace), json={**body, "spec": _spec(template)})
        assert r.status_code == 201, r.text
        pod = await running_seat(cluster, kubelet, "opted")
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["ca"]["secret"]["secretName"] == "team-ca"
        assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "lent-data"
        assert pod["spec"]["imagePullSecrets"] == [{"name": "team-ca"}]
    assert cluster.count("create", "pods") == 1
