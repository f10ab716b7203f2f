"""Every command in the user docs is run by something, so none of them rot.

The commands are taken from the docs' shell blocks (see ``doccommands``).
Each one must be one of:

* a product command (``agentihooks``, ``agentihooks-worker``, ...): the real
  CLI parses it here (``--help`` appended, so nothing is sent anywhere), which
  fails on a renamed verb or option, and its verb is run for real by a test
  or by the demo (its name appears in ``tests/integration`` or ``demo/``);
* ``curl`` against the control API: method and path are a route of the API's
  route table (the API integration and contract tests call every route);
* ``make``/``python``: the target, script or test path exists and the script's
  options parse;
* a cluster-only command (``helm``, ``kubectl``, ``docker``, the kind
  scripts) or a workstation install (``pipx``), listed in :data:`CLUSTER_ONLY`
  with the reason and the test that covers what it acts on; the files it names
  must exist.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
from agentihooks_operator.api.handlers.held import HELD_ROUTES
from agentihooks_operator.api.routes import ROUTES

from .doccommands import REPO, DocCommand, all_commands

COMMANDS = all_commands()

CLUSTER_ONLY = {
    "helm": "needs a cluster; the chart it installs is linted and rendered offline with `helm template` "
    "(tests/unit/chart, tests/integration/chart)",
    "kubectl": "needs a cluster (kubectl cannot talk to the emulated API); the objects these commands create "
    "are the ones the chart's tests render and validate",
    "docker": "no Docker engine on CI machines; the image's wheel stage is built from the same context by "
    "tests/integration/chart/test_image_wheel.py",
    "deploy/kind/": "the kind end-to-end scripts; opt-in, run by tests/e2e where a Docker engine exists",
    "export": "sets a variable for the commands after it",
    "pipx": "installs the CLI on a workstation (needs PyPI for the dependencies); the wheel it installs is "
    "built and opened by tests/integration/chart/test_dist.py, and its `agentihooks` console script is "
    "the one every CLI test and this test run",
}
MAKE_TARGETS = {
    "test": "CI's own command (.ci/run): install, lint, typecheck, pytest",
    "demo": "its recipe (python -m agentihooks_demo.main) is run by tests/integration/demo",
    "evidence": "its recipe (--evidence) is run by tests/integration/demo/test_evidence.py",
    "install": "run by `make test`",
    "bench": "runs bench/*.py (benchmarks are not tests)",
    "control-plane": "run by `make test` before pytest (the integration tests need its binaries)",
    "dist": "its recipe is run by tests/integration/chart/test_dist.py, which opens every artefact",
}
#: Project scripts and what runs them.
SCRIPTS = {
    "scripts/control-plane.sh": "run by `make test` (its control-plane target) on every CI run",
    "scripts/install-deps.sh": "run by `make install`, which `make test` runs",
}
PRODUCT = ("agentihooks", "agentihooks-worker", "agentihooks-operator")
#: Commands that are not installed: (name, what to write instead).
NOT_INSTALLED = {
    "agentihooks-demo": "the demo needs a source checkout and is not a console script: "
    "write `make demo` or `python -m agentihooks_demo.main`",
}


def _placeholders(text: str) -> str:
    text = re.sub(r"\$\([^)]*\)", "x", text)
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", "x", text)


def _exercised(word: str) -> bool:
    for root in (REPO / "tests" / "integration", REPO / "demo"):
        for path in root.rglob("*.py"):
            if path.name != "test_doc_commands.py" and word in path.read_text(errors="replace"):
                return True
    return False


def _verb(argv: list[str]) -> str:
    """The word naming what runs (``restore-decision`` of ``agentihooks swarm X restore-decision``)."""
    if argv[0] == "agentihooks" and len(argv) > 3 and argv[1] == "swarm":
        return argv[3]
    if argv[0] == "agentihooks-worker" and len(argv) > 1:
        return argv[1]
    return argv[0]


def _route_exists(method: str, url: str) -> bool:
    path = re.sub(r"^\S*?(?=/v1/|/healthz|/readyz|/metrics|/ledger)", "", url).split("?", 1)[0]
    for route in (*ROUTES, *HELD_ROUTES):
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", r"[^/]+", re.escape(route.path)) + "$"
        if route.method.upper() == method and re.match(pattern, path):
            return True
    return False


def check(cmd: DocCommand) -> str:
    """What covers ``cmd`` (a short phrase); raises AssertionError naming the doc line otherwise."""
    text = cmd.text
    first = text.split()[0]
    for prefix, reason in CLUSTER_ONLY.items():
        if first == prefix or (prefix.endswith("/") and first.startswith(prefix)):
            for word in shlex.split(_placeholders(text)):
                if re.match(r"^(charts|deploy)/", word):
                    assert (REPO / word).exists(), f"{cmd.where}: {word} does not exist"
            return reason
    argv = shlex.split(_placeholders(text))
    if first in NOT_INSTALLED:
        raise AssertionError(f"{cmd.where}: {first} is not installed: {NOT_INSTALLED[first]}")
    script = first.removeprefix("./")
    if script in SCRIPTS:
        assert (REPO / script).exists(), f"{cmd.where}: {script} does not exist"
        return SCRIPTS[script]
    if first in PRODUCT:
        try:
            done = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=60, check=False)
        except FileNotFoundError as e:
            raise AssertionError(f"{cmd.where}: {first} is not installed (run `make install`)") from e
        assert done.returncode == 0, f"{cmd.where}: `{text}` does not parse: {done.stderr.strip()[-500:]}"
        verb = _verb(argv)
        assert _exercised(verb), f"{cmd.where}: nothing in tests/integration or demo/ runs `{verb}`"
        return f"parsed by the CLI; `{verb}` run by tests or the demo"
    if first == "make":
        target = argv[1] if len(argv) > 1 else ""
        makefile = (REPO / "Makefile").read_text()
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{cmd.where}: no make target {target}"
        assert target in MAKE_TARGETS, f"{cmd.where}: say what runs `make {target}` in MAKE_TARGETS"
        return MAKE_TARGETS[target]
    if first in ("python", "python3"):
        if argv[1:3] == ["-m", "pytest"]:
            for path in (a for a in argv[3:] if not a.startswith("-")):
                assert (REPO / path).exists(), f"{cmd.where}: {path} does not exist"
            return "test paths exist"
        script = REPO / argv[1]
        assert script.exists(), f"{cmd.where}: {argv[1]} does not exist"
        done = subprocess.run(
            [sys.executable, str(script), *argv[2:], "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=REPO,
        )
        assert done.returncode == 0, f"{cmd.where}: `{text}` does not parse: {done.stderr.strip()[-500:]}"
        return "script options parse"
    if first == "curl":
        method = argv[argv.index("-X") + 1] if "-X" in argv else "GET"
        url = next(a for a in argv[1:] if "/v1/" in a or a.startswith("http") or a.startswith("x/"))
        assert _route_exists(method.upper(), url), f"{cmd.where}: {method} {url} is not a control API route"
        return "a route of the control API"
    raise AssertionError(f"{cmd.where}: `{text}` is run by no test; run it in one or list it in CLUSTER_ONLY")


def test_the_docs_have_commands() -> None:
    docs = {c.doc for c in COMMANDS}
    assert "README.md" in docs and len(COMMANDS) > 10


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.where for c in COMMANDS])
def test_doc_command_is_covered(cmd: DocCommand) -> None:
    assert check(cmd)


def test_a_command_nothing_runs_is_caught() -> None:
    with pytest.raises(AssertionError, match="run by no test"):
        check(DocCommand("docs/x.md", 1, "rm -rf /tmp/something"))
    with pytest.raises(AssertionError, match="does not parse"):
        check(DocCommand("docs/x.md", 1, "agentihooks swarm example restore-decisions eng-2 resume"))
    with pytest.raises(AssertionError, match="not a control API route"):
        check(DocCommand("docs/x.md", 1, 'curl -sS -X POST "$CONTROL_URL/v1/executions/e/restore-decisions"'))
    with pytest.raises(AssertionError, match="does not exist"):
        check(DocCommand("docs/x.md", 1, "helm install x charts/no-such-chart"))
    with pytest.raises(AssertionError, match="agentihooks-demo is not installed"):
        check(DocCommand("docs/x.md", 1, "agentihooks-demo --keep"))


def test_readme_has_exactly_the_two_set_up_commands() -> None:
    readme = [c.text for c in COMMANDS if c.doc == "README.md"]
    assert readme == ["make demo", "make test"]
