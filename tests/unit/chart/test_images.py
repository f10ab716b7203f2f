"""The Dockerfiles build what the chart and the kind harness expect, run as non-root, and pin harnesses
the worker qualifies for native resume (no Docker engine here: the files are checked, not built)."""

from __future__ import annotations

import re

import pytest
from agentihooks_worker.harness import harness_for
from testsupport.helm import ROOT

DEPLOY = ROOT / "deploy"


def _stages(name: str) -> list[list[str]]:
    """Instruction lines per build stage (continuations joined, comments dropped)."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / name).read_text())
    stages: list[list[str]] = [[]]
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def _args(name: str) -> dict[str, str]:
    found = re.findall(r"^ARG (\w+)=(\S+)$", (DEPLOY / name).read_text(), flags=re.M)
    return dict(found)


@pytest.mark.parametrize("name", ["Dockerfile.operator", "Dockerfile.worker"])
def test_base_images_are_pinned_and_final_user_is_numeric_non_root(name: str) -> None:
    for var, image in _args(name).items():
        if var.endswith("_IMAGE"):
            assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*", image), f"{var}={image} is not pinned"
    final = _stages(name)[-1]
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users, "the final stage sets a USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) > 0, "numeric and non-root, so runAsNonRoot can verify it"


@pytest.mark.parametrize("name", ["Dockerfile.operator", "Dockerfile.worker"])
def test_images_install_the_projects_wheel(name: str) -> None:
    stages = _stages(name)
    assert any("python -m build --wheel" in line for stage in stages for line in stage)
    assert any("COPY --from=wheel /dist/*.whl" in line for line in stages[-1])
    ignore = (DEPLOY / f"{name}.dockerignore").read_text()
    assert "!operator/**" in ignore and "!worker/**" in ignore


def test_operator_image_starts_the_operator_and_exposes_its_port() -> None:
    final = _stages("Dockerfile.operator")[-1]
    assert 'ENTRYPOINT ["agentihooks-operator"]' in final
    assert 'CMD ["--standalone"]' in final
    assert "EXPOSE 8080" in final


def test_worker_image_runs_the_boot_entrypoint_with_git_and_node() -> None:
    final = " ".join(_stages("Dockerfile.worker")[-1])
    assert 'ENTRYPOINT ["tini", "--", "agentihooks-worker", "boot"]' in final
    assert re.search(r"apt-get install .*\bgit\b", final)
    assert "COPY --from=node /usr/local/bin/node" in final


@pytest.mark.parametrize(("harness", "arg"), [("claude", "CLAUDE_CODE_VERSION"), ("codex", "CODEX_VERSION")])
def test_pinned_harnesses_are_qualified_by_the_worker(harness: str, arg: str) -> None:
    version = _args("Dockerfile.worker")[arg]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), "an exact version, never a range"
    adapter = harness_for(harness)
    output = {"claude": f"{version} (Claude Code)", "codex": f"codex-cli {version}"}[harness]
    assert adapter.is_qualified(adapter.parse_version(output))
    final = " ".join(_stages("Dockerfile.worker")[-1])
    package = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}[harness]
    assert f'"{package}@${{{arg}}}"' in final
