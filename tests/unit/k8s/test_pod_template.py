"""The worker Pod template and provider credentials, as pure functions: schema, merge, Secret selection.

The real API server's side (admission under Pod Security ``restricted``, the CRD's refusals) is in
tests/integration/operator/test_pod_template.py.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from agentihooks_operator import worker_pod as wp
from agentihooks_operator.k8s import crd
from agentihooks_operator.k8s.building.podpolicy import TemplatePolicy, refusals
from agentihooks_operator.k8s.building.pods import (
    build_launch_record,
    build_pod_spec,
    build_worker_pod,
    build_worker_secret,
)
from agentihooks_operator.k8s.building.podtemplate import apply_template, k8s_fields, template_schema
from agentihooks_operator.k8s.building.provider import ProviderCredential, ProviderCredentialError, select
from agentihooks_operator.swarm import SwarmSpec
from pydantic import ValidationError
from testsupport.podsecurity import EX, OWNER

ROOT = Path(__file__).resolve().parents[3]
KEY = "sk-ant-test-0123456789"
B64 = base64.b64encode(KEY.encode()).decode()


def _spec(template: dict[str, Any] | None = None, **harness: Any) -> SwarmSpec:
    doc: dict[str, Any] = {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "go"], **harness},
        "seats": [{"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "x"}}],
    }
    if template is not None:
        doc["podTemplate"] = template
    return SwarmSpec.model_validate(doc)


FULL_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "payments"}, "annotations": {"cost-center": "42"}},
    "spec": {
        "nodeSelector": {"pool": "agents"},
        "tolerations": [{"key": "agents", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
        "priorityClassName": "agents",
        "imagePullSecrets": [{"name": "registry"}],
        "serviceAccountName": "agent-runner",
        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
        "volumes": [
            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "home", "emptyDir": {"sizeLimit": "20Gi"}},
        ],
        "container": {
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
            "env": [{"name": "GIT_AUTHOR_NAME", "value": "agent"}],
            "envFrom": [{"configMapRef": {"name": "agent-settings"}}],
            "volumeMounts": [{"name": "cache", "mountPath": "/var/cache/agent"}],
            "securityContext": {"runAsUser": 1000},
            "imagePullPolicy": "IfNotPresent",
        },
    },
}


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


# -- defaults ---------------------------------------------------------------------------------------


def test_default_pod_is_restricted_with_writable_empty_dirs_and_no_token() -> None:
    pod = build_pod_spec(_spec(), OWNER, EX)
    spec, c = pod["spec"], _container(pod)
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
    }
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts == {"/var/run/swarm/launch": "launch", "/home/worker": "home", "/tmp": "tmp"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["home"] == {"name": "home", "emptyDir": {}}
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}}
    assert spec["volumes"][0]["secret"]["secretName"] == f"swarm-{EX.execution_id}-credential"
    kubernetes_validate.validate(pod, "1.35.0", strict=True)


@pytest.mark.parametrize(
    ("template", "grace", "kill"),
    [
        (None, 60, 10.0),  # the default leaves 50 s for the final capture and its report
        ({"spec": {"terminationGracePeriodSeconds": 300}}, 300, 10.0),
        ({"spec": {"terminationGracePeriodSeconds": 12}}, 12, 4.0),
        ({"spec": {"terminationGracePeriodSeconds": 2}}, 2, 1.0),
        ({"spec": {"terminationGracePeriodSeconds": 0}}, 0, 1.0),
    ],
)
def test_the_grace_period_leaves_room_for_the_final_capture(
    template: dict[str, Any] | None, grace: int, kill: float
) -> None:
    """The Pod's grace (the template's, else 60 s) and the harness's stop budget in the launch record
    (a third of it, 1 to 10 s): the rest is the worker's for its final capture on a drain."""
    spec = _spec(template)
    assert build_pod_spec(spec, OWNER, EX)["spec"]["terminationGracePeriodSeconds"] == grace
    assert build_launch_record(spec, OWNER, EX).kill_seconds == kill


def test_the_worker_writes_only_under_the_writable_mounts() -> None:
    """Everything the worker and its harness write: attempts dir, HOME, CLAUDE_CONFIG_DIR, CODEX_HOME,
    the checkout, TMPDIR (all in the attempt folder under /home/worker), and /tmp."""
    from agentihooks_worker.attempt import AttemptLayout
    from agentihooks_worker.settings import DEFAULT_ATTEMPTS_DIR

    layout = AttemptLayout(DEFAULT_ATTEMPTS_DIR, EX.execution_id, "codex", "t-1")
    env = layout.environment({})
    written = [
        layout.root,
        layout.worktree,
        Path(env["HOME"]),
        Path(env["CLAUDE_CONFIG_DIR"]),
        Path(env["CODEX_HOME"]),
        Path(env["TMPDIR"]),
    ]
    writable = [Path(p) for p in wp.WRITABLE.values()]
    for path in written:
        assert any(path.is_relative_to(w) for w in writable), path


# -- the template merge ----------------------------------------------------------------------------


def test_a_full_template_is_merged_under_the_operators_fields() -> None:
    pod, warnings = build_worker_pod(_spec(FULL_TEMPLATE), OWNER, EX)
    assert warnings == []
    meta, spec, c = pod["metadata"], pod["spec"], _container(pod)
    assert meta["labels"]["team"] == "payments"
    assert meta["labels"]["swarm.agentihooks.io/swarm"] == "example"
    assert meta["annotations"]["cost-center"] == "42"
    assert meta["annotations"]["swarm.agentihooks.io/seat"] == "eng-1"
    assert spec["nodeSelector"] == {"pool": "agents"}
    assert spec["tolerations"][0]["key"] == "agents"
    assert spec["affinity"]["nodeAffinity"]
    assert spec["priorityClassName"] == "agents"
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert spec["serviceAccountName"] == "agent-runner"
    # A service account name alone never mounts its token.
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "fsGroup": 1000,
        "runAsUser": 1000,
        "runAsGroup": 1000,
    }
    assert c["securityContext"]["runAsUser"] == 1000 and c["securityContext"]["readOnlyRootFilesystem"]
    assert c["resources"]["limits"] == {"memory": "4Gi"}
    assert c["envFrom"] == [{"configMapRef": {"name": "agent-settings"}}]
    assert c["imagePullPolicy"] == "IfNotPresent"
    names = [e["name"] for e in c["env"]]
    assert names[:2] == ["AGENTIHOOKS_LAUNCH_RECORD", "AGENTIHOOKS_WORKER_TOKEN"]
    assert names[-1] == "GIT_AUTHOR_NAME"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["home"] == {"name": "home", "emptyDir": {"sizeLimit": "20Gi"}}  # replaced the default
    assert volumes["cache"]["emptyDir"] == {"sizeLimit": "1Gi"}
    assert {m["mountPath"] for m in c["volumeMounts"]} >= {"/var/cache/agent", "/var/run/swarm/launch"}
    # The operator's fields are untouched.
    assert meta["name"] == f"swarm-{EX.execution_id}" and meta["namespace"] == "team-a"
    assert meta["ownerReferences"][0]["uid"] == "uid-1"
    assert spec["restartPolicy"] == "Never"
    assert c["name"] == "agent" and c["image"] == "ghcr.io/agentihooks/worker:2.1.0"
    assert "command" not in c and "args" not in c
    kubernetes_validate.validate(pod, "1.35.0", strict=True)


def test_a_template_asking_for_the_service_account_token_is_refused_before_any_merge() -> None:
    """The merge itself is mechanical; the launcher checks the template first (k8s/podpolicy.py)."""
    template = {"spec": {"serviceAccountName": "agent-runner", "automountServiceAccountToken": True}}
    found = refusals(template, TemplatePolicy(), "team-a", lambda _name: None)
    assert [f.split(":")[0] for f in found] == [
        "podTemplate.spec.automountServiceAccountToken",
        "podTemplate.spec.serviceAccountName",
    ]


def test_a_template_mount_replaces_a_default_writable_mount() -> None:
    template = {
        "spec": {
            "volumes": [{"name": "work", "persistentVolumeClaim": {"claimName": "agent-home"}}],
            "container": {"volumeMounts": [{"name": "work", "mountPath": "/home/worker"}]},
        }
    }
    pod = build_pod_spec(_spec(template), OWNER, EX)
    mounts = {m["mountPath"]: m["name"] for m in _container(pod)["volumeMounts"]}
    assert mounts["/home/worker"] == "work"
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["launch", "tmp", "work"]  # unused "home" dropped


OVERRIDES: dict[str, Any] = {
    "metadata": {
        "name": "mine",
        "namespace": "elsewhere",
        "labels": {"swarm.agentihooks.io/swarm": "other", "team": "a"},
        "annotations": {"swarm.agentihooks.io/seat": "eng-9"},
    },
    "spec": {
        "restartPolicy": "Always",
        "containers": [{"name": "sidecar", "image": "busybox"}],
        "volumes": [{"name": "launch", "emptyDir": {}}],
        "container": {
            "name": "other",
            "image": "evil:latest",
            "command": ["sh"],
            "args": ["-c", "true"],
            "env": [
                {"name": "AGENTIHOOKS_LAUNCH_RECORD", "value": "/tmp/mine.json"},
                {"name": "AGENTIHOOKS_WORKER_TOKEN", "value": "guess"},
                {"name": "KEEP", "value": "1"},
            ],
            "volumeMounts": [
                {"name": "x", "mountPath": "/var/run/swarm/launch"},
                {"name": "y", "mountPath": "/var/run/swarm/provider/auth.json"},
            ],
        },
    },
}


def test_operator_owned_fields_in_a_template_are_overridden_with_a_warning_each() -> None:
    """What the CRD refuses at admission, should it arrive anyway, gets the operator's value."""
    spec = _spec(OVERRIDES)
    plain = build_pod_spec(_spec(), OWNER, EX)
    pod, warnings = build_worker_pod(spec, OWNER, EX)
    assert pod["metadata"]["name"] == plain["metadata"]["name"]
    assert pod["metadata"]["namespace"] == "team-a"
    assert pod["metadata"]["labels"] == {**plain["metadata"]["labels"], "team": "a"}
    assert pod["metadata"]["annotations"] == plain["metadata"]["annotations"]
    assert pod["spec"]["restartPolicy"] == "Never"
    assert [c["name"] for c in pod["spec"]["containers"]] == ["agent"]
    c = _container(pod)
    assert c["image"] == spec.image and "command" not in c and "args" not in c
    env = {e["name"]: e for e in c["env"]}
    assert env["AGENTIHOOKS_LAUNCH_RECORD"]["value"] == "/var/run/swarm/launch/launch.json"
    assert "secretKeyRef" in env["AGENTIHOOKS_WORKER_TOKEN"]["valueFrom"]
    assert env["KEEP"]["value"] == "1"
    assert [m["name"] for m in c["volumeMounts"] if m["mountPath"].startswith("/var/run/swarm")] == ["launch"]
    launch = [v for v in pod["spec"]["volumes"] if v["name"] == "launch"]
    assert launch == plain["spec"]["volumes"][:1]
    text = "\n".join(warnings)
    for field in (
        "podTemplate.metadata.name",
        "podTemplate.metadata.namespace",
        "podTemplate.metadata.labels[swarm.agentihooks.io/swarm]",
        "podTemplate.metadata.annotations[swarm.agentihooks.io/seat]",
        "podTemplate.spec.restartPolicy",
        "podTemplate.spec.containers",
        "podTemplate.spec.volumes[launch]",
        "podTemplate.spec.container.name",
        "podTemplate.spec.container.image",
        "podTemplate.spec.container.command",
        "podTemplate.spec.container.args",
        "podTemplate.spec.container.env[AGENTIHOOKS_LAUNCH_RECORD]",
        "podTemplate.spec.container.env[AGENTIHOOKS_WORKER_TOKEN]",
        "podTemplate.spec.container.volumeMounts[/var/run/swarm/launch]",
        "podTemplate.spec.container.volumeMounts[/var/run/swarm/provider/auth.json]",
    ):
        assert field + " ignored" in text, field
    assert "guess" not in text and "evil" not in text  # field paths only, never values
    assert len(warnings) == 15


def test_apply_template_leaves_its_input_alone() -> None:
    pod = build_pod_spec(_spec(), OWNER, EX)
    before = copy.deepcopy(pod)
    template = _spec(FULL_TEMPLATE).pod_template
    apply_template(pod, template)
    assert pod == before


def test_the_model_refuses_fields_a_template_does_not_take() -> None:
    for bad in (
        {"spec": {"hostNetwork": True}},
        {"spec": {"container": {"ports": []}}},
        {"metadata": {"finalizers": ["x"]}},
        {"metadata": {"labels": {"a": 1}}},
        {"spec": {"container": {"env": "A=1"}}},
    ):
        with pytest.raises(ValidationError):
            _spec(bad)


# -- the CRD schema --------------------------------------------------------------------------------


def _closed(node: Any) -> Any:
    """OpenAPI (as in CRDs) to Draft 4 with every object closed (kubectl's strict field validation)."""
    if isinstance(node, list):
        return [_closed(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
    if (
        node.get("type") == "object"
        and "properties" in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _schema_errors(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(_closed(crd.spec_schema()))
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def _doc(template: dict[str, Any]) -> dict[str, Any]:
    return {**json.loads(_spec().model_dump_json(by_alias=True, exclude_none=True)), "podTemplate": template}


def test_the_crd_schema_takes_the_full_template() -> None:
    assert _schema_errors(_doc(FULL_TEMPLATE)) == []


@pytest.mark.parametrize(
    ("template", "where"),
    [
        ({"spec": {"nodeSelectr": {"a": "b"}}}, "nodeSelectr"),
        ({"spec": {"container": {"resources": {"limitz": {}}}}}, "limitz"),
        ({"spec": {"tolerations": [{"key": "a", "efect": "NoSchedule"}]}}, "efect"),
        ({"spec": {"priorityClassName": 7}}, "priorityClassName"),
        ({"spec": {"container": {"env": [{"value": "no name"}]}}}, "name"),
    ],
    ids=[
        "misspelt pod field",
        "misspelt resources field",
        "misspelt toleration field",
        "wrong type",
        "env without name",
    ],
)
def test_the_crd_schema_refuses_a_typo_or_wrong_type(template: dict[str, Any], where: str) -> None:
    errors = _schema_errors(_doc(template))
    assert errors and any(where in e for e in errors), errors


def test_the_crd_carries_a_cel_rule_for_every_owned_field() -> None:
    schema = template_schema()
    rules = json.dumps(schema)
    for name in (*wp.OWNED_CONTAINER, *wp.OWNED_POD, "generateName", "ownerReferences"):
        assert f"!has(self.{name})" in rules, name
    assert "!has(self.__namespace__)" in rules
    for name in wp.OWNED_ENV:
        assert f"'{name}'" in rules
    assert "startsWith('swarm.agentihooks.io/')" in rules


def test_the_vendored_kubernetes_shapes_are_current() -> None:
    script = ROOT / "scripts" / "gen-pod-template-defs.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    fields = k8s_fields()
    assert tuple(fields["pod"]) == tuple(sorted(wp.POD_FIELDS))
    assert tuple(fields["container"]) == tuple(sorted(wp.CONTAINER_FIELDS))
    assert fields["kubernetesVersion"] == "1.30.0"


# -- provider credentials --------------------------------------------------------------------------


def _secret(**data: str) -> dict[str, Any]:
    return {"metadata": {"name": "anthropic"}, "data": data}


def test_select_copies_the_harness_keys_base64_and_ignores_the_rest() -> None:
    url = base64.b64encode(b"http://127.0.0.1:9/v1").decode()
    got = select(
        "claude",
        "anthropic",
        _secret(ANTHROPIC_API_KEY=B64, ANTHROPIC_BASE_URL=url, OPENAI_API_KEY=B64, other=B64),
    )
    assert got.env == ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL") and got.files == ()
    assert got.data == {"provider.ANTHROPIC_API_KEY": B64, "provider.ANTHROPIC_BASE_URL": url}
    assert KEY not in repr(got) and B64 not in repr(got)


def test_select_for_codex_takes_the_key_or_the_auth_file() -> None:
    got = select("codex", "openai", _secret(**{"auth.json": B64, "config.toml": B64}))
    assert got.env == () and got.files == ("auth.json", "config.toml")
    got = select("codex", "openai", _secret(OPENAI_API_KEY=B64))
    assert got.env == ("OPENAI_API_KEY",) and got.files == ()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, "has no usable credential key: the claude harness needs one of ANTHROPIC_API_KEY"),
        ({"ANTHROPIC_API_KEY": ""}, "(ANTHROPIC_API_KEY empty)"),
        ({"ANTHROPIC_BASE_URL": B64}, "has no usable credential key"),
    ],
)
def test_select_refuses_a_secret_without_a_credential(data: dict[str, str], expected: str) -> None:
    with pytest.raises(ProviderCredentialError) as caught:
        select("claude", "anthropic", _secret(**data))
    assert expected in str(caught.value) and 'Secret "anthropic"' in str(caught.value)
    assert B64 not in str(caught.value)


def test_provider_credential_reaches_the_pod_only_by_secret_reference() -> None:
    provider = select("codex", "openai", _secret(OPENAI_API_KEY=B64, **{"auth.json": B64}))
    spec = _spec(credentials={"secretName": "openai"})
    spec = spec.model_copy(update={"harness": spec.harness.model_copy(update={"name": "codex"})})
    pod = build_pod_spec(spec, OWNER, EX, provider)
    record = build_launch_record(spec, OWNER, EX, control_url="http://ctl")
    secret = build_worker_secret("worker-token", OWNER, EX, provider, record)
    own = f"swarm-{EX.execution_id}-credential"
    env = {e["name"]: e for e in _container(pod)["env"]}
    assert env["OPENAI_API_KEY"] == {
        "name": "OPENAI_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": own, "key": "provider.OPENAI_API_KEY"}},
    }
    assert env["AGENTIHOOKS_PROVIDER_FILES"]["value"] == "/var/run/swarm/provider"
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "provider")
    assert volume["secret"] == {
        "secretName": own,
        "items": [{"key": "provider.auth.json", "path": "auth.json"}],
        "defaultMode": 0o440,
    }
    mount = next(m for m in _container(pod)["volumeMounts"] if m["name"] == "provider")
    assert mount == {"name": "provider", "mountPath": "/var/run/swarm/provider", "readOnly": True}
    assert secret["data"] == {"provider.OPENAI_API_KEY": B64, "provider.auth.json": B64}
    assert secret["stringData"] == {
        "token": "worker-token",
        "launch.json": record.model_dump_json(exclude_none=True),
    }
    for doc in (pod, record.model_dump(mode="json")):
        text = json.dumps(doc)
        assert B64 not in text and KEY not in text
    kubernetes_validate.validate(pod, "1.35.0", strict=True)
    kubernetes_validate.validate(secret, "1.35.0", strict=True)


def test_seat_credentials_override_the_harness_ones() -> None:
    spec = _spec(credentials={"secretName": "shared"})
    assert spec.credentials_of(spec.seats[0]) is not None
    assert spec.credentials_of(spec.seats[0]).secret_name == "shared"  # type: ignore[union-attr]
    doc = json.loads(spec.model_dump_json(by_alias=True, exclude_none=True))
    doc["seats"][0]["credentials"] = {"secretName": "eng-1-account"}
    own = SwarmSpec.model_validate(doc)
    assert own.credentials_of(own.seats[0]).secret_name == "eng-1-account"  # type: ignore[union-attr]
    with pytest.raises(ValidationError):
        _spec(credentials={"secretName": "Not A Name"})
    assert ProviderCredential.key("auth.json") == "provider.auth.json"


def test_the_documented_swarm_and_the_example_validate() -> None:
    import re

    import yaml

    text = (ROOT / "docs" / "worker-pods.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    swarms = [b for b in blocks if isinstance(b, dict) and b.get("kind") == "Swarm"]
    example = yaml.safe_load((ROOT / "deploy" / "examples" / "swarm.yaml").read_text())
    assert swarms and example["spec"]["harness"]["credentials"]["secretName"]
    for doc in (*swarms, example):
        spec = SwarmSpec.model_validate(doc["spec"])
        assert _schema_errors(doc["spec"]) == []
        assert spec.credentials_of(spec.seats[0]) is not None
        pod, warnings = build_worker_pod(spec, OWNER, EX)
        assert warnings == []
        kubernetes_validate.validate(pod, "1.35.0", strict=True)


class _Kube:
    """Answers one Secret read: an object, ``None`` (404) or an :class:`ApiError`."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str | None, str]] = []

    def get(self, resource: str, namespace: str | None, name: str) -> Any:
        self.calls.append((resource, namespace, name))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_read_says_why_a_secret_cannot_be_had() -> None:
    from agentihooks_operator.k8s.building.provider import read
    from agentihooks_operator.k8s.errors import ApiError

    kube = _Kube(None)
    with pytest.raises(
        ProviderCredentialError, match='Secret "anthropic" does not exist in namespace "team-a"'
    ):
        read(kube, "team-a", "anthropic", "claude")  # type: ignore[arg-type]
    assert kube.calls == [("secrets", "team-a", "anthropic")]
    said = 'secrets "anthropic" is forbidden: User "system:serviceaccount:x:y" cannot get resource "secrets"'
    denied = ApiError(403, "GET", "/api/v1/namespaces/team-a/secrets/anthropic", "Forbidden", said)
    with pytest.raises(ProviderCredentialError) as caught:
        read(_Kube(denied), "team-a", "anthropic", "claude")  # type: ignore[arg-type]
    text = str(caught.value)
    assert text.startswith('provider credential Secret "anthropic" cannot be read: forbidden:')
    assert "may not get secrets in namespace team-a" in text
    flaky = ApiError(503, "GET", "/api/v1/namespaces/team-a/secrets/anthropic", "Service Unavailable")
    with pytest.raises(ApiError):  # a retry may cure it: not a blocked launch
        read(_Kube(flaky), "team-a", "anthropic", "claude")  # type: ignore[arg-type]
    unlent = _Kube(_secret(CLAUDE_CODE_OAUTH_TOKEN=B64))
    with pytest.raises(ProviderCredentialError) as caught:  # its owner did not lend it to Swarms
        read(unlent, "team-a", "anthropic", "claude", path="seats[eng-1].credentials")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "seats[eng-1].credentials: Secret 'anthropic' may be used by a Swarm only when it carries the "
        "label swarm.agentihooks.io/pod-template=allowed (or the cluster operator lists it in "
        "AGENTIHOOKS_WORKER_SECRETS)"
    )
    got = read(unlent, "team-a", "anthropic", "claude", listed=frozenset({"anthropic"}))  # type: ignore[arg-type]
    assert got.env == ("CLAUDE_CODE_OAUTH_TOKEN",)
    lent = _secret(CLAUDE_CODE_OAUTH_TOKEN=B64)
    lent["metadata"]["labels"] = {"swarm.agentihooks.io/pod-template": "allowed"}
    got = read(_Kube(lent), "team-a", "anthropic", "claude")  # type: ignore[arg-type]
    assert got.env == ("CLAUDE_CODE_OAUTH_TOKEN",)


def test_the_seats_repository_reaches_the_worker_as_its_project_remote() -> None:
    """``seats[].repository`` is where the worker clones an empty worktree from; without it in the
    Pod's environment the worker had no repository on a real node and never captured anything."""
    doc = _spec().model_dump(by_alias=True, exclude_none=True)
    doc["seats"][0]["repository"] = "https://git.example/acme/app.git"
    pod, _ = build_worker_pod(SwarmSpec.model_validate(doc), OWNER, EX)
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert json.loads(env["AGENTIHOOKS_PROJECT_REMOTES"]) == {
        "github.com/acme/app": "https://git.example/acme/app.git"
    }
    pod, _ = build_worker_pod(_spec(), OWNER, EX)  # no repository: nothing set, the worker's default
    assert "AGENTIHOOKS_PROJECT_REMOTES" not in {e["name"] for e in pod["spec"]["containers"][0]["env"]}
