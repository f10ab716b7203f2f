"""The real node's DNS (testsupport/nodenet.py) answers as cluster DNS does, and refuses bad queries.

Its packets are built and read here byte by byte; the API it asks is an ``httpx.MockTransport`` (the
edge of this unit), the same answers the real API server gives for a Service and its EndpointSlices.
"""

from __future__ import annotations

import struct
from typing import Any

import httpx
import pytest
from testsupport.nodenet import AAAA, NOERROR, A, Resolver, answer, parse_query

SERVICES: dict[str, dict[str, Any]] = {
    "/api/v1/namespaces/sys/services/redis": {"spec": {"clusterIP": "10.0.0.9"}},
    "/api/v1/namespaces/sys/services/redis-headless": {"spec": {"clusterIP": "None"}},
}
SLICE = {
    "items": [
        {
            "endpoints": [
                {"addresses": ["10.88.0.5"], "hostname": "redis-0", "conditions": {"ready": True}},
                {"addresses": ["10.88.0.6"], "hostname": "redis-1", "conditions": {"ready": False}},
            ]
        }
    ]
}


def query(name: str, qtype: int = A, ident: int = 0x4242) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", qtype, 1)


def api() -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/endpointslices"):
            assert request.url.params["labelSelector"] == "kubernetes.io/service-name=redis-headless"
            return httpx.Response(200, json=SLICE)
        body = SERVICES.get(request.url.path)
        return httpx.Response(200, json=body) if body else httpx.Response(404, json={})

    return httpx.AsyncClient(base_url="https://api.test", transport=httpx.MockTransport(handle))


def test_a_query_is_parsed_and_answered_with_its_id_and_question() -> None:
    packet = query("Redis.SYS.svc.cluster.local", AAAA, ident=7)
    ident, _flags, name, qtype, question = parse_query(packet)
    assert (ident, name, qtype) == (7, "redis.sys.svc.cluster.local", AAAA)
    reply = answer(ident, 0x0100, question, NOERROR, ["10.0.0.9"])
    got_id, flags, qd, an = struct.unpack("!HHHH", reply[:8])
    assert (got_id, qd, an) == (7, 1, 1)
    assert flags & 0x8000 and flags & 0x0F == NOERROR
    assert reply[12 : 12 + len(question)] == question
    assert reply[-4:] == bytes([10, 0, 0, 9])


@pytest.mark.parametrize(
    "packet",
    [
        b"\x00\x01",  # shorter than a header
        struct.pack("!HHHHHH", 1, 0x0100, 2, 0, 0, 0) + b"\0" + b"\0\1\0\1",  # two questions
        struct.pack("!HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\x05ab",  # a name running past the end
        struct.pack("!HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c\0\1\0\1",  # a pointer in a question
        struct.pack("!HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\x01a\0",  # no type and class
    ],
)
def test_malformed_queries_are_refused(packet: bytes) -> None:
    with pytest.raises(ValueError):
        parse_query(packet)


async def test_service_names_resolve_from_the_api_and_others_do_not_exist() -> None:
    async with api() as client:
        resolver = Resolver(client)
        assert await resolver.lookup("redis.sys.svc.cluster.local") == ["10.0.0.9"]
        # a headless Service: its ready endpoints; a StatefulSet Pod's name: its own endpoint
        assert await resolver.lookup("redis-headless.sys.svc.cluster.local") == ["10.88.0.5"]
        assert await resolver.lookup("redis-0.redis-headless.sys.svc.cluster.local") == ["10.88.0.5"]
        assert await resolver.lookup("redis-1.redis-headless.sys.svc.cluster.local") is None  # not ready
        assert await resolver.lookup("missing.sys.svc.cluster.local") is None
        # the search list's misses and names beyond the cluster: NXDOMAIN at once, never forwarded
        assert await resolver.lookup("redis.sys.svc.sys.svc.cluster.local") is None
        assert await resolver.lookup("example.com") is None
