"""The real node's two cluster services a Pod needs and a bare node lacks: the API server and DNS.

A Pod reaches the API server as a cluster's Pods do, through the ``kubernetes``
Service: kube-proxy (iptables) turns its ClusterIP into the endpoint the API
server advertises, which is the node's address (:data:`realnode.NODE_IP`).
The test API server listens on loopback only, so this process relays that
address and port to loopback (TLS passes through untouched: the serving
certificate names the ClusterIP and the Service's DNS names).

Service names resolve as cluster DNS resolves them, from the API: the kubelet
points every Pod's ``resolv.conf`` here (``clusterDNS``), and an A query for
``<service>.<namespace>.svc.cluster.local`` answers the Service's ClusterIP;
for a headless Service its ready endpoints' addresses, and
``<hostname>.<service>.<namespace>.svc.cluster.local`` the endpoint of that
hostname (a StatefulSet's Pods). Any other name is NXDOMAIN at once, never a
timeout, and nothing is forwarded beyond this machine. AAAA queries of known
names get an empty answer (the cluster is IPv4 only).

It runs as its own process (``python -m testsupport.nodenet``), started and
stopped by :class:`testsupport.realnode.RealNode`; its command line names the
node's root, so the node's clean-up kills one a killed run left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ssl
import struct
import time
from typing import Any, cast

import httpx

DOMAIN = "svc.cluster.local"
A, AAAA = 1, 28
NXDOMAIN, NOERROR, FORMERR = 3, 0, 1


def parse_query(packet: bytes) -> tuple[int, int, str, int, bytes]:
    """``(id, flags, name, qtype, question)`` of a one-question DNS query; ValueError when malformed."""
    if len(packet) < 12:
        raise ValueError("short header")
    ident, flags, qdcount = struct.unpack("!HHH", packet[:6])
    if qdcount != 1:
        raise ValueError("not one question")
    labels, pos = [], 12
    while True:
        if pos >= len(packet):
            raise ValueError("name runs past the packet")
        size = packet[pos]
        if size == 0:
            pos += 1
            break
        if size > 63:
            raise ValueError("compressed or oversized label in a question")
        labels.append(packet[pos + 1 : pos + 1 + size].decode("ascii", "replace"))
        pos += 1 + size
    if pos + 4 > len(packet):
        raise ValueError("question without type and class")
    (qtype,) = struct.unpack("!H", packet[pos : pos + 2])
    return ident, flags, ".".join(labels).lower(), qtype, packet[12 : pos + 4]


def answer(ident: int, flags: int, question: bytes, rcode: int, addresses: list[str]) -> bytes:
    """A response to one question: ``addresses`` as A records (TTL 5 s) under ``rcode``."""
    out_flags = 0x8000 | (flags & 0x0100) | 0x0080 | 0x0400 | rcode  # QR, RD copied, RA, AA
    header = struct.pack("!HHHHHH", ident, out_flags, 1, len(addresses), 0, 0)
    records = b"".join(
        struct.pack("!HHHIH", 0xC00C, A, 1, 5, 4) + bytes(int(part) for part in ip.split("."))
        for ip in addresses
    )
    return header + question + records


class Resolver:
    """Service names → addresses, read from the API server (cached for a second)."""

    def __init__(self, api: httpx.AsyncClient) -> None:
        self.api = api
        self._cache: dict[str, tuple[float, list[str] | None]] = {}

    async def lookup(self, name: str) -> list[str] | None:
        """The addresses of ``name``, or ``None`` when no such name exists (NXDOMAIN)."""
        hit = self._cache.get(name)
        if hit is not None and time.monotonic() - hit[0] < 1.0:
            return hit[1]
        found = await self._lookup(name)
        self._cache[name] = (time.monotonic(), found)
        return found

    async def _lookup(self, name: str) -> list[str] | None:
        if not name.endswith("." + DOMAIN):
            return None
        parts = name.removesuffix("." + DOMAIN).split(".")
        if len(parts) not in (2, 3):
            return None
        host = parts[0] if len(parts) == 3 else None
        service, namespace = parts[-2], parts[-1]
        got = await self.api.get(f"/api/v1/namespaces/{namespace}/services/{service}")
        if got.status_code != 200:
            return None
        spec: dict[str, Any] = got.json().get("spec") or {}
        cluster_ip = spec.get("clusterIP")
        if host is None and cluster_ip and cluster_ip != "None":
            return [cluster_ip]
        slices = await self.api.get(
            f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
            params={"labelSelector": f"kubernetes.io/service-name={service}"},
        )
        addresses: list[str] = []
        publish_all = bool(spec.get("publishNotReadyAddresses"))
        for item in slices.json().get("items", []) if slices.status_code == 200 else []:
            for endpoint in item.get("endpoints") or []:
                ready = (endpoint.get("conditions") or {}).get("ready") is not False
                if (ready or publish_all) and (host is None or endpoint.get("hostname") == host):
                    addresses.extend(endpoint.get("addresses") or [])
        if host is not None and not addresses:
            return None
        return addresses


class _Dns(asyncio.DatagramProtocol):
    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)  # the selector's is not a subclass

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        asyncio.get_running_loop().create_task(self._reply(data, addr))

    async def _reply(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            ident, flags, name, qtype, question = parse_query(data)
        except ValueError:
            if len(data) >= 2:
                assert self.transport is not None
                self.transport.sendto(data[:2] + struct.pack("!HHHHH", 0x8000 | FORMERR, 0, 0, 0, 0), addr)
            return
        try:
            found = await self.resolver.lookup(name)
        except httpx.HTTPError:
            found = None
        if found is None:
            reply = answer(ident, flags, question, NXDOMAIN, [])
        else:
            reply = answer(ident, flags, question, NOERROR, found if qtype == A else [])
        assert self.transport is not None
        self.transport.sendto(reply, addr)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()


def relay_to(host: str, port: int) -> Any:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return handle


async def serve(args: argparse.Namespace) -> None:
    tls = ssl.create_default_context(cafile=args.ca)
    tls.load_cert_chain(args.cert, args.key)
    async with httpx.AsyncClient(base_url=args.api, verify=tls, timeout=5.0) as api:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: _Dns(Resolver(api)), local_addr=(args.listen, 53))
        upstream_host, _, upstream_port = args.relay_to.rpartition(":")
        server = await asyncio.start_server(
            relay_to(upstream_host, int(upstream_port)), args.listen, args.relay_port, reuse_address=True
        )
        print("ready", flush=True)
        async with server:
            await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the node's root (named so its clean-up finds us)")
    parser.add_argument("--listen", required=True, help="the node address to serve DNS and the relay on")
    parser.add_argument("--relay-port", type=int, required=True)
    parser.add_argument("--relay-to", required=True, help="host:port of the loopback API server")
    parser.add_argument("--api", required=True, help="the API server's URL (for Service lookups)")
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
