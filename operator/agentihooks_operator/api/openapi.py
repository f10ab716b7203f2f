"""The OpenAPI 3.1 document, generated from the route table and the pydantic models it names.

Served at ``/v1/openapi.json``; ``docs/api.md`` is checked against it by a test.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from agentihooks_checkpoint.scope import NAMESPACE
from pydantic import BaseModel

from ..recovery.models import EXECUTION_ID
from ..swarm import IDENTIFIER, SEAT_NAME
from .schemas import Problem


def _version() -> str:
    """The package's own version (pyproject.toml), so the document names the release it describes."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentihooks-recovery")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0+unknown"


VERSION = _version()
_PARAM = re.compile(r"{(\w+)}")
#: A held recovery's call id (``rc-`` and 16 hex digits).
CALL_ID = r"^rc-[0-9a-f]{16}$"
#: Path parameters: the shapes the routes can answer with success (anything else is refused), so
#: every URL the document allows stays far below the server's 8 KiB request-line limit.
PATH_PARAMS = {
    "execution": {"type": "string", "pattern": EXECUTION_ID, "maxLength": 36},
    "swarm": {"type": "string", "pattern": IDENTIFIER, "maxLength": 128},
    "namespace": {"type": "string", "pattern": NAMESPACE, "maxLength": 63},
    "seat": {"type": "string", "pattern": SEAT_NAME, "maxLength": 63},
    "call": {"type": "string", "pattern": CALL_ID, "maxLength": 19},
}


def _schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, str]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in schema.pop("$defs", {}).items():
        components[name] = sub
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _event_schema(event: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """One Server-Sent Event as OpenAPI 3.1 describes a ``text/event-stream`` item: its ``event``
    (the type), ``id``, and a ``data`` line holding one ``event`` model as JSON."""
    ref = _schema(event, components)
    types = components[event.__name__].get("properties", {}).get("type", {}).get("enum")
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", **({"enum": types} if types else {})},
            "id": {"type": "string"},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": ref},
        },
        "additionalProperties": False,
    }


def _content(body: Any, components: dict[str, Any], *, error: bool) -> dict[str, Any]:
    from .routes import EventStream

    if isinstance(body, type) and issubclass(body, BaseModel):
        return {"application/json": {"schema": _schema(body, components)}}
    if isinstance(body, EventStream):
        return {
            "application/json": {"schema": _schema(body.answer, components)},
            "text/event-stream": {"schema": _event_schema(body.event, components)},
        }
    if body == "metrics":
        return {
            "text/plain": {"schema": {"type": "string"}},
            "application/openmetrics-text": {"schema": {"type": "string"}},
        }
    if body == "octet":
        return {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    if error:
        return {"application/json": {"schema": _schema(Problem, components)}}
    return {"application/json": {"schema": {"type": "object"}}}


def _response(route: Any, status: int, desc: str, body: Any, components: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": desc, "content": _content(body, components, error=status >= 400)}
    if status in route.links:
        out["links"] = route.links[status]
    return out


def _operation(route: Any, components: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": route.summary,
        "operationId": route.operation_id,
        "x-auth": route.auth,
        "responses": {
            str(status): _response(route, status, desc, body, components)
            for status, (desc, body) in sorted(route.responses.items())
        },
    }
    if route.auth != "none":
        op["security"] = [{"bearer": []}]
    params = [
        {"name": n, "in": "path", "required": True, "schema": PATH_PARAMS[n]}
        for n in _PARAM.findall(route.path)
    ]
    params += [
        {
            "name": p.name,
            "in": "query",
            "required": p.required,
            "schema": p.schema,
            "description": p.description,
        }
        for p in route.query
    ]
    if params:
        op["parameters"] = params
    if route.request is not None:
        op["requestBody"] = {"required": True, "content": _content(route.request, components, error=False)}
    return op


@cache
def document() -> dict[str, Any]:
    from .routes import all_routes

    components: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for route in all_routes():
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, components)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agentihooks control API",
            "version": VERSION,
            "description": "Restore decisions, worker reports, scoped checkpoint routes, status and metrics.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
