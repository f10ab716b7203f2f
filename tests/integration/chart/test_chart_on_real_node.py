"""The chart installed as a user installs it, with its own images, on Pods a real node runs (issue 24).

``helm install`` (the pinned helm, near-default values) puts the operator and the chart's Redis into
real containers on the real node (testsupport/realnode.py): the operator image built here from
deploy/Dockerfile.operator, and a Redis image made from this machine's redis-server (the chart's
default names a registry this machine cannot reach). Both namespaces enforce Pod Security
``restricted``, so every Pod the chart or the operator makes was admitted under it. What a real
cluster gives and the other tiers simulate is real here:

- the operator runs with **in-cluster configuration**: its ServiceAccount token from the projected
  volume, the API server through the ``kubernetes`` Service (kube-proxy's iptables rules to the
  address the API server advertises) and Redis through its Service's DNS name (the node's DNS);
- its container really runs as the chart asks: a non-root user, no capabilities, no new
  privileges, seccomp and a read-only root, read from its process on this machine;
- a seat runs in the worker image built from deploy/Dockerfile.worker; its first attempt's harness
  exits 3: the operator in its Pod fences it ``application_exit`` and releases it once; a master's
  decision, posted with the ``agentihooks`` CLI to the control API through its Service, launches
  exactly one replacement (the API server's audit log counts the operator's creates), whose real
  worker entrypoint verifies its start and reports it to the control API through the Service's DNS
  name the chart gave it, before its harness runs;
- the release is first installed from the **previous chart** (this repository's chart at
  :data:`PREVIOUS`, which shipped the Swarm CRD under ``crds/``; in a clone without that history,
  this chart laid out the same way) and then upgraded to this one with
  no hand step: the CRD exists but is not the release's, so the chart's pre-upgrade hook runs as a
  real Job on the node and takes it over (applies the chart's CRD, marks it as the release's); a
  second upgrade then carries the CRD in the release itself. Neither upgrade relaunches anything: the
  replacement keeps running, no Pod is created or fenced again;
- ``helm test`` runs the chart's check Pod on the node: the operator ready, the control API answering
  through its Service, Redis refusing a client without the password, the CRD served;
- ``helm uninstall`` runs the pre-delete hook as a real Job on the node (its identity's calls are in
  the audit log), which stops the operator and takes its finalizer off the Swarm.

One flow, in order, on one release: each step stands on the one before (a release costs about a
minute to install on two cores).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from agentihooks_demo.cluster import create_namespace
from agentihooks_demo.controlplane import write_kubeconfig
from agentihooks_operator.recovery import FenceRecord
from testsupport.controlplane import ControlPlane
from testsupport.helm import CHART, Helm
from testsupport.images import project_images, redis_image
from testsupport.kube import eventually
from testsupport.realcluster import swarm_body
from testsupport.realnode import IMAGES, POD_TEMPLATE, proc_status
from testsupport.recovery import keys_of

pytestmark = pytest.mark.slow

RELEASE = "rel"
FULLNAME = f"{RELEASE}-agentihooks-recovery"
SWARMS = "/apis/agentihooks.io/v1alpha1/namespaces/{ns}/swarms"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
TOKEN = "operator-token-for-the-real-node-" + uuid.uuid4().hex
#: The last commit whose chart shipped the Swarm CRD under ``crds/`` (Helm installs it once and never
#: upgrades it): the chart an upgrade comes from.
PREVIOUS = "f31d34e8809f3b372df60e7b8d1f9d4211946aa5"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/swarms.agentihooks.io"


def previous_chart(into: Path) -> Path:
    """The chart of :data:`PREVIOUS`, from this clone's history; in a clone without it (a shallow
    one), this chart laid out as that one was: the CRD under ``crds/``, no CRD template, no hook."""
    repo = CHART.parents[1]
    known = subprocess.run(["git", "cat-file", "-e", f"{PREVIOUS}^{{commit}}"], cwd=repo, check=False)
    if known.returncode != 0:
        return crds_folder_chart(into)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", PREVIOUS, "charts/agentihooks-recovery"],
        cwd=repo,
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    chart = into / "charts" / "agentihooks-recovery"
    assert (chart / "crds" / "swarms.agentihooks.io.yaml").exists(), "the previous chart ships crds/"
    return chart


def _ref(ref: str) -> dict[str, str]:
    repository, _, tag = ref.rpartition(":")
    return {"repository": repository, "tag": tag, "pullPolicy": "Never"}


#: The seat's harness: the first generation's exits 3 (the agent failed), any later one runs on.
HARNESS = 'grep -q \'"generation":1,\' "$AGENTIHOOKS_LAUNCH_RECORD" && exit 3; exec sleep 100000'


def _worker_swarm(image: str) -> dict[str, Any]:
    return {
        "image": image,
        "harness": {"name": "claude", "command": ["sh", "-c", HARNESS]},
        # nothing to clone: no Pod reaches beyond this machine
        "seats": [{"name": "eng-1", "project": "unknown", "task": {"id": "t-1", "text": "task"}}],
        "recovery": {"automation": True, "passIntervalSeconds": 0.5},
        "podTemplate": {
            "spec": {
                **POD_TEMPLATE,
                "terminationGracePeriodSeconds": 3,
                "container": {
                    "imagePullPolicy": "Never",
                    "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}},
                },
            }
        },
    }


def _outcome(node: Node, namespace: str, swarm: str, execution_id: str) -> dict[str, Any] | None:
    """The restore outcome the attempt's worker reported to the control API, as the operator stored it."""
    with _redis(node, namespace) as client:
        raw = client.hget(keys_of(client, swarm).restore_outcomes, execution_id)
    return dict(json.loads(raw)) if raw else None


class Node:
    """What the test reads from the API server and the real node."""

    def __init__(self, plane: ControlPlane, real_node: Any) -> None:
        self.plane = plane
        self.real_node = real_node
        self.http = plane.client(timeout=15)

    def get(self, path: str) -> dict[str, Any] | None:
        r = self.http.get(path)
        return r.json() if r.status_code == 200 else None

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        r = self.http.get(f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": selector})
        r.raise_for_status()
        return list(r.json()["items"])

    def creates(self, user: str, namespace: str, resource: str = "pods") -> list[str]:
        """Names of the objects ``user`` really created (2xx) in ``namespace``, from the audit log."""
        names = []
        for e in self.plane.audit_events():
            ref = e.get("objectRef") or {}
            code = int((e.get("responseStatus") or {}).get("code") or 0)
            if (
                e.get("stage") == "ResponseComplete"
                and (e.get("user") or {}).get("username") == user
                and e.get("verb") == "create"
                and ref.get("resource") == resource
                and not ref.get("subresource")
                and ref.get("namespace") == namespace
                and 200 <= code < 300
            ):
                names.append(
                    str(ref.get("name") or (e.get("responseObject") or {}).get("metadata", {}).get("name"))
                )
        return names

    def diagnose(self, *namespaces: str) -> str:
        """What a failure report needs: each Pod's state and the tail of its containers' logs."""
        lines = []
        for ns in namespaces:
            for pod in self.pods(ns, ""):
                meta, status = pod["metadata"], pod.get("status") or {}
                lines.append(f"pod {ns}/{meta['name']}: {status.get('phase')} {status.get('conditions')}")
                for c in status.get("containerStatuses") or []:
                    lines.append(f"  {c['name']}: {c.get('state')} restarts={c.get('restartCount')}")
                folder = self.real_node.root / "pod-logs"
                for log in folder.glob(f"{ns}_{meta['name']}_*/*/*.log"):
                    lines.append(f"  {log.relative_to(folder)}:\n" + log.read_text(errors="replace")[-3000:])
        return "\n".join(lines)

    def calls(self, user: str) -> list[tuple[str, str, int]]:
        out = []
        for e in self.plane.audit_events():
            if e.get("stage") == "ResponseComplete" and (e.get("user") or {}).get("username") == user:
                ref = e.get("objectRef") or {}
                out.append((str(e["verb"]), str(ref.get("resource")), int(e["responseStatus"]["code"])))
        return out


def _ready(pod: dict[str, Any] | None) -> bool:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _running(pod: dict[str, Any] | None) -> bool:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and "running" in (statuses[0].get("state") or {})


@pytest.fixture(scope="module")
def node(control_plane: ControlPlane, real_node: Any) -> Iterator[Node]:
    n = Node(control_plane, real_node)
    yield n
    n.http.close()


@pytest.fixture(scope="module")
def images(real_node: Any) -> dict[str, str]:
    built = project_images()
    redis_ref, redis_tar = redis_image(IMAGES)
    for _, tarball in built.values():
        real_node.import_image(tarball)
    real_node.import_image(redis_tar)
    return {"operator": built["operator"][0], "worker": built["worker"][0], "redis": redis_ref}


def _helm(node: Node, helm: Helm, namespace: str, *args: str) -> str:
    kube = ("--namespace", namespace, "--kubeconfig", str(node.plane.admin_kubeconfig), "--timeout", "5m")
    res = helm.run(*args, *kube, timeout=330)
    assert res.returncode == 0, f"helm {args[0]} failed:\n{res.stderr.strip()}\n{node.diagnose(namespace)}"
    return res.stdout


def crds_folder_chart(into: Path) -> Path:
    """This chart as charts before December 2026 shipped it: the Swarm CRD under ``crds/`` (Helm
    installs it once and never upgrades it), no CRD template, no take-over hook, no ``crds`` value."""
    import shutil

    chart = into / "crds-folder-chart" / "agentihooks-recovery"
    shutil.copytree(CHART, chart)
    (chart / "crds").mkdir()
    (chart / "files" / "crds" / "swarms.agentihooks.io.yaml").rename(
        chart / "crds" / "swarms.agentihooks.io.yaml"
    )
    for template in ("crds.yaml", "crd-adopt-hook.yaml"):
        (chart / "templates" / template).unlink()
    values = yaml.safe_load((chart / "values.yaml").read_text())
    values.pop("crds")
    (chart / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    schema = json.loads((chart / "values.schema.json").read_text())
    schema["properties"].pop("crds")
    (chart / "values.schema.json").write_text(json.dumps(schema, indent=2))
    return chart


def _manifest(node: Node, helm: Helm, namespace: str) -> str:
    """``helm get manifest``: what the release holds."""
    kube = ("--namespace", namespace, "--kubeconfig", str(node.plane.admin_kubeconfig))
    res = helm.run("get", "manifest", RELEASE, *kube, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _agentihooks(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``agentihooks`` console script; ``env`` replaces the control URL and token variables."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTIHOOKS_", "KUBECONFIG"))}
    return subprocess.run(
        [str(Path(sys.executable).parent / "agentihooks"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**environ, **(env or {})},
    )


def _viewer(plane: ControlPlane, system: str, folder: Path) -> Path:
    """A kubeconfig (context namespace ``system``) of a user who may find the operator and open a
    port-forward to it, but neither read Secrets nor list Services in other namespaces."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "agentihooks-viewer", "namespace": system},
        "rules": [
            {"apiGroups": [""], "resources": ["services", "pods"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods/portforward"], "verbs": ["create", "get"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "agentihooks-viewer", "namespace": system},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "agentihooks-viewer"},
        "subjects": [{"kind": "User", "name": "agentihooks-viewer", "apiGroup": "rbac.authorization.k8s.io"}],
    }
    with plane.client() as http:
        for path, body in (("roles", role), ("rolebindings", binding)):
            r = http.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{system}/{path}", json=body)
            assert r.status_code == 201, r.text
    identity = plane.ca.issue("agentihooks-viewer", "agentihooks-viewer")
    path = folder / "viewer.kubeconfig"
    return write_kubeconfig(path, plane.url, plane.ca.cert, client=identity, name="viewer", namespace=system)


def _cli(control_url: str, *args: str, until_published: bool = False) -> dict[str, Any]:
    """The ``agentihooks`` CLI as a master's operator runs it, JSON out.

    ``until_published``: an operator Pod that has just started (or replaced the one before it)
    answers ``unknown swarm`` until its first pass publishes the Swarm; that answer is ``{}`` here,
    so a poll goes on (a clean-clone CI run asked before the first pass); so is a connection the
    Service cannot route yet."""
    res = _agentihooks("--control-url", control_url, "--token", TOKEN, *args, "-o", "json")
    if until_published and res.returncode == 1 and res.stderr.startswith("error: unknown swarm"):
        return {}
    # While a Service moves to a new operator Pod, kube-proxy may still send a connection to the old
    # Pod's address for a moment (a clean-clone CI run timed out connecting right after the upgrade's
    # --wait): the poll goes on, and a Service that never answers still fails it by its timeout.
    if until_published and res.returncode == 3 and "cannot reach the controller" in res.stderr:
        return {}
    assert res.returncode == 0, f"agentihooks {' '.join(args)}: {res.stderr.strip()}"
    return dict(json.loads(res.stdout))


@contextlib.contextmanager
def _redis(node: Node, namespace: str) -> Iterator[redis.Redis]:
    """The chart's Redis, reached through its Service (its password from the Secret the chart made)."""
    service = node.get(f"/api/v1/namespaces/{namespace}/services/{FULLNAME}-redis") or {}
    secret = node.get(f"/api/v1/namespaces/{namespace}/secrets/{FULLNAME}-redis-auth") or {}
    password = base64.b64decode(secret["data"]["redis-password"]).decode()
    client = redis.Redis(host=service["spec"]["clusterIP"], port=6379, password=password)
    try:
        yield client
    finally:
        client.close()


def _fence(node: Node, namespace: str, swarm: str, execution_id: str) -> FenceRecord | None:
    with _redis(node, namespace) as client:
        raw = client.hget(keys_of(client, swarm).attempt_fences, execution_id)
    return FenceRecord.model_validate_json(raw) if raw else None


async def test_the_chart_in_pods_recovers_a_real_death_upgrades_and_uninstalls(
    control_plane: ControlPlane, session_helm: Helm, node: Node, images: dict[str, str]
) -> None:
    plane, helm = control_plane, session_helm
    suffix = uuid.uuid4().hex[:6]
    system, agents = f"ah-sys-{suffix}", f"ah-agents-{suffix}"
    create_namespace(plane, system)  # both enforce Pod Security "restricted"
    create_namespace(plane, agents)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "operator-token", "namespace": system},
        "stringData": {"token": TOKEN},
    }
    assert node.http.post(f"/api/v1/namespaces/{system}/secrets", json=secret).status_code == 201
    values = {
        "operator": {
            "image": _ref(images["operator"]),
            "operatorToken": {"existingSecret": "operator-token"},
            **POD_TEMPLATE,
        },
        "redis": {
            "embedded": {"image": _ref(images["redis"]), "persistence": {"enabled": False}, **POD_TEMPLATE}
        },
        "rbac": {"watchNamespaces": [agents]},
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=helm.home, delete=False) as f:
        yaml.safe_dump(values, f)
    installed = False
    try:
        # 1. The previous chart installed with --wait: the operator is Ready only with the API server
        # and Redis reached. Its crds/ CRD exists already (Helm leaves an existing one as it is).
        earlier = previous_chart(Path(helm.home))
        _helm(node, helm, system, "install", RELEASE, str(earlier), "--values", f.name, "--wait")
        installed = True
        operator = node.pods(system, "app.kubernetes.io/component=operator")
        redis_pods = node.pods(system, "app.kubernetes.io/component=redis")
        assert len(operator) == 1 and len(redis_pods) == 1, (operator, redis_pods)
        for pod in (*operator, *redis_pods):
            assert pod["spec"]["nodeName"] == node.real_node.name
            assert _ready(pod), pod["status"]
        proc = node.real_node.process_of(operator[0])
        assert proc_status(proc, "Uid").split()[0] != "0"
        assert proc_status(proc, "CapEff") == "0000000000000000"
        assert proc_status(proc, "NoNewPrivs") == "1"
        assert proc_status(proc, "Seccomp") == "2"
        root = next(ln for ln in (proc / "mountinfo").read_text().splitlines() if ln.split()[4] == "/")
        assert "ro" in root.split()[5].split(","), root
        environ = (proc / "environ").read_bytes().split(b"\0")
        assert not any(v.startswith(b"KUBECONFIG=") for v in environ)  # in-cluster configuration only
        account = operator[0]["spec"]["serviceAccountName"]
        user = f"system:serviceaccount:{system}:{account}"

        # 2. A real death: in the real worker image, the first generation's harness exits 3.
        r = node.http.post(SWARMS.format(ns=agents), json=swarm_body("seat", _worker_swarm(images["worker"])))
        assert r.status_code == 201, r.text
        service = node.get(f"/api/v1/namespaces/{system}/services/{FULLNAME}") or {}
        control_url = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"

        async def fenced_card() -> dict[str, Any] | None:
            status = _cli(control_url, "swarm", "seat", "-n", agents, "status", until_published=True)
            cards = [h for h in status.get("handoffs", []) if h.get("seat") == "eng-1"]
            return cards[0] if cards and cards[0].get("reason") == "application_exit" else None

        card = await eventually(fenced_card, timeout=120, what="the seat fenced application_exit")
        first = card["execution_id"]
        await eventually(
            lambda: (
                (got := _fence(node, system, "seat", first)) is not None
                and got.released == ["grant", "account"]
            ),
            timeout=60,
            what="both releases recorded once",
        )
        assert node.creates(user, agents) == [f"swarm-{first}"], "one Pod before the decision"
        decided = _cli(control_url, "swarm", "seat", "-n", agents, "restore-decision", "eng-1", "fresh")
        assert decided["execution_id"] == first, decided

        async def replacement_running() -> dict[str, Any] | None:
            pods = [
                p
                for p in node.pods(agents, "swarm.agentihooks.io/generation=2")
                if p["metadata"]["labels"].get("swarm.agentihooks.io/swarm") in (None, "seat")
            ]
            return pods[0] if pods and _running(pods[0]) else None

        second = await eventually(replacement_running, timeout=120, what="the replacement running")
        assert second["spec"]["nodeName"] == node.real_node.name
        created = node.creates(user, agents)
        assert len(created) == 2 and created[0] == f"swarm-{first}", created
        # the replacement's real worker verified its (fresh) start and told the control API so,
        # through the Service's DNS name the chart gave it, before its harness started
        replacement = second["metadata"]["labels"]["swarm.agentihooks.io/execution-id"]
        reported = await eventually(
            lambda: _outcome(node, system, "seat", replacement),
            timeout=120,
            what="the replacement's restore outcome reported",
        )
        assert reported["recovery"] == "fresh" and reported["status"] == "verified", reported

        # 2b. The CLI given only a kubeconfig, as a cluster operator runs it: it finds the control
        # Service (searching every namespace), opens its own port-forward to the operator Pod through
        # the API server and the real kubelet, and reads the operator token the admin may read.
        admin = {"KUBECONFIG": str(plane.admin_kubeconfig)}
        res = _agentihooks("-n", agents, "swarm", "seat", "status", "-o", "json", env=admin)
        assert res.returncode == 0, res.stderr
        assert [s["seat"] for s in json.loads(res.stdout)["seats"]] == ["eng-1"]
        # The wrong namespace named: the error says which one and which context it used.
        res = _agentihooks("--operator-namespace", agents, "swarm", "seat", "status", env=admin)
        assert res.returncode == 3, res
        assert f"in namespace {agents!r}, context 'envtest'" in res.stderr, res.stderr
        # A user who may port-forward but not read Secrets: found in the context's namespace, and told
        # which Secret it could not read; given the token, the same user gets through.
        viewer = {"KUBECONFIG": str(_viewer(plane, system, Path(helm.home)))}
        res = _agentihooks("-n", agents, "swarm", "seat", "status", env=viewer)
        assert res.returncode == 3, res
        assert f"Secret {system}/operator-token" in res.stderr and "forbidden" in res.stderr, res.stderr
        assert "context 'viewer'" in res.stderr and TOKEN not in res.stderr + res.stdout
        res = _agentihooks("--token", TOKEN, "-n", agents, "swarm", "seat", "status", "-ojson", env=viewer)
        assert res.returncode == 0, res.stderr
        forwarded = [
            e["objectRef"]["name"]
            for e in plane.audit_events()
            if (e.get("user") or {}).get("username") == "agentihooks-viewer"
            and (e.get("objectRef") or {}).get("subresource") == "portforward"
        ]
        assert set(forwarded) == {operator[0]["metadata"]["name"]}, forwarded  # through the API server

        # 3. helm upgrade to this chart: a new operator Pod, nothing relaunched; no hand step for the CRD
        # (--reset-then-reuse-values: this chart's new defaults, the release's own values on top)
        _helm(
            node, helm, system, "upgrade", RELEASE, str(CHART), "--reset-then-reuse-values",
            "--set", "operator.logFormat=json", "--wait",
        )  # fmt: skip
        crd = node.get(CRD) or {}
        owner = crd["metadata"].get("annotations") or {}
        assert owner.get("meta.helm.sh/release-name") == RELEASE, owner
        assert owner.get("meta.helm.sh/release-namespace") == system, owner
        assert owner.get("helm.sh/resource-policy") == "keep", owner
        assert crd["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "Helm"
        adopter = node.calls(f"system:serviceaccount:{system}:{FULLNAME}-adopt-crd")
        assert any(
            verb == "patch" and res == "customresourcedefinitions" and 200 <= code < 300
            for verb, res, code in adopter
        ), adopter
        assert "kind: CustomResourceDefinition" not in _manifest(node, helm, system)
        # the next upgrade carries the CRD in the release itself (no hook: it is the release's now)
        _helm(node, helm, system, "upgrade", RELEASE, str(CHART), "--reuse-values", "--wait")
        assert "kind: CustomResourceDefinition" in _manifest(node, helm, system)
        upgraded = node.pods(system, "app.kubernetes.io/component=operator")
        live = [p for p in upgraded if not p["metadata"].get("deletionTimestamp")]
        assert [p["metadata"]["name"] for p in live] != [operator[0]["metadata"]["name"]]

        async def new_operator_passed() -> bool:
            status = _cli(control_url, "swarm", "seat", "-n", agents, "status", until_published=True)
            return any(s.get("seat") == "eng-1" for s in status.get("seats", []))

        await eventually(new_operator_passed, timeout=90, what="the upgraded operator answering")
        await asyncio.sleep(5)  # ten passes of the new operator
        again = node.get(f"/api/v1/namespaces/{agents}/pods/{second['metadata']['name']}")
        assert again is not None and again["metadata"]["uid"] == second["metadata"]["uid"] and _running(again)
        assert again["status"]["containerStatuses"][0]["restartCount"] == 0

        # 3b. helm test: a Pod of its own, from the operator image, proves the install works through
        # the control API's Service: operator ready, API answering, Redis authenticated, CRD served.
        said = _helm(node, helm, system, "test", RELEASE, "--logs")
        for part in (
            "ok: the operator is ready",
            "ok: the control API answers through its Service",
            "ok: Redis answers with the operator's password and refuses a client without it",
            "ok: the Swarm CRD is served: 1 Swarm(s)",
            "the install works",
        ):
            assert part in said, said
        assert len(node.creates(user, agents)) == 2, node.creates(user, agents)

        # 4. helm uninstall: the hook Job runs on the node, stops the operator, frees the Swarm.
        _helm(node, helm, system, "uninstall", RELEASE, "--wait")
        installed = False
        hook_calls = node.calls(f"system:serviceaccount:{system}:{FULLNAME}-uninstall")
        assert any(
            verb == "patch" and res == "swarms" and 200 <= code < 300 for verb, res, code in hook_calls
        ), hook_calls
        swarm = node.get(SWARMS.format(ns=agents) + "/seat") or {}
        assert FINALIZER not in (swarm.get("metadata", {}).get("finalizers") or []), swarm["metadata"]
        assert node.pods(system, "app.kubernetes.io/component=operator") == []
        # crds.keep: the CRD, and with it the Swarm, outlives the release
        assert node.get(CRD) is not None and node.get(SWARMS.format(ns=agents) + "/seat") is not None
    finally:
        if installed:
            helm.run("uninstall", RELEASE, "--namespace", system, "--kubeconfig", str(plane.admin_kubeconfig))
        for ns in (agents, system):
            node.http.delete(f"/api/v1/namespaces/{ns}")
