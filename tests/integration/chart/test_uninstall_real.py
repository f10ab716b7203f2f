"""``helm uninstall`` never leaves a Swarm stuck on the operator's finalizer: on the real control plane.

There is no kubelet here, so a stand-in plays the kubelet's part for the two Pods that matter, through
the same API calls a kubelet makes: it binds each to the session's Node, builds the container's
environment from the Pod (downward API, Secrets) and a token of the Pod's ServiceAccount bound to the
Pod (what its projected volume holds), runs the container's own command and arguments as a process,
and writes the outcome into the Pod's status; on a graceful deletion it sends SIGTERM, waits for the
process and then removes the Pod. What is real: etcd, kube-apiserver (RBAC, admission with Pod
Security ``restricted``, the audit log), kube-controller-manager (the Deployment, ReplicaSet and Job
controllers, garbage collection, the namespace controller), helm's install and uninstall with its
pre-delete hook phase, the chart's rendered objects, the real ``agentihooks-operator`` (kopf adds its
finalizer to the Swarm and puts it back when it is removed) and the real hook command, each with the
chart's own ServiceAccount and RBAC. What is not: container images, the container runtime and the
kubelet itself (the Pods' commands run from this checkout's installed console scripts).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from agentihooks_operator.uninstall import FINALIZER
from testsupport.controlplane import ControlPlane, write_kubeconfig
from testsupport.helm import CHART, Helm
from testsupport.realcluster import SWARMS, create_namespace
from testsupport.redis_server import free_port

pytestmark = pytest.mark.slow

NODE = "steady-node"  # kept alive for the whole session by the control_plane fixture
MERGE = {"Content-Type": "application/merge-patch+json"}


def wait_for(check: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def swarm_body(namespace: str, name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if finalizers:
        meta["finalizers"] = finalizers
    return {
        "apiVersion": "agentihooks.io/v1alpha1",
        "kind": "Swarm",
        "metadata": meta,
        "spec": {
            "image": "ghcr.io/agentihooks/worker:2.1.0",
            "harness": {"name": "claude", "command": ["claude", "-p", "work"]},
            "seats": [
                {"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "task 1"}}
            ],
            "recovery": {"automation": True, "passIntervalSeconds": 0.5},
        },
    }


def finalizers_of(http: httpx.Client, namespace: str, name: str) -> list[str] | None:
    """The Swarm's finalizers, or ``None`` when it is gone."""
    r = http.get(SWARMS.format(ns=namespace) + f"/{name}")
    if r.status_code == 404:
        return None
    r.raise_for_status()
    return list(r.json()["metadata"].get("finalizers") or [])


class StandInKubelet:
    """Runs chosen Pods of one namespace as local processes, as a kubelet would run their containers."""

    def __init__(self, plane: ControlPlane, namespace: str, workdir: Path) -> None:
        self.plane = plane
        self.namespace = namespace
        self.workdir = workdir
        self.http = plane.client()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.exits: dict[str, int] = {}
        self.wanted: list[Callable[[dict[str, Any]], bool]] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stand-in-kubelet", daemon=True)

    def _path(self, name: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{name}"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.http.close()

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- the container ---------------------------------------------------------------------------
    def _env(self, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        for var in container.get("env") or []:
            source = var.get("valueFrom") or {}
            if "value" in var:
                env[var["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), var["value"])
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                secret = self.http.get(f"/api/v1/namespaces/{self.namespace}/secrets/{ref['name']}").json()
                env[var["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            elif (source.get("fieldRef") or {}).get("fieldPath") == "metadata.name":
                env[var["name"]] = pod["metadata"]["name"]
            elif (source.get("fieldRef") or {}).get("fieldPath") == "metadata.namespace":
                env[var["name"]] = pod["metadata"].get("namespace") or self.namespace
            elif (source.get("fieldRef") or {}).get("fieldPath") == "status.podIP":
                env[var["name"]] = "127.0.0.1"  # every stand-in Pod runs on loopback
            else:
                raise AssertionError(f"unexpected env source: {var}")
        return env

    def _token(self, pod: dict[str, Any]) -> str:
        account = pod["spec"]["serviceAccountName"]
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                },
            },
        }
        r = self.http.post(f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token", json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["status"]["token"])

    def _run(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if not pod["spec"].get("nodeName"):
            body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}}
            body["target"] = {"apiVersion": "v1", "kind": "Node", "name": NODE}
            self.http.post(self._path(name) + "/binding", json=body).raise_for_status()
        [container] = pod["spec"]["containers"]
        kubeconfig = write_kubeconfig(
            self.workdir / f"{name}.kubeconfig", self.plane.url, self.plane.ca.cert, token=self._token(pod)
        )
        argv = [*container["command"], *container.get("args", [])]
        argv[0] = shutil.which(argv[0]) or argv[0]
        env = {
            **self._env(pod, container),
            "PATH": os.environ["PATH"],
            "HOME": str(self.workdir),
            "KUBECONFIG": str(kubeconfig),
            "AGENTIHOOKS_CONTROL_HOST": "127.0.0.1",
        }
        log = (self.workdir / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=log, cwd=self.workdir)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
        self.http.patch(self._path(name) + "/status", json={"status": status}, headers=MERGE)

    def _exited(self, pod: dict[str, Any], code: int) -> None:
        name = pod["metadata"]["name"]
        self.exits[name] = code
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        [container] = pod["spec"]["containers"]
        term = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": now,
            "finishedAt": now,
        }
        status = {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"terminated": term},
                }
            ],
        }
        self.http.patch(self._path(name) + "/status", json={"status": status}, headers=MERGE)

    def _step(self) -> None:
        pods = self.http.get(f"/api/v1/namespaces/{self.namespace}/pods").json().get("items", [])
        for pod in pods:
            name = pod["metadata"]["name"]
            if name not in self.procs:
                if not pod["metadata"].get("deletionTimestamp") and any(want(pod) for want in self.wanted):
                    self._run(pod)
                continue
            proc = self.procs[name]
            if pod["metadata"].get("deletionTimestamp"):
                # graceful deletion: SIGTERM, the grace period, then the Pod object goes
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(pod["spec"].get("terminationGracePeriodSeconds", 30))
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(10)
                    self._exited(pod, proc.returncode)
                body = {"gracePeriodSeconds": 0, "preconditions": {"uid": pod["metadata"]["uid"]}}
                self.http.request("DELETE", self._path(name), json=body)
            elif proc.poll() is not None and name not in self.exits:
                self._exited(pod, proc.returncode)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as e:
                self.errors.append(e)
            self._stop.wait(0.2)


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"un-{uuid.uuid4().hex[:8]}"
    create_namespace(control_plane, name)
    yield name
    with control_plane.client() as http:
        http.delete(f"/api/v1/namespaces/{name}")


def helm_ok(helm: Helm, *args: str) -> str:
    res = helm.run(*args)
    assert res.returncode == 0, f"helm {args[0]} failed:\n{res.stderr.strip()}"
    return res.stdout


def values_file(helm: Helm, values: dict[str, Any]) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=helm.home, delete=False) as f:
        yaml.safe_dump(values, f)
    return f.name


def hook_calls(plane: ControlPlane, user: str) -> tuple[set[tuple[str, str, str]], set[int]]:
    """(verb, group, resource[/sub]) of the hook identity's requests, and the status codes it got."""
    calls, codes = set(), set()
    for e in plane.audit_events():
        if (e.get("user") or {}).get("username") != user or not e.get("objectRef"):
            continue
        if e.get("stage") != "ResponseComplete":
            continue
        ref = e["objectRef"]
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        calls.add((str(e["verb"]), str(ref.get("apiGroup") or ""), resource))
        codes.add(int((e.get("responseStatus") or {}).get("code", 0)))
    return calls, codes


def test_uninstall_hook_stops_the_operator_then_releases_the_swarms(
    control_plane: ControlPlane, helm: Helm, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    release = f"u{uuid.uuid4().hex[:6]}"
    fullname = f"{release}-agentihooks-recovery"
    kube = ("--namespace", namespace, "--kubeconfig", str(control_plane.admin_kubeconfig))
    values = {
        "operator": {"port": free_port(), "terminationGracePeriodSeconds": 20},
        "redis": {"mode": "external", "external": {"url": redis_url}, "auth": {"enabled": False}},
        "uninstallHook": {"waitSeconds": 60},
        "rbac": {"allowReleaseNamespace": True},  # the Swarms live beside the operator here
    }
    kubelet = StandInKubelet(control_plane, namespace, tmp_path)
    labels_of: Callable[[dict[str, Any]], dict[str, str]] = lambda p: p["metadata"].get("labels") or {}  # noqa: E731
    # the operator's Pod (made by the Deployment's ReplicaSet) and the hook Job's Pod
    kubelet.wanted.append(lambda p: labels_of(p).get("app.kubernetes.io/component") == "operator")
    kubelet.wanted.append(
        lambda p: labels_of(p).get("batch.kubernetes.io/job-name") == f"{fullname}-uninstall"
    )
    try:
        # --no-hooks on install: the CRD take-over hook's Job (the session's CRD was applied by hand)
        # would wait for a kubelet that starts only after the install; the uninstall hook is the test
        helm_ok(
            helm, "install", release, str(CHART), *kube, "--values", values_file(helm, values), "--no-hooks"
        )
        kubelet.start()
        with control_plane.client() as http:
            operator_pod = wait_for(
                lambda: next((n for n in kubelet.procs if n.startswith(fullname)), None), "the operator's Pod"
            )
            r = http.post(SWARMS.format(ns=namespace), json=swarm_body(namespace, "kept"))
            assert r.status_code == 201, r.text

            def has_finalizer() -> bool:
                assert kubelet.procs[operator_pod].poll() is None, kubelet.log(operator_pod)[-3000:]
                return FINALIZER in (finalizers_of(http, namespace, "kept") or [])

            wait_for(has_finalizer, "kopf's finalizer on the Swarm", timeout=120)
            # why the hook stops the operator first: a finalizer removed under a running operator is back
            http.patch(
                SWARMS.format(ns=namespace) + "/kept", json={"metadata": {"finalizers": None}}, headers=MERGE
            ).raise_for_status()
            wait_for(has_finalizer, "the running operator putting its finalizer back", timeout=60)

            started = time.monotonic()
            out = helm_ok(helm, "uninstall", release, *kube, "--timeout", "4m")
            took = time.monotonic() - started
            assert "uninstalled" in out
            assert not kubelet.errors, kubelet.errors

            # the hook ran as its own identity, and its Pod stopped the operator before releasing
            hook_pod = next(n for n in kubelet.procs if n.startswith(f"{fullname}-uninstall"))
            assert kubelet.exits.get(hook_pod) == 0, kubelet.log(hook_pod)
            hook_log = kubelet.log(hook_pod)
            assert "scaled Deployment" in hook_log and "the operator's Pods are gone" in hook_log
            assert f"Swarm {namespace}/kept: finalizer {FINALIZER} removed" in hook_log
            assert kubelet.procs[operator_pod].poll() is not None, "the operator was stopped (SIGTERM)"
            assert hook_log.index("the operator's Pods are gone") < hook_log.index("finalizer")

            # the Swarm is kept (data), without the finalizer, and stays so: nothing puts it back
            time.sleep(3)
            assert finalizers_of(http, namespace, "kept") == []
            # the release is gone, and the hook's objects with it (hook-succeeded)
            assert helm.run("status", release, *kube).returncode != 0
            for path in (
                f"/apis/apps/v1/namespaces/{namespace}/deployments/{fullname}",
                f"/apis/batch/v1/namespaces/{namespace}/jobs/{fullname}-uninstall",
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{fullname}-uninstall",
                f"/api/v1/namespaces/{namespace}/serviceaccounts/{fullname}-uninstall",
            ):
                assert wait_for(lambda p=path: http.get(p).status_code == 404, f"{path} deleted", 60)

            # the hook's identity made exactly the calls its RBAC grants, and none was refused
            user = f"system:serviceaccount:{namespace}:{fullname}-uninstall"
            calls, codes = hook_calls(control_plane, user)
            assert calls == {
                ("get", "apps", "deployments"),
                ("patch", "apps", "deployments/scale"),
                ("list", "", "pods"),
                ("list", "agentihooks.io", "swarms"),
                ("patch", "agentihooks.io", "swarms"),
            }
            assert codes <= {200}, codes

            # nothing hangs now: the Swarm goes at once, and so does its namespace
            http.delete(SWARMS.format(ns=namespace) + "/kept").raise_for_status()
            wait_for(lambda: finalizers_of(http, namespace, "kept") is None, "the Swarm deleted", 30)
            http.delete(f"/api/v1/namespaces/{namespace}").raise_for_status()
            wait_for(
                lambda: http.get(f"/api/v1/namespaces/{namespace}").status_code == 404, "namespace gone", 120
            )
        assert took < 240
    finally:
        kubelet.close()


def test_without_the_hook_a_swarm_deletion_hangs_until_the_command_runs(
    control_plane: ControlPlane, helm: Helm, namespace: str, tmp_path: Path
) -> None:
    """The control: what the hook prevents is real, and the command alone (as documented for
    ``--no-hooks``) releases a Swarm already being deleted."""
    release = f"n{uuid.uuid4().hex[:6]}"
    kube = ("--namespace", namespace, "--kubeconfig", str(control_plane.admin_kubeconfig))
    helm_ok(
        helm, "install", release, str(CHART), *kube, "--set", "rbac.allowReleaseNamespace=true", "--no-hooks"
    )
    with control_plane.client() as http:
        # the finalizer as kopf writes it (no operator runs in this test)
        body = swarm_body(namespace, "orphan", finalizers=[FINALIZER])
        assert http.post(SWARMS.format(ns=namespace), json=body).status_code == 201
        helm_ok(helm, "uninstall", release, *kube, "--no-hooks")
        http.delete(SWARMS.format(ns=namespace) + "/orphan").raise_for_status()
        time.sleep(5)
        r = http.get(SWARMS.format(ns=namespace) + "/orphan")
        assert r.status_code == 200 and "deletionTimestamp" in r.json()["metadata"], "stuck: the hang"
        proc = subprocess.run(
            [shutil.which("agentihooks-operator") or "agentihooks-operator", "--remove-finalizers"],
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(tmp_path),
                "KUBECONFIG": str(control_plane.admin_kubeconfig),
                "AGENTIHOOKS_NAMESPACES": namespace,
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert f"Swarm {namespace}/orphan: finalizer {FINALIZER} removed" in proc.stderr
        wait_for(lambda: finalizers_of(http, namespace, "orphan") is None, "the Swarm deleted", 30)
