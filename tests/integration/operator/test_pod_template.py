"""The worker Pod template and provider credentials on the real control plane.

The test namespace enforces Pod Security ``restricted`` and the operator holds only the chart's RBAC.
Shown here: a worker Pod built from a full template is admitted and keeps the operator's own fields;
the CRD refuses operator-owned fields, a literal credential and (with strict field validation) a
misspelt field, each with a message; a template that breaks ``restricted`` is refused by the API
server's admission, which the seat's card and an Event show until the template is fixed; a missing or
unusable credential Secret blocks the launch (card + Event, nothing created) until the Secret is
right, then the seat launches exactly once; fencing deletes the attempt's copy of the credential. The
credential's value never appears in an Event, the Swarm's status, a launch record or the operator's log.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.realcluster import swarm_body

from .conftest import swarm_spec
from .flows import eid, fenced, pod_deleted, running_seat

KEY = "sk-ant-api03-PODTEMPLATE-TEST-5f1e0c9a7b3d"
KEY_B64 = base64.b64encode(KEY.encode()).decode()
BASE_URL = "http://127.0.0.1:9/model-api"
SWARMS = "/apis/agentihooks.io/v1alpha1/namespaces/{ns}/swarms"

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "payments"}, "annotations": {"cost-center": "42"}},
    "spec": {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "agents", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {
                            "matchExpressions": [{"key": "pool", "operator": "In", "values": ["agents"]}]
                        },
                    }
                ]
            }
        },
        "priorityClassName": "agents",
        "imagePullSecrets": [{"name": "registry-credentials"}],
        "serviceAccountName": "agent-runner",
        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
        "volumes": [
            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "home", "emptyDir": {"sizeLimit": "2Gi"}},
        ],
        "container": {
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
            "env": [
                {"name": "GIT_AUTHOR_NAME", "value": "payments-agent"},
                # Also a key of the credential Secret: the Secret's value wins, with a Warning Event.
                {"name": "ANTHROPIC_BASE_URL", "value": "http://template.invalid"},
            ],
            "envFrom": [{"configMapRef": {"name": "agent-settings", "optional": True}}],
            "volumeMounts": [{"name": "cache", "mountPath": "/var/cache/agent"}],
            "securityContext": {"runAsUser": 1000},
            "imagePullPolicy": "IfNotPresent",
        },
    },
}


def _with(**extra: Any) -> dict[str, Any]:
    spec = swarm_spec()
    spec["harness"]["credentials"] = {"secretName": "anthropic"}
    spec.update(extra)
    return spec


async def _admin_create(cluster: Cluster, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = await cluster.http.post(path, json=body)
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


async def _credential_secret(cluster: Cluster, data: dict[str, str]) -> None:
    """The user's provider credential Secret (created by the admin, as a user would with kubectl)."""
    meta = {"name": "anthropic", "labels": {"swarm.agentihooks.io/pod-template": "allowed"}}  # lent
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": data}
    path = f"/api/v1/namespaces/{cluster.namespace}/secrets"
    if await cluster.get(f"{path}/anthropic") is None:
        await _admin_create(cluster, path, body)
    else:
        r = await cluster.http.put(f"{path}/anthropic", json={**body, "type": "Opaque"})
        assert r.status_code == 200, r.text


async def _cards(cluster: Cluster, swarm: str) -> list[dict[str, Any]]:
    status = (await cluster.swarm(swarm)).get("status") or {}
    return list(status.get("handoffs") or [])


async def _blocked_card(cluster: Cluster, swarm: str, text: str) -> dict[str, Any] | None:
    for card in await _cards(cluster, swarm):
        if card.get("binding") == "launch blocked" and text in (card.get("launch_blocked") or ""):
            return card
    return None


async def _events(cluster: Cluster, reason: str) -> list[dict[str, Any]]:
    return [e for e in await cluster.events() if e["reason"] == reason]


def _leaks(text: str) -> bool:
    return KEY in text or KEY_B64 in text


async def _nothing_leaked(cluster: Cluster, swarm: str, caplog: pytest.LogCaptureFixture) -> None:
    events = await cluster.events()
    assert events and not any(_leaks(str(e)) for e in events)
    assert not _leaks(str(await cluster.swarm(swarm)))
    # A launch record rides in its attempt's Secret beside the copied credential: the record itself
    # never carries it (the Secrets of fenced attempts are gone by now; live ones are read here).
    records = [
        base64.b64decode(s["data"]["launch.json"]).decode()
        for s in await cluster.items("secrets")
        if "launch.json" in (s.get("data") or {})
    ]
    assert not any(_leaks(r) for r in records)
    launch_maps = [c for c in await cluster.items("configmaps") if c["metadata"]["name"].endswith("-launch")]
    assert launch_maps == []  # no launch ConfigMap any more (the namespace's kube-root-ca.crt stays)
    assert caplog.records and not any(_leaks(r.getMessage()) for r in caplog.records)
    assert not _leaks(caplog.text)


async def test_a_templated_worker_pod_is_admitted_under_restricted_and_keeps_the_operators_fields(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ns = cluster.namespace
    if await cluster.get("/apis/scheduling.k8s.io/v1/priorityclasses/agents") is None:  # cluster-scoped
        await _admin_create(
            cluster,
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "agents"},
                "value": 1000,
            },
        )
    await _admin_create(
        cluster,
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent-runner"}},
    )
    await _credential_secret(
        cluster, {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": BASE_URL, "unrelated": "x"}
    )
    # The cluster operator lets worker Pods run as agent-runner (chart: workerPods.serviceAccounts).
    # the pull Secret is lent by the cluster operator's list, the provider Secret by its owner's label
    lent = {"worker_service_accounts": "agent-runner", "worker_secrets": "registry-credentials"}
    async with running_operator(cluster, redis_url, **lent):
        await cluster.create_swarm("tmpl", _with(podTemplate=TEMPLATE))
        pod = await running_seat(cluster, kubelet, "tmpl")  # created, so admitted under restricted
        execution = eid(pod)
        meta, spec = pod["metadata"], pod["spec"]
        (container,) = spec["containers"]

        # The operator's fields.
        assert meta["name"] == f"swarm-{execution}"
        assert meta["ownerReferences"][0]["kind"] == "Swarm" and meta["ownerReferences"][0]["name"] == "tmpl"
        assert meta["labels"]["swarm.agentihooks.io/swarm"] == "tmpl"
        assert meta["labels"]["swarm.agentihooks.io/controller-owner"] == "agentihooks-swarm-tmpl"
        assert meta["annotations"]["swarm.agentihooks.io/seat"] == "eng-1"
        assert spec["restartPolicy"] == "Never"
        assert container["name"] == "agent" and container["image"] == "ghcr.io/agentihooks/worker:2.1.0"
        assert "command" not in container and "args" not in container
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert mounts["/var/run/swarm/launch"] == "launch"
        # The template's fields.
        assert meta["labels"]["team"] == "payments" and meta["annotations"]["cost-center"] == "42"
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert spec["tolerations"][0]["key"] == "agents"
        assert spec["affinity"]["nodeAffinity"]
        assert spec["priorityClassName"] == "agents" and spec["priority"] == 1000
        assert spec["imagePullSecrets"] == [{"name": "registry-credentials"}]
        assert spec["serviceAccountName"] == "agent-runner"
        assert container["resources"]["limits"] == {"memory": "1Gi"}
        assert container["envFrom"] == [{"configMapRef": {"name": "agent-settings", "optional": True}}]
        assert container["imagePullPolicy"] == "IfNotPresent"
        assert mounts["/var/cache/agent"] == "cache" and mounts["/home/worker"] == "home"
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["home"]["emptyDir"] == {"sizeLimit": "2Gi"}
        # Restricted defaults, and no service-account token although a service account is named.
        assert spec["automountServiceAccountToken"] is False
        assert not any(name.startswith("kube-api-access") for name in volumes)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}} and mounts["/tmp"] == "tmp"
        # The credential: only by reference to the attempt's own Secret; the Secret's base URL won.
        env = {e["name"]: e for e in container["env"]}
        own = f"swarm-{execution}-credential"
        assert env["ANTHROPIC_API_KEY"]["valueFrom"]["secretKeyRef"] == {
            "name": own,
            "key": "provider.ANTHROPIC_API_KEY",
        }
        assert env["ANTHROPIC_BASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == own
        assert env["GIT_AUTHOR_NAME"]["value"] == "payments-agent"
        assert "unrelated" not in str(env)
        copied = await cluster.get(f"/api/v1/namespaces/{ns}/secrets/{own}")
        assert copied is not None and copied["data"]["provider.ANTHROPIC_API_KEY"] == KEY_B64
        assert base64.b64decode(copied["data"]["provider.ANTHROPIC_BASE_URL"]).decode() == BASE_URL
        record = base64.b64decode(copied["data"]["launch.json"]).decode()  # beside it, never holding it
        assert execution in record and not _leaks(record)

        ignored = await eventually(lambda: _events(cluster, "PodTemplateIgnored"), what="PodTemplateIgnored")
        assert ignored[0]["type"] == "Warning" and ignored[0]["involvedObject"]["kind"] == "Swarm"
        assert "podTemplate.spec.container.env[ANTHROPIC_BASE_URL] ignored" in ignored[0]["message"]

        # Fencing the attempt deletes its copy of the provider credential with its Pod.
        await kubelet.set_status(pod["metadata"]["name"], kl.oom_killed())
        assert (await fenced(redis_url, "tmpl", execution)).reason == "oom_killed"
        await eventually(lambda: pod_deleted(cluster, execution), what="fenced Pod deleted")

        async def copy_gone() -> bool:
            return await cluster.get(f"/api/v1/namespaces/{ns}/secrets/{own}") is None

        await eventually(copy_gone, what="the fenced attempt's credential Secret deleted")
        await _nothing_leaked(cluster, "tmpl", caplog)
    assert cluster.count("create", "pods") == 1


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (
            {"spec": {"container": {"image": "evil:latest"}}},
            "podTemplate.spec.container.image is set by the operator",
        ),
        (
            {"spec": {"container": {"command": ["sh"]}}},
            "podTemplate.spec.container.command is set by the operator",
        ),
        ({"spec": {"restartPolicy": "Always"}}, "podTemplate.spec.restartPolicy is set by the operator"),
        (
            {"spec": {"containers": [{"name": "x", "image": "y"}]}},
            "podTemplate.spec.containers is set by the operator",
        ),
        ({"metadata": {"name": "mine"}}, "podTemplate.metadata.name is set by the operator"),
        ({"metadata": {"namespace": "kube-system"}}, "podTemplate.metadata.namespace is set by the operator"),
        (
            {"metadata": {"labels": {"swarm.agentihooks.io/swarm": "other"}}},
            "labels under swarm.agentihooks.io/ are set by the operator",
        ),
        (
            {"spec": {"container": {"env": [{"name": "AGENTIHOOKS_WORKER_TOKEN", "value": "x"}]}}},
            "the operator sets AGENTIHOOKS_LAUNCH_RECORD, AGENTIHOOKS_WORKER_TOKEN",
        ),
        (
            {"spec": {"container": {"volumeMounts": [{"name": "x", "mountPath": "/var/run/swarm/launch"}]}}},
            "the operator mounts /var/run/swarm/launch",
        ),
        (
            {"spec": {"volumes": [{"name": "provider", "emptyDir": {}}]}},
            "names launch, provider are the operator's",
        ),
        (
            {"spec": {"container": {"env": [{"name": "ANTHROPIC_API_KEY", "value": KEY}]}}},
            "a provider credential is never written into a Swarm",
        ),
    ],
    ids=[
        "image",
        "command",
        "restartPolicy",
        "containers",
        "name",
        "namespace",
        "owned label",
        "owned env",
        "owned mount",
        "owned volume",
        "literal credential",
    ],
)
async def test_the_crd_refuses_a_template_that_overrides_the_operator(
    cluster: Cluster, template: dict[str, Any], message: str
) -> None:
    r = await cluster.http.post(
        SWARMS.format(ns=cluster.namespace), json=swarm_body("bad", _with(podTemplate=template))
    )
    assert r.status_code == 422, r.text
    assert message in r.json()["message"]
    assert KEY not in r.text or "ANTHROPIC_API_KEY" in str(template)  # the API server echoes nothing else
    assert await cluster.get(SWARMS.format(ns=cluster.namespace) + "/bad") is None


async def test_a_misspelt_template_field_is_refused_by_the_api_server(cluster: Cluster) -> None:
    typo = _with(
        podTemplate={"spec": {"nodeSelectr": {"a": "b"}, "container": {"resources": {"limitz": {}}}}}
    )
    path = SWARMS.format(ns=cluster.namespace)
    strict = await cluster.http.post(
        path, params={"fieldValidation": "Strict"}, json=swarm_body("typo", typo)
    )
    assert strict.status_code == 400, strict.text
    message = strict.json()["message"]
    assert 'unknown field "spec.podTemplate.spec.nodeSelectr"' in message
    assert 'unknown field "spec.podTemplate.spec.container.resources.limitz"' in message
    wrong = _with(podTemplate={"spec": {"priorityClassName": 7, "container": {"env": [{"value": "x"}]}}})
    r = await cluster.http.post(path, json=swarm_body("wrong", wrong))
    assert r.status_code == 422, r.text
    fields = {c["field"] for c in r.json()["details"]["causes"]} - {"<nil>"}  # "<nil>": rules not run yet
    assert fields == {
        "spec.podTemplate.spec.priorityClassName",
        "spec.podTemplate.spec.container.env[0].name",
    }
    # A client without strict validation is told, and the field is dropped (never applied).
    lax = await cluster.http.post(path, json=swarm_body("lax", typo))
    assert lax.status_code == 201, lax.text
    assert 'unknown field \\"spec.podTemplate.spec.nodeSelectr\\"' in lax.headers["warning"]
    assert "nodeSelectr" not in str(lax.json()["spec"])


async def test_a_template_that_breaks_restricted_is_refused_by_admission_and_shown_until_fixed(
    cluster: Cluster, redis_url: str
) -> None:
    await _credential_secret(cluster, {"ANTHROPIC_API_KEY": KEY})
    # (An escalation the CRD itself refuses, such as allowPrivilegeEscalation or a drop without ALL,
    # never gets this far: test_escalation_probe.py.) An AppArmor annotation that unconfines the
    # container is only an annotation to the CRD but breaks restricted. Admission would say so in this
    # namespace; the operator says so first, whatever the namespace's labels
    # (test_restricted_profile_real.py: in a namespace without them), and sends no Pod.
    unconfined = "container.apparmor.security.beta.kubernetes.io/agent"
    privileged = {"metadata": {"annotations": {unconfined: "unconfined"}}}
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("priv", _with(podTemplate=privileged))
        card = await eventually(
            lambda: _blocked_card(cluster, "priv", "restricted profile"), what="card naming the refusal"
        )
        assert card["launch_blocked"].startswith("the worker Pod would break the Pod Security restricted")
        said = f"metadata.annotations[{unconfined}]: AppArmor may only be runtime/default or localhost/*"
        assert said in card["launch_blocked"]
        event = (await eventually(lambda: _events(cluster, "LaunchBlocked"), what="LaunchBlocked Event"))[0]
        assert event["type"] == "Warning" and "restricted profile" in event["message"]
        assert await cluster.pods("priv") == []
        assert cluster.count("create", "pods") == 0  # nothing was sent for admission to refuse

        r = await cluster.http.patch(
            SWARMS.format(ns=cluster.namespace) + "/priv",
            json={"spec": {"podTemplate": None}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        r.raise_for_status()
        pods = await eventually(lambda: cluster.pods("priv"), what="the Pod once the template is fixed")
        assert len(pods) == 1
        await eventually(lambda: _no_blocked_card(cluster, "priv"), what="card cleared")
    # Refused by admission until the fix; created once after it. The refused creates were no Pods.
    assert len(await cluster.pods("priv")) == 1


async def _no_blocked_card(cluster: Cluster, swarm: str) -> bool:
    return not any(c.get("launch_blocked") for c in await _cards(cluster, swarm))


async def test_a_missing_credential_secret_blocks_the_launch_until_it_exists(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ns = cluster.namespace
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("keyless", _with())
        card = await eventually(
            lambda: _blocked_card(cluster, "keyless", 'Secret "anthropic" does not exist'),
            what="blocked card",
        )
        assert card["seat"] == "eng-1" and card["reason"] == "launch_blocked"
        assert card["launch_blocked"] == (
            f'provider credential Secret "anthropic" does not exist in namespace "{ns}"; '
            "nothing is launched until it is fixed"
        )
        event = (await eventually(lambda: _events(cluster, "LaunchBlocked"), what="LaunchBlocked Event"))[0]
        assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Swarm"
        assert 'Secret "anthropic" does not exist' in event["message"]
        status = (await cluster.swarm("keyless"))["status"]
        assert status["running"] == 0 and status["recovering"] == 0  # a blocked first launch is no recovery
        # Nothing of the attempt was created.
        assert await cluster.pods("keyless") == []
        assert cluster.count("create", "pods") == 0
        assert cluster.count("create", "secrets") == 0
        assert cluster.count("create", "configmaps") == 0

        # A Secret without a usable key: the card and a new Event say so.
        await _credential_secret(cluster, {"ANTHROPIC_BASE_URL": BASE_URL})
        await eventually(
            lambda: _blocked_card(cluster, "keyless", "has no usable credential key"), what="card: no key"
        )
        await eventually(
            lambda: _event_saying(cluster, "has no usable credential key: the claude harness needs one of"),
            what="Event: no key",
        )
        assert cluster.count("create", "pods") == 0

        # The key arrives: the seat launches, exactly once.
        await _credential_secret(cluster, {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": BASE_URL})
        pod = await running_seat(cluster, kubelet, "keyless")
        await eventually(lambda: _no_blocked_card(cluster, "keyless"), what="card cleared")
        await eventually(lambda: _status_running(cluster, "keyless"), what="running=1")
        own = await cluster.get(f"/api/v1/namespaces/{ns}/secrets/swarm-{eid(pod)}-credential")
        assert own is not None and own["data"]["provider.ANTHROPIC_API_KEY"] == KEY_B64
        await _nothing_leaked(cluster, "keyless", caplog)
    assert cluster.count("create", "pods") == 1
    assert len(await cluster.pods("keyless")) == 1


async def _event_saying(cluster: Cluster, text: str) -> bool:
    return any(text in e["message"] for e in await _events(cluster, "LaunchBlocked"))


async def _status_running(cluster: Cluster, swarm: str) -> bool:
    return ((await cluster.swarm(swarm)).get("status") or {}).get("running") == 1


def _role_path(cluster: Cluster) -> str:
    role = next(d for d in cluster.rbac if d["kind"] == "Role")
    return (
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{cluster.namespace}/roles/{role['metadata']['name']}"
    )


async def _set_rules(cluster: Cluster, rules: list[dict[str, Any]]) -> None:
    headers = {"Content-Type": "application/merge-patch+json"}
    r = await cluster.http.patch(_role_path(cluster), json={"rules": rules}, headers=headers)
    r.raise_for_status()


async def test_a_credential_secret_the_operator_may_not_read_blocks_the_launch_and_says_so(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    """The chart grants ``get`` on Secrets; without it the card names the refusal, and nothing runs."""
    ns = cluster.namespace
    cluster.expected_denials = {("get", "", "secrets")}  # type: ignore[attr-defined]
    await _credential_secret(cluster, {"ANTHROPIC_API_KEY": KEY})
    rules = (await cluster.http.get(_role_path(cluster))).json()["rules"]
    without_get = [
        {**r, "verbs": [v for v in r["verbs"] if v != "get"]}
        if r["apiGroups"] == [""] and "secrets" in r["resources"]
        else r
        for r in rules
    ]
    assert without_get != rules
    await _set_rules(cluster, without_get)
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("unreadable", _with())
        card = await eventually(
            lambda: _blocked_card(cluster, "unreadable", 'Secret "anthropic" cannot be read'),
            what="card naming the refusal",
        )
        assert f"forbidden: the operator may not get secrets in namespace {ns}" in card["launch_blocked"]
        await eventually(
            lambda: _event_saying(cluster, "cannot be read: forbidden"), what="LaunchBlocked Event"
        )
        assert await cluster.pods("unreadable") == [] and cluster.count("create", "pods") == 0

        await _set_rules(cluster, rules)  # the rule is back: the seat launches, once
        await running_seat(cluster, kubelet, "unreadable")
        await eventually(lambda: _no_blocked_card(cluster, "unreadable"), what="card cleared")
    assert cluster.count("create", "pods") == 1
