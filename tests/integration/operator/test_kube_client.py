"""The operator's Kubernetes client over real HTTP: retries, selectors, TLS credentials, token rotation.

A small scripted API stub (``http.server`` on 127.0.0.1, plain or TLS with a
CA made here by ``cryptography``) records every request as it arrived: the
raw query string, the headers, the client certificate it was shown. kmock's
emulator checks the generic calls end to end, logged in from a kubeconfig.
The real API server's answers (RBAC 403s among them) are exercised by the
operator scenarios that run on the real control plane.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import http.server
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agentihooks_operator.k8s.client import KubeClient, Retries
from agentihooks_operator.k8s.errors import ApiError, NoCredentials
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from testsupport.kube import emulated_cluster

AGENT = "agentihooks-operator/test-client"
FAST = Retries(base_delay=0.02, max_delay=0.1)
FORBIDDEN = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": 'pods is forbidden: User "system:serviceaccount:x:op" cannot create resource "pods" '
    'in API group "" in the namespace "x"',
    "reason": "Forbidden",
    "code": 403,
}


# -- a scripted API server ----------------------------------------------------------------------
@dataclass
class Seen:
    method: str
    target: str  # path and raw query string, as sent
    headers: Any  # the request's headers (case-insensitive)
    body: bytes
    peer: dict[str, Any] | None


@dataclass
class Stub:
    """Answers requests from ``script`` in order (the last answer repeats); ``"drop"`` closes unanswered."""

    script: list[Any]
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def next_answer(self) -> Any:
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def _handler(stub: Stub) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
            stub.seen.append(Seen(self.command, self.path, self.headers, body, peer))
            answer = stub.next_answer()
            if answer == "drop":
                self.close_connection = True
                return
            status, headers, doc = answer
            raw = json.dumps(doc).encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _any

        def log_message(self, *_: Any) -> None:
            pass

    return Handler


@contextlib.contextmanager
def serve(script: list[Any], tls: ssl.SSLContext | None = None) -> Iterator[Stub]:
    stub = Stub(list(script))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    stub.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


def client(stub: Stub, **kw: Any) -> KubeClient:
    return KubeClient(stub.url, token="tok-static", agent=AGENT, retries=kw.pop("retries", FAST), **kw)


# -- PKI ----------------------------------------------------------------------------------------
@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def server_context(self, *, require_client: bool) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.server_cert, self.server_key)
        if require_client:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(self.ca)
        return ctx


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    signer: ec.EllipticCurvePrivateKey,
    extensions: list[tuple[Any, bool]],
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
    )
    for ext, critical in extensions:
        builder = builder.add_extension(ext, critical=critical)
    return builder.sign(signer, hashes.SHA256())


def _write(
    path: Path, cert: x509.Certificate | None = None, key: ec.EllipticCurvePrivateKey | None = None
) -> Path:
    if cert is not None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-cluster-ca")])
    ca = _issue(ca_name, ca_key, ca_name, ca_key, [(x509.BasicConstraints(ca=True, path_length=None), True)])
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _issue(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        server_key,
        ca_name,
        ca_key,
        [
            (x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        ],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _issue(
        x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "agentihooks"),
                x509.NameAttribute(NameOID.COMMON_NAME, "agentihooks-operator"),
            ]
        ),
        client_key,
        ca_name,
        ca_key,
        [(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)],
    )
    return Pki(
        ca=_write(d / "ca.crt", ca),
        server_cert=_write(d / "server.crt", server),
        server_key=_write(d / "server.key", key=server_key),
        client_cert=_write(d / "client.crt", client_cert),
        client_key=_write(d / "client.key", key=client_key),
    )


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _common_name(peer: dict[str, Any] | None) -> str | None:
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


@pytest.fixture
def outside_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


# -- retries ------------------------------------------------------------------------------------
def test_429_with_retry_after_is_retried_once_and_succeeds() -> None:
    with serve([(429, {"Retry-After": "1"}, {"reason": "TooManyRequests"}), (200, {}, {"kind": "Pod"})]) as s:
        kube = client(s)
        started = time.monotonic()
        assert kube.get("pods", "x", "p") == {"kind": "Pod"}
        assert time.monotonic() - started >= 0.95  # the server's Retry-After, not the short backoff
        kube.close()
    assert [r.method for r in s.seen] == ["GET", "GET"]


def test_503_twice_then_200() -> None:
    answers = [(503, {}, {}), (503, {}, {}), (201, {}, {"metadata": {"name": "p"}})]
    with serve(answers) as s:
        kube = client(s)
        assert kube.create("pods", "x", {"metadata": {"name": "p"}}) == {"metadata": {"name": "p"}}
        kube.close()
    assert len(s.seen) == 3
    assert {r.body for r in s.seen} == {b'{"metadata": {"name": "p"}}'}  # the same named object each time


def test_a_server_that_keeps_failing_is_tried_a_bounded_number_of_times() -> None:
    with serve([(500, {}, {"reason": "InternalError", "message": "etcd timeout"})]) as s:
        kube = client(s)
        with pytest.raises(ApiError) as err:
            kube.patch("pods", "x", "p", {"metadata": {"labels": {"a": "b"}}})
        kube.close()
    assert err.value.status == 500 and "etcd timeout" in str(err.value)
    assert len(s.seen) == FAST.tries


def test_a_dropped_connection_is_retried() -> None:
    with serve(["drop", (200, {}, {"items": []})]) as s:
        kube = client(s)
        assert kube.list("pods", "x") == []
        kube.close()
    assert len(s.seen) == 2


def test_an_unreachable_server_is_status_0_after_bounded_tries() -> None:
    with serve([(200, {}, {})]) as s:
        url = s.url
    kube = KubeClient(url, agent=AGENT, retries=FAST)
    started = time.monotonic()
    with pytest.raises(ApiError) as err:
        kube.get("pods", "x", "p")
    assert err.value.status == 0 and time.monotonic() - started < 5
    kube.close()


def test_403_is_not_retried_and_names_verb_and_resource() -> None:
    with serve([(403, {}, FORBIDDEN)]) as s:
        kube = client(s)
        with pytest.raises(ApiError) as err:
            kube.create("secrets", "x", {"metadata": {"name": "s"}, "stringData": {"token": "very-secret"}})
        kube.close()
    assert len(s.seen) == 1
    e = err.value
    assert e.status == 403 and e.reason == "Forbidden"
    assert 'cannot create resource "pods"' in str(e) and 'namespace "x"' in str(e)
    assert "very-secret" not in str(e) and "tok-static" not in str(e)


def test_404_means_none_or_already_gone() -> None:
    with serve([(404, {}, {"kind": "Status", "reason": "NotFound", "code": 404})]) as s:
        kube = client(s)
        assert kube.get("pods", "x", "gone") is None
        assert kube.delete("pods", "x", "gone") is False
        kube.close()
    assert [r.method for r in s.seen] == ["GET", "DELETE"]


# -- what goes on the wire -----------------------------------------------------------------------
def test_label_selector_is_one_encoded_query_parameter_and_applied_locally() -> None:
    items = [
        {"metadata": {"name": "a", "labels": {"a": "b", "c": "d"}}},
        {"metadata": {"name": "b", "labels": {"a": "b"}}},  # a server that ignored the selector
    ]
    with serve([(200, {}, {"items": items})]) as s:
        kube = client(s)
        got = kube.list("pods", "x", {"a": "b", "c": "d"})
        kube.close()
    assert [i["metadata"]["name"] for i in got] == ["a"]
    assert s.seen[0].target == "/api/v1/namespaces/x/pods?labelSelector=a%3Db%2Cc%3Dd"


def test_headers_agent_token_and_content_types() -> None:
    with serve([(200, {}, {})]) as s:
        kube = client(s)
        kube.patch("agentihooks.io/v1alpha1/swarms", "x", "s", {"status": {}}, sub="status")
        kube.create("events", "x", {"metadata": {"name": "e"}})
        kube.get("nodes", None, "n1")
        kube.close()
    patch, post, get = s.seen
    assert patch.target == "/apis/agentihooks.io/v1alpha1/namespaces/x/swarms/s/status"
    assert patch.headers["Content-Type"] == "application/merge-patch+json"
    assert (
        post.headers["Content-Type"] == "application/json"
        and json.loads(post.body)["metadata"]["name"] == "e"
    )
    assert get.target == "/api/v1/nodes/n1" and "Content-Type" not in get.headers
    for r in s.seen:
        assert r.headers["User-Agent"] == AGENT
        assert r.headers["Authorization"] == "Bearer tok-static"
        assert r.headers["Accept"] == "application/json"


# -- credentials --------------------------------------------------------------------------------
def test_kubeconfig_with_a_client_certificate_presents_it(
    pki: Pki, tmp_path: Path, outside_a_pod: None
) -> None:
    with serve([(200, {}, {"kind": "Pod"})], tls=pki.server_context(require_client=True)) as s:
        config = tmp_path / "kubeconfig"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "c",
                    "clusters": [
                        {
                            "name": "c",
                            "cluster": {"server": s.url, "certificate-authority-data": _b64(pki.ca)},
                        }
                    ],
                    "users": [
                        {
                            "name": "u",
                            "user": {
                                "client-certificate-data": _b64(pki.client_cert),
                                "client-key-data": _b64(pki.client_key),
                            },
                        }
                    ],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                }
            )
        )
        kube = KubeClient.from_environment(agent=AGENT, kubeconfig=str(config), retries=FAST)
        assert kube.get("pods", "x", "p") == {"kind": "Pod"}
        kube.close()
        # the same server refuses a client that shows no certificate
        bare = KubeClient(s.url, ca_path=str(pki.ca), agent=AGENT, retries=Retries(tries=1))
        with pytest.raises(ApiError) as err:
            bare.get("pods", "x", "p")
        bare.close()
    assert err.value.status == 0
    assert len(s.seen) == 1 and _common_name(s.seen[0].peer) == "agentihooks-operator"
    assert "Authorization" not in s.seen[0].headers


def test_kubeconfig_from_the_environment_read_at_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outside_a_pod: None
) -> None:
    with serve([(200, {}, {})]) as s:
        config = tmp_path / "kc"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "c",
                    "clusters": [{"name": "c", "cluster": {"server": s.url}}],
                    "users": [{"name": "u", "user": {"token": "kc-token"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                }
            )
        )
        monkeypatch.setenv("KUBECONFIG", str(config))  # set after the package was imported
        kube = KubeClient.from_environment(agent=AGENT)
        kube.get("pods", "x", "p")
        kube.close()
    assert s.seen[0].headers["Authorization"] == "Bearer kc-token"


def test_no_service_account_and_no_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outside_a_pod: None
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(NoCredentials, match="no service account"):
        KubeClient.from_environment(agent=AGENT)


def test_in_cluster_token_is_reread_after_the_kubelet_rotates_it(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kubernetes.config.incluster_config as incluster

    token = tmp_path / "token"
    token.write_text("tok-1")
    with serve([(200, {}, {})], tls=pki.server_context(require_client=False)) as s:
        host, port = s.url.removeprefix("https://").split(":")
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
        kube = KubeClient.from_environment(
            agent=AGENT, token_filename=str(token), cert_filename=str(pki.ca), retries=FAST
        )
        assert kube.server == s.url
        kube.get("pods", "x", "p")
        token.write_text("tok-2")  # the kubelet rotated the projected token
        kube.get("pods", "x", "p")  # read again at most once a minute (as client-go does)

        class Later:  # the loader's clock, a minute on
            @staticmethod
            def now() -> dt.datetime:
                return dt.datetime.now() + dt.timedelta(seconds=61)

        monkeypatch.setattr(incluster, "datetime", SimpleNamespace(datetime=Later, timedelta=dt.timedelta))
        kube.get("pods", "x", "p")
        kube.close()
    tokens = [r.headers["Authorization"] for r in s.seen]
    assert tokens == ["bearer tok-1", "bearer tok-1", "bearer tok-2"]


# -- against kmock's emulated API (generic paths, kubeconfig login) --------------------------------
async def test_generic_calls_against_the_emulated_api(tmp_path: Path, outside_a_pod: None) -> None:
    import asyncio

    async with emulated_cluster(tmp_path) as cluster:
        kube = KubeClient.from_environment(agent=AGENT, kubeconfig=str(cluster.kubeconfig), retries=FAST)

        def calls() -> None:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p1", "namespace": "default", "labels": {"swarm": "s", "seat": "a"}},
            }
            kube.create("pods", "default", pod)
            with pytest.raises(ApiError) as err:
                kube.create("pods", "default", pod)
            assert err.value.status == 409
            assert (kube.get("pods", "default", "p1") or {})["metadata"]["labels"]["seat"] == "a"
            kube.patch("pods", "default", "p1", {"metadata": {"labels": {"seat": "b"}}})
            assert [
                p["metadata"]["name"] for p in kube.list("pods", "default", {"swarm": "s", "seat": "b"})
            ] == ["p1"]
            assert kube.list("pods", "default", {"swarm": "s", "seat": "a"}) == []
            assert kube.delete("pods", "default", "p1") is True
            assert kube.get("pods", "default", "p1") is None

        await asyncio.to_thread(calls)
        kube.close()
        verbs = cluster.calls_by(AGENT)
    assert verbs == [
        ("create", "", "pods"),
        ("create", "", "pods"),
        ("get", "", "pods"),
        ("patch", "", "pods"),
        ("list", "", "pods"),
        ("list", "", "pods"),
        ("delete", "", "pods"),
        ("get", "", "pods"),
    ]


def test_kopf_logs_in_with_the_kubeconfig_named_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outside_a_pod: None
) -> None:
    import logging

    import kopf
    from agentihooks_operator.k8s import handlers

    config = tmp_path / "kc"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": "http://127.0.0.1:9", "insecure-skip-tls-verify": True},
                    }
                ],
                "users": [{"name": "u", "user": {"token": "kopf-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(config))
    info = handlers.login(settings=kopf.OperatorSettings(), logger=logging.getLogger("test"))
    assert (info.server, info.token, info.insecure) == ("http://127.0.0.1:9", "kopf-token", True)


# -- against the real API server, as the operator's identity (the chart's RBAC only) ---------------
def test_real_api_server_answers_as_facts_and_rbac_denials_name_verb_and_resource(
    control_plane: Any, session_helm: Any, tmp_path: Path, outside_a_pod: None
) -> None:
    import asyncio

    from testsupport.realcluster import RealCluster

    cluster = RealCluster.create(control_plane, session_helm, tmp_path, prefix="kc")
    ns = cluster.namespace
    kube = KubeClient.from_environment(agent=AGENT, kubeconfig=str(cluster.kubeconfig))  # token + CA
    try:
        pod = {  # admitted by Pod Security "restricted"; never scheduled (no scheduler runs)
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "c1", "labels": {"a": "b"}},
            "spec": {
                "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.example/c:1",
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        }
        assert kube.create("pods", ns, pod)["metadata"]["uid"]
        with pytest.raises(ApiError) as dup:
            kube.create("pods", ns, pod)
        assert dup.value.status == 409 and dup.value.reason == "AlreadyExists"
        assert kube.get("pods", ns, "nobody") is None
        assert kube.list("pods", ns, {"a": "b", "c": "d"}) == []
        assert [p["metadata"]["name"] for p in kube.list("pods", ns, {"a": "b"})] == ["c1"]
        with pytest.raises(ApiError) as denied:  # the chart grants pods get/list/watch/create/delete only
            kube.patch("pods", ns, "c1", {"metadata": {"labels": {"k": "v"}}})
        e = denied.value
        assert e.status == 403 and e.reason == "Forbidden"
        assert 'cannot patch resource "pods"' in e.message and f'namespace "{ns}"' in e.message
        with pytest.raises(ApiError) as elsewhere:
            kube.create("pods", "kube-system", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
        assert elsewhere.value.status == 403
        assert 'cannot create resource "pods"' in str(elsewhere.value) and "kube-system" in str(
            elsewhere.value
        )
        assert cluster.token not in str(e) + str(elsewhere.value)
        assert kube.delete("pods", ns, "c1") is True  # not bound to a node: removed at once
        assert kube.delete("pods", ns, "c1") is False
    finally:
        kube.close()
        asyncio.run(cluster.close())
