"""Every URL the OpenAPI document allows fits the server's request line (aiohttp refuses 8 KiB with a 400).

Each parameter is bounded: path parameters by the exact shape the routes accept, query parameters by a
length. The worst case counts every character as 4 UTF-8 bytes, each percent-encoded (12 characters on
the wire), even where a pattern allows ASCII only.
"""

from __future__ import annotations

from agentihooks_operator.api.handlers.held import CALL
from agentihooks_operator.api.openapi import CALL_ID, document
from agentihooks_operator.recovery.models import EXECUTION_RE

#: aiohttp's default limit on the request line (method, URL and version).
REQUEST_LINE_LIMIT = 8190


def worst_bytes(schema: dict[str, object]) -> int:
    """The longest this parameter can be on the wire (every character a 4-byte one, percent-encoded)."""
    enum = schema.get("enum")
    if isinstance(enum, list):
        return max(len(str(v)) for v in enum) * 3
    if schema.get("type") in ("boolean", "integer"):
        return 20
    length = schema.get("maxLength")
    assert isinstance(length, int), f"unbounded parameter: {schema}"
    return length * 12


def test_every_parameter_is_bounded_and_every_url_fits_the_request_line() -> None:
    for path, ops in document()["paths"].items():
        for method, op in ops.items():
            params = op.get("parameters", [])
            for p in params:
                if p["in"] == "path":
                    assert "pattern" in p["schema"], (
                        f"{method} {path}: path parameter {p['name']} has no shape"
                    )
            longest = len(path) + sum(worst_bytes(p["schema"]) + len(p["name"]) + 2 for p in params)
            assert len(method) + 1 + longest + len(" HTTP/1.1") < REQUEST_LINE_LIMIT, (method, path, longest)


def test_path_shapes_are_the_ones_the_routes_check() -> None:
    params = {
        p["name"]: p["schema"]
        for ops in document()["paths"].values()
        for op in ops.values()
        for p in op.get("parameters", [])
        if p["in"] == "path"
    }
    assert params["execution"]["pattern"] == EXECUTION_RE.pattern
    assert params["call"]["pattern"] == CALL_ID == CALL.pattern
