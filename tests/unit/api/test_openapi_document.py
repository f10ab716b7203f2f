"""The OpenAPI document is complete and exact: every served route, real schemas, a correct event stream.

The schemathesis run (tests/integration/api/test_openapi_contract.py) checks live answers against
it; these checks need no server.
"""

from __future__ import annotations

from typing import Any

import redis
from agentihooks_operator.api import ApiState, SwarmRegistry, create_app
from agentihooks_operator.api.openapi import document
from agentihooks_operator.recovery.models import RecoveryEvent

#: Served without being API operations: the ledger pages' HTML shells (index, swarm) and static files.
NOT_OPERATIONS = {
    "/ledger",
    "/ledger/",
    "/ledger/{swarm}",
    "/ledger/{namespace}/{swarm}",
    "/ledger/static/{name}",
}


def served() -> set[tuple[str, str]]:
    app = create_app(ApiState(registry=SwarmRegistry(), redis=redis.Redis()))  # never connects
    out = set()
    for route in app.router.routes():
        path = route.resource.canonical if route.resource is not None else ""
        if route.method != "HEAD" and path not in NOT_OPERATIONS:
            out.add((route.method, path))
    return out


def operations() -> dict[tuple[str, str], dict[str, Any]]:
    return {(m.upper(), p): op for p, ops in document()["paths"].items() for m, op in ops.items()}


def test_every_served_route_is_documented_and_nothing_else() -> None:
    assert served() == set(operations())
    assert ("GET", "/v1/swarms/{swarm}/ledger") in operations()


def test_the_event_stream_is_described_event_by_event() -> None:
    content = operations()[("GET", "/v1/swarms/{swarm}/events")]["responses"]["200"]["content"]
    assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/EventsAnswer"}
    event = content["text/event-stream"]["schema"]
    assert event["type"] == "object" and set(event["required"]) == {"event", "data"}
    assert set(event["properties"]["event"]["enum"]) == set(
        RecoveryEvent.model_fields["type"].annotation.__args__
    )  # type: ignore[union-attr]
    data = event["properties"]["data"]
    assert data["contentMediaType"] == "application/json"
    assert data["contentSchema"] == {"$ref": "#/components/schemas/RecoveryEvent"}


def test_every_success_and_error_answer_has_a_schema_of_its_own() -> None:
    for (method, path), op in operations().items():
        for status, response in op["responses"].items():
            for media, body in response["content"].items():
                schema = body["schema"]
                if (method, path) == ("GET", "/v1/openapi.json") or media != "application/json":
                    continue
                assert "$ref" in schema, (method, path, status, schema)


def test_links_name_real_operations_and_their_parameters() -> None:
    ops = {op["operationId"]: op for op in operations().values()}
    count = 0
    for op in ops.values():
        for response in op["responses"].values():
            for name, link in response.get("links", {}).items():
                target = ops[link["operationId"]]
                params = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}
                assert set(link["parameters"]) == params, (op["operationId"], name)
                count += 1
    assert count >= 20


def test_every_credentialed_operation_answers_401_and_403_and_nothing_documents_500() -> None:
    for (method, path), op in operations().items():
        statuses = set(op["responses"])
        assert "500" not in statuses, (method, path)
        if op["x-auth"] != "none":
            assert {"401", "403"} <= statuses, (method, path)
