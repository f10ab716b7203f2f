"""The CLI without a control URL, on the real control plane: every way of not finding the operator is
one line naming the context, the namespace and the object it looked at.

The way through (a port-forward to the operator's Pod and the token read from its Secret) needs a
kubelet that really serves port-forwards: it is tested on the chart installed on the real node
(tests/integration/chart/test_chart_on_real_node.py, step 2b).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from agentihooks_demo.cluster import create_namespace
from agentihooks_demo.controlplane import write_kubeconfig
from agentihooks_operator.cli.main import app
from click.testing import Result
from testsupport.controlplane import ControlPlane
from testsupport.redis_server import free_port
from typer.testing import CliRunner

from .test_swarm_commands import one_error_line

LABELS = {"app.kubernetes.io/part-of": "agentihooks-recovery", "app.kubernetes.io/component": "operator"}


def _run(*args: str, kubeconfig: Path | None, home: Path) -> Result:
    """The CLI with no control URL or token: only the kubeconfig (or none) to go on."""
    env = {"HOME": str(home), "KUBECONFIG": str(kubeconfig) if kubeconfig else "", "AGENTIHOOKS_TOKEN": ""}
    env["AGENTIHOOKS_CONTROL_URL"] = ""
    return CliRunner().invoke(app, list(args), env=env)


def _service(plane: ControlPlane, namespace: str, name: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": LABELS},
        "spec": {
            "selector": {**LABELS, "app.kubernetes.io/instance": name},
            "ports": [{"name": "http", "port": 80}],
        },
    }
    with plane.client() as http:
        r = http.post(f"/api/v1/namespaces/{namespace}/services", json=body)
        assert r.status_code == 201, r.text


@pytest.fixture(scope="module")
def two_releases(control_plane: ControlPlane) -> tuple[str, str]:
    """Two namespaces, each with a control Service and no operator Pod behind it."""
    names = (f"ah-rel-a-{uuid.uuid4().hex[:6]}", f"ah-rel-b-{uuid.uuid4().hex[:6]}")
    for ns in names:
        create_namespace(control_plane, ns, restricted=False)
        _service(control_plane, ns, "agentihooks-agentihooks-recovery")
    return names


def test_no_kubeconfig_says_what_to_pass(tmp_path: Path) -> None:
    r = _run("swarm", "example", "status", kubeconfig=None, home=tmp_path)
    assert r.exit_code == 3, r.output
    line = one_error_line(r.output)
    assert "no control URL and no usable kubeconfig" in line and "--control-url" in line, line


def test_an_unknown_context_is_named(control_plane: ControlPlane, tmp_path: Path) -> None:
    r = _run("--context", "nope", "swarm", "list", kubeconfig=control_plane.admin_kubeconfig, home=tmp_path)
    assert r.exit_code == 3
    assert one_error_line(r.output) == "error: the kubeconfig has no context 'nope'"


def test_an_api_server_that_is_not_there_is_named_by_its_context(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    gone = write_kubeconfig(
        tmp_path / "gone.kubeconfig", f"https://127.0.0.1:{free_port()}", control_plane.ca.cert, name="gone"
    )
    r = _run("swarm", "list", kubeconfig=gone, home=tmp_path)
    assert r.exit_code == 3
    assert one_error_line(r.output).startswith("error: cannot reach the API server of context 'gone'"), (
        r.output
    )


def test_the_wrong_operator_namespace_is_named(control_plane: ControlPlane, tmp_path: Path) -> None:
    empty = f"ah-empty-{uuid.uuid4().hex[:6]}"
    create_namespace(control_plane, empty, restricted=False)
    r = _run(
        "--operator-namespace",
        empty,
        "swarm",
        "list",
        kubeconfig=control_plane.admin_kubeconfig,
        home=tmp_path,
    )
    assert r.exit_code == 3
    line = one_error_line(r.output)
    assert (
        "no agentihooks control Service" in line and f"in namespace '{empty}', context 'envtest'" in line
    ), line
    assert "--operator-namespace" in line


def test_several_releases_are_listed_and_one_is_chosen_by_namespace(
    control_plane: ControlPlane, two_releases: tuple[str, str], tmp_path: Path
) -> None:
    r = _run("swarm", "list", kubeconfig=control_plane.admin_kubeconfig, home=tmp_path)
    assert r.exit_code == 3
    line = one_error_line(r.output)
    assert "several agentihooks control Services" in line and "pass --operator-namespace" in line, line
    for ns in two_releases:
        assert f"{ns}/agentihooks-agentihooks-recovery" in line, line
    # One namespace named: that release's Service is found, and it has no ready operator Pod.
    a = two_releases[0]
    r = _run(
        "--operator-namespace", a, "swarm", "list", kubeconfig=control_plane.admin_kubeconfig, home=tmp_path
    )
    assert r.exit_code == 3
    assert one_error_line(r.output) == (
        f"error: no ready operator Pod behind Service {a}/agentihooks-agentihooks-recovery, context 'envtest'"
    )


def test_a_control_url_never_reads_the_kubeconfig(tmp_path: Path) -> None:
    broken = tmp_path / "broken.kubeconfig"
    broken.write_text("{not yaml: [")
    env = {"KUBECONFIG": str(broken), "HOME": str(tmp_path), "AGENTIHOOKS_TOKEN": "t"}
    r = CliRunner().invoke(
        app, ["--control-url", f"http://127.0.0.1:{free_port()}", "swarm", "list"], env=env
    )
    assert r.exit_code == 3
    assert one_error_line(r.output).startswith("error: cannot reach the controller at http://127.0.0.1:"), (
        r.output
    )
