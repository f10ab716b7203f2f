"""The pre-delete hook that makes ``helm uninstall`` leave no Swarm stuck on the operator's finalizer.

What the hook does is tested on the real control plane (tests/integration/chart/test_uninstall_real.py);
here: what the chart renders for it, that its RBAC grants exactly what the command calls, and the
command's own logic against a recording client.
"""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator import uninstall
from agentihooks_operator.k8s.errors import ApiError
from testsupport.helm import NAMESPACE, ROOT, Helm, by_kind, env_of, is_hook, one, value_sets, without_hooks

RBAC = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
FULLNAME = "rel-agentihooks-recovery"


def _hooks(helm: Helm, values: Any = None) -> list[dict[str, Any]]:
    """The uninstall hook's objects (not the ``helm test`` Pod, a hook of its own)."""
    return [
        d
        for d in helm.render(values)
        if is_hook(d) and d["metadata"]["annotations"]["helm.sh/hook"] != "test"
    ]


def test_hook_objects_and_their_order(helm: Helm) -> None:
    hooks = _hooks(helm)
    assert sorted(d["kind"] for d in hooks) == sorted(
        ["ServiceAccount", "Role", "RoleBinding", "Role", "RoleBinding", "Job"]
    )
    for doc in hooks:
        notes = doc["metadata"]["annotations"]
        assert notes["helm.sh/hook"] == "pre-delete"
        assert notes["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
        weight = int(notes["helm.sh/hook-weight"])
        assert weight == (0 if doc["kind"] == "Job" else -10), "RBAC first, then the Job"


def test_job_runs_the_operator_image_with_the_flag(helm: Helm) -> None:
    docs = helm.render()
    job = one(docs, "Job")
    deployment = one(docs, "Deployment")
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert container["command"] == ["agentihooks-operator"]
    assert container["args"] == [
        "--remove-finalizers",
        "--stop-deployment",
        f"{NAMESPACE}/{deployment['metadata']['name']}",
        "--wait-seconds",
        "120",
    ]
    operator_env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
    assert env_of(container)["AGENTIHOOKS_NAMESPACES"] == operator_env["AGENTIHOOKS_NAMESPACES"]
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == f"{FULLNAME}-uninstall"
    assert job["spec"]["activeDeadlineSeconds"] == 300
    # it must not match the operator's selector, or it would wait for its own Pod to go
    selector = deployment["spec"]["selector"]["matchLabels"]
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert not all(labels.get(k) == v for k, v in selector.items())


def test_hook_is_off_when_disabled_or_rbac_is_not_created(helm: Helm) -> None:
    assert not _hooks(helm, {"uninstallHook": {"enabled": False}})
    assert not _hooks(helm, {"rbac": {"create": False}})


def _grants(docs: list[dict[str, Any]]) -> set[tuple[str, str, str, str, str]]:
    """(namespace or '*', group, resource, verb, resourceName or '*') of every hook rule."""
    out = set()
    for role in [d for d in docs if d["kind"] in ("Role", "ClusterRole")]:
        ns = role["metadata"].get("namespace", "*")
        for rule in role["rules"]:
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        for n in rule.get("resourceNames") or ["*"]:
                            out.add((ns, g, r, v, n))
    return out


class RecordingKube:
    """Answers like the API server for one Deployment and some Swarms; records every call."""

    def __init__(self, swarms: list[dict[str, Any]], pods_left: int = 0) -> None:
        self.calls: list[tuple[str, str | None, str, str]] = []  # (verb, namespace, resource, name)
        self.swarms = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in swarms}
        self.pods_left = pods_left
        self.replicas = 1
        self.conflicts = 0

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.calls.append(("get", namespace, resource, name))
        if resource == uninstall.DEPLOYMENTS:
            return {"spec": {"selector": {"matchLabels": {"app": "op"}}, "replicas": self.replicas}}
        return self.swarms.get((namespace or "", name))

    def list(self, resource: str, namespace: str | None, labels: Any = None) -> list[Any]:
        self.calls.append(("list", namespace, resource, "*"))
        if resource == uninstall.PODS:
            assert labels == {"app": "op"}
            self.pods_left, left = max(0, self.pods_left - 1), self.pods_left
            return [{"metadata": {"name": f"op-{i}"}} for i in range(left)]
        return [s for (ns, _), s in self.swarms.items() if namespace in (None, ns)]

    def patch(self, resource: str, namespace: str, name: str, body: Any, *, sub: str | None = None) -> Any:
        self.calls.append(("patch", namespace, resource + (f"/{sub}" if sub else ""), name))
        if resource == uninstall.DEPLOYMENTS:
            self.replicas = body["spec"]["replicas"]
            return {}
        swarm = self.swarms[(namespace, name)]
        if self.conflicts:
            self.conflicts -= 1
            swarm["metadata"]["resourceVersion"] = str(int(swarm["metadata"]["resourceVersion"]) + 1)
            raise ApiError(409, "PATCH", name, "Conflict")
        assert body["metadata"]["resourceVersion"] == swarm["metadata"]["resourceVersion"]
        swarm["metadata"]["finalizers"] = body["metadata"]["finalizers"]
        return swarm


def _swarm(ns: str, name: str, finalizers: list[str]) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": "7", "finalizers": finalizers}}


def test_command_stops_the_operator_before_touching_a_swarm() -> None:
    other = "example.com/keep-me"
    kube = RecordingKube(
        [_swarm("team-a", "s1", [uninstall.FINALIZER, other]), _swarm("team-b", "s2", [])], pods_left=2
    )
    report = uninstall.run(
        kube, ["team-a", "team-b"], stop="agentihooks/rel", wait_seconds=30, sleep=lambda _: None
    )  # type: ignore[arg-type]
    assert report.released == ["team-a/s1"] and report.untouched == 1
    assert kube.swarms[("team-a", "s1")]["metadata"]["finalizers"] == [other], "other finalizers stay"
    assert kube.replicas == 0
    verbs = [(v, r) for v, _, r, _ in kube.calls]
    first_swarm_call = next(i for i, (_, r) in enumerate(verbs) if r == uninstall.SWARMS)
    last_pod_list = max(i for i, (_, r) in enumerate(verbs) if r == uninstall.PODS)
    assert last_pod_list < first_swarm_call, "no Swarm is touched while an operator Pod exists"
    assert verbs.count(("list", uninstall.PODS)) == 3, "it waited until the Pods were gone"


def test_a_conflict_is_read_again_not_overwritten() -> None:
    kube = RecordingKube([_swarm("ns", "s", [uninstall.FINALIZER])])
    kube.conflicts = 2
    assert uninstall.run(kube, ["ns"], stop=None).released == ["ns/s"]  # type: ignore[arg-type]
    assert kube.swarms[("ns", "s")]["metadata"]["finalizers"] == []


def test_bad_target_is_refused() -> None:
    for bad in ("name-only", "/x", "ns/", "a/b/c"):
        with pytest.raises(uninstall.UninstallError):
            uninstall.parse_target(bad)


@pytest.mark.parametrize("values", ["default", "replicas", "cluster-wide"])
def test_hook_rbac_grants_exactly_what_the_command_calls(helm: Helm, values: str) -> None:
    docs = helm.render(value_sets()[values]) if values != "default" else helm.render()
    deployment = one(without_hooks(docs), "Deployment")["metadata"]["name"]
    env = env_of(one(docs, "Job")["spec"]["template"]["spec"]["containers"][0])
    namespaces = [n for n in env["AGENTIHOOKS_NAMESPACES"]["value"].split(",") if n]
    kube = RecordingKube([_swarm(ns, "s", [uninstall.FINALIZER]) for ns in namespaces or ["anywhere"]])
    uninstall.run(kube, namespaces, stop=f"{NAMESPACE}/{deployment}", sleep=lambda _: None)  # type: ignore[arg-type]
    group = {uninstall.DEPLOYMENTS: "apps", uninstall.SWARMS: "agentihooks.io", uninstall.PODS: ""}
    called = set()
    for verb, ns, resource, name in kube.calls:
        base, scale, _ = resource.partition("/scale")
        plural = base.rsplit("/", 1)[-1] + scale
        # a call on the Deployment is checked against resourceNames; lists and Swarm patches are not named
        named = name if base == uninstall.DEPLOYMENTS else "*"
        called.add((ns if ns is not None else "*", group[base], plural, verb, named))
    hook_rbac = [d for d in docs if is_hook(d) and d["kind"] in RBAC]
    grants = _grants(hook_rbac)
    if values == "cluster-wide":
        # one Swarm list across all namespaces; a patch is then per object of any namespace
        called = {
            ("*", g, r, v, n) if g == "agentihooks.io" else (ns, g, r, v, n) for ns, g, r, v, n in called
        }
    assert called == grants
    subjects = {
        (s["name"], s["namespace"]) for d in hook_rbac if d["kind"].endswith("Binding") for s in d["subjects"]
    }
    assert subjects == {(f"{FULLNAME}-uninstall", NAMESPACE)}
    assert not [d for d in hook_rbac if d["kind"] == "Role" and "secrets" in str(d["rules"])]


def test_finalizer_is_the_one_kopf_is_told_to_use() -> None:
    from agentihooks_operator.k8s import handlers

    source = (ROOT / "operator" / "agentihooks_operator" / "k8s" / "handlers.py").read_text()
    assert 'settings.persistence.finalizer = f"{DOMAIN}/operator"' in source
    assert f"{handlers.DOMAIN}/operator" == uninstall.FINALIZER


def test_no_hook_objects_in_the_release_manifest_kinds(helm: Helm) -> None:
    """The hook's objects are not part of the release: `helm get manifest` never lists them."""
    assert not [d for d in without_hooks(helm.render()) if d["kind"] == "Job"]
    assert by_kind(helm.render(), "Job")


def test_helm_test_checks_the_install_from_a_pod_of_its_own(helm: Helm) -> None:
    """Issue 47: ``helm test`` proves an install works: a Pod (a ``test`` hook, kept for its log until
    the next run) runs ``agentihooks-operator --check-install`` through the control API's Service, with
    the operator's account and Redis settings, and the NetworkPolicies admit it."""
    docs = helm.render()
    [pod] = [d for d in docs if d["kind"] == "Pod"]
    annotations = pod["metadata"]["annotations"]
    assert (
        annotations["helm.sh/hook"] == "test"
        and annotations["helm.sh/hook-delete-policy"] == "before-hook-creation"
    )
    [container] = pod["spec"]["containers"]
    service = (
        one(docs, "Service")
        if len(by_kind(docs, "Service")) == 1
        else next(
            s
            for s in by_kind(docs, "Service")
            if s["metadata"]["name"] == one(docs, "Deployment")["metadata"]["name"]
        )
    )
    assert container["command"][:2] == ["agentihooks-operator", "--check-install"]
    assert container["command"][2].startswith(f"http://{service['metadata']['name']}.")
    env = {e["name"]: e for e in container["env"]}
    assert env["AGENTIHOOKS_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"].endswith("-redis-auth")
    assert (
        pod["spec"]["serviceAccountName"]
        == one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    )
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    for policy in by_kind(docs, "NetworkPolicy"):
        admitted = [
            f.get("podSelector", {}).get("matchLabels", {})
            for r in policy["spec"]["ingress"]
            for f in r["from"]
        ]
        assert {"app.kubernetes.io/instance": "rel", "app.kubernetes.io/component": "helm-test"} in admitted
    assert not [d for d in helm.render({"helmTest": {"enabled": False}}) if d["kind"] == "Pod"]
