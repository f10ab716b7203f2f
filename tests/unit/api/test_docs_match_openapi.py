"""docs/api.md and the OpenAPI document agree: every route and status is documented, nothing stale."""

from __future__ import annotations

import re
from pathlib import Path

from agentihooks_operator.api.openapi import document
from agentihooks_operator.api.routes import NAME_ONLY, NAMESPACED

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"
ROUTE = re.compile(r"^### (GET|POST|PUT|DELETE) (/\S+)", re.MULTILINE)


def _sections() -> dict[tuple[str, str], str]:
    text = DOC.read_text()
    marks = list(ROUTE.finditer(text))
    out = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out[(m.group(1), m.group(2))] = text[m.end() : end]
    return out


def _name_only(path: str) -> str:
    """The section a namespaced twin shares with its name-only route (documented once)."""
    return path.replace(NAMESPACED, NAME_ONLY, 1)


def test_every_route_is_documented_with_its_statuses_and_nothing_else() -> None:
    doc = document()
    routes = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    twins = {r for r in routes if r[1].startswith(NAMESPACED)}
    assert twins, "every per-swarm route has a namespaced twin"
    assert {(m, _name_only(p)) for m, p in twins} <= routes
    sections = _sections()
    assert set(sections) == routes - twins
    assert NAMESPACED in DOC.read_text(), "docs/api.md says how a swarm is named by namespace"
    for (method, path), body in sections.items():
        for status in doc["paths"][path][method.lower()]["responses"]:
            assert re.search(rf"\b{status}\b", body), f"{method} {path}: status {status} not in docs/api.md"


def test_document_is_openapi_31_with_bearer_security() -> None:
    doc = document()
    assert doc["openapi"].startswith("3.1")
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, ops in doc["paths"].items():
        for op in ops.values():
            assert ("security" in op) == (op["x-auth"] != "none"), path
