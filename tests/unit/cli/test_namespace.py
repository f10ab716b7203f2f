"""Which namespace a CLI command means: -n, AGENTIHOOKS_NAMESPACE, the kubeconfig context, the Pod's."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentihooks_operator.cli import namespace
from agentihooks_operator.cli.client import CliError
from agentihooks_operator.cli.listing import _namespace_first

KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: work
contexts:
- name: work
  context: {cluster: c, user: u, namespace: team-a}
- name: bare
  context: {cluster: c, user: u}
"""


@pytest.fixture(autouse=True)
def _no_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(namespace, "POD_NAMESPACE", tmp_path / "no-such-file")


def test_the_flag_then_the_environment_then_the_kubeconfig_context(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(KUBECONFIG)
    env = {"KUBECONFIG": str(config)}
    assert namespace.resolve("team-b", env) == "team-b"
    assert namespace.resolve(None, {**env, "AGENTIHOOKS_NAMESPACE": "team-c"}) == "team-c"
    assert namespace.resolve(None, env) == "team-a"
    config.write_text(KUBECONFIG.replace("current-context: work", "current-context: bare"))
    assert namespace.resolve(None, env) == "default"  # a context without a namespace, as kubectl


def test_kubeconfig_files_merge_as_kubectl_reads_them(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text("current-context: work\n")
    second.write_text(KUBECONFIG.replace("current-context: work", "current-context: bare"))
    # The first file that sets current-context decides it; the context comes from the one defining it.
    assert namespace.resolve(None, {"KUBECONFIG": f"{first}:{second}"}) == "team-a"


def test_no_kubeconfig_names_the_swarm_alone(tmp_path: Path) -> None:
    assert namespace.resolve(None, {"HOME": str(tmp_path)}) is None
    (tmp_path / "broken").write_text(": not yaml : [")
    assert namespace.resolve(None, {"KUBECONFIG": str(tmp_path / "broken")}) is None
    assert namespace.swarm_path("eng", None) == "/v1/swarms/eng"
    assert namespace.swarm_path("eng", "team-a") == "/v1/namespaces/team-a/swarms/eng"


def test_the_pod_namespace_inside_a_pod(tmp_path: Path) -> None:
    mounted = tmp_path / "namespace"
    mounted.write_text("team-pod\n")
    assert namespace.from_pod(mounted) == "team-pod"
    mounted.write_text("Not A Namespace")
    assert namespace.from_pod(mounted) is None
    namespace.POD_NAMESPACE = mounted  # (restored by the fixture) what resolve falls back to last
    mounted.write_text("team-pod")
    assert namespace.resolve(None, {"HOME": "/nonexistent"}) == "team-pod"


def test_a_bad_namespace_is_one_clear_error() -> None:
    with pytest.raises(CliError, match="not a namespace name: 'Team_A'"):
        namespace.resolve("Team_A", {})


def test_minus_n_after_the_swarm_name_is_read_as_the_groups_option() -> None:
    assert _namespace_first(["eng", "-n", "team-a", "status"]) == ["-n", "team-a", "eng", "status"]
    assert _namespace_first(["eng", "--namespace=team-a", "status"]) == [
        "--namespace=team-a",
        "eng",
        "status",
    ]
    assert _namespace_first(["eng", "status", "-n", "x"]) == ["eng", "status", "-n", "x"]
