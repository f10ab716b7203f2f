"""Query parameters checked against the route table's schemas before the handler runs.

The OpenAPI document promises each parameter's shape (required, type, length, pattern, enum,
bounds); this middleware holds the server to it, so a request the document calls invalid is refused
with ``400`` (``invalid_request``, naming the parameter, never its value) instead of being read
leniently. It runs after authentication: an unauthenticated caller learns nothing from it.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from aiohttp import web

from .common import Handler
from .errors import bad_request
from .routes import Param, route_table

_INTEGER = re.compile(r"^-?[0-9]{1,18}$")


@cache
def _pattern(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def problem(param: Param, values: list[str]) -> str | None:
    """What is wrong with ``values`` (the parameter's occurrences in the query), or ``None``."""
    name, schema = param.name, param.schema
    if not values:
        return f"{name} is required" if param.required else None
    if len(values) > 1:
        return f"{name} is given more than once"
    value = values[0]
    kind = schema.get("type")
    if kind == "boolean":
        return None if value in ("true", "false") else f"{name} must be true or false"
    if kind == "integer":
        if not _INTEGER.fullmatch(value):
            return f"{name} must be an integer"
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if (lo is not None and int(value) < lo) or (hi is not None and int(value) > hi):
            return f"{name} must be between {lo} and {hi}"
        return None
    if "enum" in schema and value not in schema["enum"]:
        return f"{name} must be one of: {', '.join(map(str, schema['enum']))}"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return f"{name} may be at most {schema['maxLength']} characters"
    excluded = schema.get("not", {}).get("pattern")
    if ("pattern" in schema and not _pattern(schema["pattern"]).search(value)) or (
        excluded is not None and _pattern(excluded).search(value)
    ):
        return (
            "not a checkpoint store key"
            if param.code == "invalid_key"
            else f"{name} does not have the expected form"
        )
    return None


def query_problems(params: tuple[Param, ...], query: Any) -> list[tuple[Param, str]]:
    """Each parameter of ``params`` that ``query`` gets wrong, with what is wrong."""
    found = []
    for param in params:
        wrong = problem(param, query.getall(param.name, []))
        if wrong is not None:
            found.append((param, wrong))
    return found


@web.middleware
async def check_query(request: web.Request, handler: Handler) -> web.StreamResponse:
    resource = request.match_info.route.resource
    route = route_table().get((request.method, resource.canonical)) if resource is not None else None
    if route is not None and route.query:
        wrong = query_problems(route.query, request.query)
        if wrong:
            # the first wrong parameter's code (``invalid_key``, ``invalid_mode``, else ``invalid_request``)
            raise bad_request("; ".join(text for _, text in wrong), wrong[0][0].code)
    return await handler(request)
