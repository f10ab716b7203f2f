"""Find the shell commands in the user docs (fenced ``sh``/untagged blocks and indented blocks)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
SHELL_TAGS = {"", "sh", "bash", "shell", "console"}
FENCE = re.compile(r"^```([A-Za-z0-9_-]*)\s*$")
#: First words that make a line a command (anything else in a block is output or a file listing).
EXECUTABLES = (
    "agentihooks",
    "agentihooks-worker",
    "agentihooks-operator",
    "agentihooks-demo",
    "make",
    "python",
    "python3",
    "curl",
    "helm",
    "kubectl",
    "docker",
    "export",
    "pipx",
    "deploy/kind/",
    "./scripts/",
    "scripts/",
)


@dataclass(frozen=True)
class DocCommand:
    doc: str
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _is_command(text: str) -> bool:
    first = text.split(maxsplit=1)[0] if text.split() else ""
    return any(first == e or (e.endswith("/") and first.startswith(e)) for e in EXECUTABLES)


def _joined(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join backslash continuations; drop comments and ``$ `` prompts."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for at, raw in lines:
        text = raw.strip()
        number = at
        if text.startswith("$ "):
            text = text[2:]
        if pending is not None:
            text = pending[1] + " " + text
            number = pending[0]
            pending = None
        if text.endswith("\\"):
            pending = (number, text[:-1].rstrip())
            continue
        text = re.sub(r"\s+#\s.*$", "", text).strip()
        if text and not text.startswith("#"):
            out.append((number, text))
    if pending is not None:
        out.append(pending)
    return out


def commands_in(path: Path) -> list[DocCommand]:
    lines = path.read_text().splitlines()
    found: list[tuple[int, str]] = []
    block: list[tuple[int, str]] | None = None
    tag = ""
    indented: list[tuple[int, str]] = []
    for i, line in enumerate(lines, start=1):
        fence = FENCE.match(line.strip()) if line.lstrip().startswith("```") else None
        if block is None and fence is not None:
            block, tag = [], fence.group(1).lower()
            continue
        if block is not None:
            if line.strip() == "```":
                if tag in SHELL_TAGS:
                    found.extend(_joined(block))
                block = None
            else:
                block.append((i, line))
            continue
        if line.startswith("    ") and (indented or not lines[i - 2].strip()):
            indented.append((i, line))
            continue
        if indented:
            found.extend(_joined(indented))
            indented = []
    found.extend(_joined(indented))
    rel = path.relative_to(REPO).as_posix()
    return [DocCommand(rel, n, t) for n, t in found if _is_command(t)]


def all_commands() -> list[DocCommand]:
    return [c for doc in DOCS for c in commands_in(doc)]
