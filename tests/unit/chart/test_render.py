"""Every value set renders, lints and validates strictly against Kubernetes 1.30 and 1.35 schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from testsupport.helm import CHART, NAMESPACE, Helm, by_kind, env_of, one, value_sets, without_hooks

VALUE_SETS = value_sets()
K8S_VERSIONS = ["1.30.0", "1.35.0"]
# Kinds whose schema is not part of Kubernetes (checked by shape below instead).
FOREIGN_KINDS = {"ServiceMonitor", "PrometheusRule"}


def test_value_sets_cover_the_issue() -> None:
    assert {"default", "external-redis", "bucket-store", "cluster-wide", "replicas"} <= set(VALUE_SETS)


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lint_strict(helm: Helm, name: str) -> None:
    res = helm.run(
        "lint", "--strict", str(CHART), "--namespace", NAMESPACE, "--values", str(VALUE_SETS[name])
    )
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_manifest_validates_strictly(helm: Helm, name: str, version: str) -> None:
    # Render for that cluster version too (Capabilities.KubeVersion, the chart's kubeVersion gate).
    docs = helm.render(VALUE_SETS[name], "--kube-version", version)
    assert docs
    for doc in docs:
        if doc["kind"] in FOREIGN_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} invalid for {version}: {e.message}")


def test_strict_validation_catches_a_bad_manifest(helm: Helm) -> None:
    """The validator used above does fail: a misspelled field in a rendered Deployment is reported."""
    dep = one(helm.render(), "Deployment")
    dep["spec"]["template"]["spec"]["containers"][0]["readinessProb"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, "1.35.0", strict=True)


def _operator(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["operator"]
    return containers[0]


def test_operator_deployment_is_hardened(helm: Helm) -> None:
    docs = helm.render()
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    c = _operator(docs)
    assert c["command"] == ["agentihooks-operator"]
    assert c["args"] == ["--standalone"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    # the probes have a listener of their own (api/health.py), which API clients cannot starve
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert c["ports"] == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
        {"name": "health", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert env_of(c)["AGENTIHOOKS_HEALTH_PORT"]["value"] == "8081"
    # Read-only root: /tmp is an emptyDir big enough to spool a worker's checkpoint upload.
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "4Gi"}} in pod["volumes"]
    env = env_of(c)
    assert env["AGENTIHOOKS_SWARM_KEY_PREFIX"]["value"] == "agentihooks"
    assert (
        env["AGENTIHOOKS_REDIS_URL"]["value"]
        == f"redis://rel-agentihooks-recovery-redis.{NAMESPACE}.svc:6379/0"
    )
    assert env["AGENTIHOOKS_NAMESPACES"]["value"] == "agents"  # apart from the release namespace
    assert "AGENTIHOOKS_ALLOW_OPERATOR_NAMESPACE" not in env
    assert env["AGENTIHOOKS_OPERATOR_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["AGENTIHOOKS_CONTROL_PORT"]["value"] == "8080"
    # No store by default, and no credential ever appears as a literal value.
    assert not {"AGENTIHOOKS_CHECKPOINT_BUCKET", "AGENTIHOOKS_CHECKPOINT_ROOT"} & set(env)
    assert "AGENTIHOOKS_OPERATOR_TOKEN" not in env
    # Redis requires a password by default: the chart's generated Secret, by reference only.
    assert env["AGENTIHOOKS_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "rel-agentihooks-recovery-redis-auth",
        "key": "redis-password",
    }
    assert "value" not in env["AGENTIHOOKS_REDIS_PASSWORD"]


def test_embedded_redis_has_aof_and_a_claim(helm: Helm) -> None:
    docs = helm.render()
    sts = one(docs, "StatefulSet")
    assert sts["spec"]["replicas"] == 1
    redis = sts["spec"]["template"]["spec"]["containers"][0]
    assert "--appendonly yes" in redis["args"][0]
    [claim] = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert {"name": "data", "mountPath": "/data"} in redis["volumeMounts"]
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }


WATCH = "rbac.watchNamespaces={agents}"


def _install_notes(helm: Helm, *values: str) -> str:
    """The NOTES a ``helm install --dry-run`` of the chart with ``values`` prints."""
    res = helm.run("install", "rel", str(CHART), "--dry-run=client", "--namespace", NAMESPACE, *values)
    assert res.returncode == 0, res.stderr
    return res.stdout.split("NOTES:", 1)[1]


def test_embedded_redis_without_persistence_runs_on_an_empty_dir_and_says_so(helm: Helm) -> None:
    """For a cluster without storage: no claim (nothing stays Pending), an emptyDir, a warning."""
    values = {"redis": {"embedded": {"persistence": {"enabled": False, "size": "1Gi"}}}}
    sts = one(helm.render(values), "StatefulSet")
    assert "volumeClaimTemplates" not in sts["spec"]
    assert "persistentVolumeClaimRetentionPolicy" not in sts["spec"]
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}
    redis = sts["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "data", "mountPath": "/data"} in redis["volumeMounts"]
    warned = _install_notes(helm, "--set", "redis.embedded.persistence.enabled=false", "--set", WATCH)
    assert "WARNING: redis.embedded.persistence.enabled=false" in warned
    assert "persistence.enabled=false" not in _install_notes(helm, "--set", WATCH)
    bad = helm.template({"redis": {"embedded": {"persistence": {"enabled": "no"}}}})
    assert bad.returncode != 0 and "enabled" in bad.stderr


def test_the_log_format_reaches_the_operator(helm: Helm) -> None:
    [op] = one(helm.render(), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert env_of(op)["AGENTIHOOKS_LOG_FORMAT"]["value"] == "text"
    [op] = one(helm.render({"operator": {"logFormat": "json"}}), "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    assert env_of(op)["AGENTIHOOKS_LOG_FORMAT"]["value"] == "json"
    bad = helm.template({"operator": {"logFormat": "logfmt"}})
    assert bad.returncode != 0 and "logFormat" in bad.stderr


def test_the_network_policy_admits_the_servicemonitors_prometheus(helm: Helm) -> None:
    """With both on, the scrape must get through: the Prometheus namespace is admitted, or the chart
    refuses, naming both values."""
    bad = helm.template({"serviceMonitor": {"enabled": True}})
    assert bad.returncode != 0
    assert "serviceMonitor.enabled with networkPolicy.enabled" in bad.stderr
    assert "serviceMonitor.prometheusNamespace" in bad.stderr
    values = {"serviceMonitor": {"enabled": True, "prometheusNamespace": "monitoring"}}
    docs = helm.render(values)
    policy = next(d for d in by_kind(docs, "NetworkPolicy") if "redis" not in d["metadata"]["name"])
    peers = policy["spec"]["ingress"][0]["from"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in peers
    labelled = {**values["serviceMonitor"], "prometheusPodLabels": {"app.kubernetes.io/name": "prometheus"}}
    docs = helm.render({"serviceMonitor": labelled})
    policy = next(d for d in by_kind(docs, "NetworkPolicy") if "redis" not in d["metadata"]["name"])
    [peer] = [p for p in policy["spec"]["ingress"][0]["from"] if "monitoring" in str(p)]
    assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
    # either of the other ways out also renders; without a ServiceMonitor nothing is added
    assert (
        helm.template({"serviceMonitor": {"enabled": True}, "networkPolicy": {"enabled": False}}).returncode
        == 0
    )
    plain = next(d for d in by_kind(helm.render(), "NetworkPolicy") if "redis" not in d["metadata"]["name"])
    assert "monitoring" not in str(plain)
    assert helm.template({"serviceMonitor": {"prometheusNamespace": "Not_A_Namespace"}}).returncode != 0


def test_a_registry_mirror_prefixes_the_charts_images(helm: Helm) -> None:
    values = {"global": {"imageRegistry": "registry.internal:5000/"}, "operator": {"image": {"tag": "1.2.3"}}}
    docs = helm.render(values)
    [op] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert op["image"] == "registry.internal:5000/agentihooks/agentihooks-operator:1.2.3"
    [redis] = one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"]
    assert redis["image"].startswith("registry.internal:5000/redis:")
    [plain] = one(helm.render(), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert plain["image"].startswith("agentihooks/agentihooks-operator:")
    # other charts' globals pass through; a registry that is no host is refused
    assert helm.template({"global": {"storageClass": "fast"}}).returncode == 0
    assert helm.template({"global": {"imageRegistry": "not a registry"}}).returncode != 0


def test_extra_volumes_and_env_reach_the_operator_and_redis(helm: Helm) -> None:
    ca = {"name": "corp-ca", "configMap": {"name": "corp-ca"}}
    mount = {"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}
    env = {"name": "TZ", "value": "UTC"}
    values = {
        "operator": {"extraVolumes": [ca], "extraVolumeMounts": [mount]},
        "redis": {"embedded": {"extraEnv": [env], "extraVolumes": [ca], "extraVolumeMounts": [mount]}},
    }
    docs = helm.render(values)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert ca in pod["volumes"] and mount in pod["containers"][0]["volumeMounts"]
    rpod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    assert ca in rpod["volumes"] and mount in rpod["containers"][0]["volumeMounts"]
    assert env in rpod["containers"][0]["env"] and "REDIS_PASSWORD" in env_of(rpod["containers"][0])
    typo = helm.template({"operator": {"extraVolumes": [{"name": "x", "confgMap": {"name": "x"}}]}})
    assert typo.returncode != 0 and "extraVolumes" in typo.stderr


def test_a_ca_bundle_for_a_tls_redis(helm: Helm) -> None:
    external = {"mode": "external", "auth": {"existingSecret": "redis-pw"}}
    values = {
        "redis": {
            **external,
            "external": {"url": "rediss://redis.internal:6380/0", "tls": {"caSecret": "redis-ca"}},
        }
    }
    pod = one(helm.render(values), "Deployment")["spec"]["template"]["spec"]
    [op] = pod["containers"]
    assert env_of(op)["AGENTIHOOKS_REDIS_CA_FILE"]["value"] == "/etc/agentihooks/redis-ca/ca.crt"
    assert {"name": "redis-ca", "mountPath": "/etc/agentihooks/redis-ca", "readOnly": True} in op[
        "volumeMounts"
    ]
    [vol] = [v for v in pod["volumes"] if v["name"] == "redis-ca"]
    assert vol["secret"] == {"secretName": "redis-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    plain = {
        "redis": {
            **external,
            "external": {"url": "redis://redis.internal:6379/0", "tls": {"caSecret": "redis-ca"}},
        }
    }
    bad = helm.template(plain)
    assert bad.returncode != 0 and "redis.external.tls.caSecret is for a TLS Redis" in bad.stderr
    assert "AGENTIHOOKS_REDIS_CA_FILE" not in env_of(
        one(helm.render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    )


def test_external_redis_and_secrets(helm: Helm) -> None:
    docs = helm.render(VALUE_SETS["external-redis"])
    assert not by_kind(docs, "StatefulSet")
    container = _operator(docs)
    env = env_of(container)
    # The URL carries no password; the password comes from the Secret as its own variable.
    assert env["AGENTIHOOKS_REDIS_URL"]["value"] == "rediss://redis.platform.svc.cluster.local:6380/2"
    assert env["AGENTIHOOKS_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "agentihooks-redis",
        "key": "password",
    }
    assert env["AGENTIHOOKS_OPERATOR_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "agentihooks-operator-token",
        "key": "token",
    }
    assert not by_kind(docs, "Secret"), "the chart never renders credentials"


def test_bucket_store_and_optional_objects(helm: Helm) -> None:
    docs = helm.render(VALUE_SETS["bucket-store"])
    env = env_of(_operator(docs))
    assert env["AGENTIHOOKS_CHECKPOINT_BUCKET"]["value"] == "agentihooks-checkpoints"
    assert env["AGENTIHOOKS_CHECKPOINT_ENDPOINT"]["value"] == "https://s3.eu-west-1.example.com"
    assert env["AWS_DEFAULT_REGION"]["value"] == "eu-west-1"
    for var, key in (
        ("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
        ("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
    ):
        assert env[var]["valueFrom"]["secretKeyRef"] == {"name": "agentihooks-s3", "key": key}
    assert "AGENTIHOOKS_CHECKPOINT_ROOT" not in env
    ingress = one(docs, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus" and rule["spec"]["groups"]
    [dashboard] = [c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    # issue 47: a namespace variable beside the swarm one, and every per-swarm panel filtered by both
    [board] = [json.loads(v) for v in dashboard["data"].values()]
    variables = [v["name"] for v in board["templating"]["list"]]
    assert variables == ["datasource", "namespace", "swarm"]
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", []) if "expr" in t]
    per_swarm = [e for e in exprs if "$swarm" in e]
    assert per_swarm and all('namespace=~"$namespace"' in e for e in per_swarm)
    policies = {p["metadata"]["name"]: p for p in by_kind(docs, "NetworkPolicy")}
    assert set(policies) == {"rel-agentihooks-recovery", "rel-agentihooks-recovery-redis"}
    redis_from = policies["rel-agentihooks-recovery-redis"]["spec"]["ingress"][0]["from"]
    assert redis_from == [
        {"podSelector": {"matchLabels": one(docs, "Deployment")["spec"]["selector"]["matchLabels"]}},
        # the chart's own helm test Pod
        {
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/instance": "rel",
                    "app.kubernetes.io/component": "helm-test",
                }
            }
        },
    ]


def test_cluster_wide_uses_one_cluster_role(helm: Helm) -> None:
    docs = without_hooks(helm.render(VALUE_SETS["cluster-wide"]))
    assert not by_kind(docs, "Role") and not by_kind(docs, "RoleBinding")
    resources = {r for rule in one(docs, "ClusterRole")["rules"] for r in rule["resources"]}
    assert {"swarms", "pods", "nodes"} <= resources
    env = env_of(_operator(docs))
    assert env["AGENTIHOOKS_NAMESPACES"]["value"] == "", "empty means every namespace"
    sa = one(docs, "ServiceAccount")
    assert "eks.amazonaws.com/role-arn" in sa["metadata"]["annotations"]
    assert "AWS_ACCESS_KEY_ID" not in env, "cloud identity: no static keys"


def test_several_replicas(helm: Helm) -> None:
    docs = without_hooks(helm.render(VALUE_SETS["replicas"]))
    assert one(docs, "Deployment")["spec"]["replicas"] == 3
    assert one(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 2
    roles = by_kind(docs, "Role")
    watched = [r["metadata"]["namespace"] for r in roles if not r["metadata"]["name"].endswith("-peers")]
    assert sorted(watched) == ["team-a", "team-b"]
    # the release namespace is not watched: only reading operator Pods by name is granted there
    peers = next(r for r in roles if r["metadata"]["name"].endswith("-peers"))
    assert peers["metadata"]["namespace"] == NAMESPACE
    assert peers["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    bindings = by_kind(docs, "RoleBinding")
    assert {b["subjects"][0]["namespace"] for b in bindings} == {NAMESPACE}
    env = env_of(_operator(docs))
    assert env["AGENTIHOOKS_NAMESPACES"]["value"] == "team-a,team-b"
    assert env["AGENTIHOOKS_CHECKPOINT_ROOT"]["value"] == "/var/lib/agentihooks/checkpoints"
    pvc = one(docs, "PersistentVolumeClaim")
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]


@pytest.mark.parametrize(
    "values, says",
    [
        ({}, "rbac.watchNamespaces is empty"),
        ({"rbac": {"watchNamespaces": ["team-a", NAMESPACE]}}, "includes the release namespace"),
    ],
)
def test_the_swarms_namespace_must_be_given_and_not_be_the_operators(
    helm: Helm, values: dict[str, object], says: str
) -> None:
    """The release namespace holds the operator's account and the Redis password: not watched unless
    the cluster operator says so."""
    args = ["template", "rel", str(CHART), "--namespace", NAMESPACE]
    with_values = helm.template(values) if values else helm.run(*args)  # no base values: the bare chart
    assert with_values.returncode != 0
    assert says in with_values.stderr and f'"{NAMESPACE}"' in with_values.stderr
    assert "ServiceAccount and the Redis password" in with_values.stderr


def test_a_single_namespace_trial_is_allowed_when_asked_for(helm: Helm) -> None:
    docs = without_hooks(helm.render({"rbac": {"watchNamespaces": [], "allowReleaseNamespace": True}}))
    env = env_of(_operator(docs))
    assert env["AGENTIHOOKS_NAMESPACES"]["value"] == NAMESPACE
    assert env["AGENTIHOOKS_ALLOW_OPERATOR_NAMESPACE"]["value"] == "true"
    assert [r["metadata"]["namespace"] for r in by_kind(docs, "Role")] == [NAMESPACE]  # no peers Role


def test_notes_name_the_next_steps(helm: Helm, tmp_path: Path) -> None:
    notes = _install_notes(helm, "--values", str(VALUE_SETS["external-redis"]))
    assert "/v1/executions/$EXECUTION/restore-decision" in notes
    assert "port-forward svc/rel-agentihooks-recovery" in notes
    assert "get secret agentihooks-operator-token" in notes
    # the CLI needs only the kubeconfig: the release's namespace is named for it
    assert f"agentihooks --operator-namespace {NAMESPACE} -n SWARM-NAMESPACE swarm NAME status" in notes
    assert "http://127.0.0.1:8080/ledger/SWARM-NAME" in notes


def test_older_clusters_are_refused(helm: Helm) -> None:
    res = helm.template(None, "--kube-version", "1.29.0")
    assert res.returncode != 0
    assert "kubeVersion" in res.stderr or "incompatible" in res.stderr


def test_package_holds_the_crd_and_leaves_out_the_ci_value_sets(helm: Helm, tmp_path: Path) -> None:
    import tarfile

    res = helm.run("package", str(CHART), "--destination", str(tmp_path))
    assert res.returncode == 0, res.stderr
    [archive] = tmp_path.glob("agentihooks-recovery-*.tgz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "agentihooks-recovery/files/crds/swarms.agentihooks.io.yaml" in names
    assert "agentihooks-recovery/values.schema.json" in names
    assert not [n for n in names if "/ci/" in n]


def test_what_worker_pods_may_borrow_reaches_the_operator(helm: Helm) -> None:
    """The operator's own account and namespace always; the allow-lists only when set."""
    env = env_of(_operator(helm.render()))
    assert env["AGENTIHOOKS_OPERATOR_SERVICE_ACCOUNT"]["value"] == "rel-agentihooks-recovery"
    assert env["AGENTIHOOKS_OPERATOR_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert not {"AGENTIHOOKS_WORKER_SERVICE_ACCOUNTS", "AGENTIHOOKS_WORKER_SECRETS"} & set(env)
    values = {"workerPods": {"serviceAccounts": ["agent-runner", "builder"], "secrets": ["team-ca"]}}
    env = env_of(_operator(helm.render(values)))
    assert env["AGENTIHOOKS_WORKER_SERVICE_ACCOUNTS"]["value"] == "agent-runner,builder"
    assert env["AGENTIHOOKS_WORKER_SECRETS"]["value"] == "team-ca"
    bad = helm.template({"workerPods": {"serviceAccounts": ["Not A Name"]}})
    assert bad.returncode != 0 and "workerPods" in bad.stderr
