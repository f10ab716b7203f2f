"""The CLI over https: a private CA given with --ca-file works, and each TLS failure is one clear line
(an unknown CA, a certificate for another host, an http server at an https URL, a bad bundle).
A real TLS server on loopback with certificates from the test's own CA."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentihooks_demo.pki import Authority
from agentihooks_operator.cli.main import app
from typer.testing import CliRunner

from .test_swarm_commands import one_error_line


class _Swarms(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the route the command calls, answered as the control API does
        body = json.dumps({"swarms": [{"namespace": "team-a", "swarm": "example", "seats": ["eng-1"]}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_: object) -> None:
        pass


def _serve(context: ssl.SSLContext | None) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Swarms)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"{'https' if context else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ca(tmp_path: Path) -> Authority:
    return Authority(tmp_path / "pki")


def _https(ca: Authority, *hosts: str) -> Iterator[str]:
    pair = ca.issue("api", "api", server=True, hosts=hosts)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.cert, pair.key)
    yield from _serve(context)


def _cli(url: str, *extra: str) -> tuple[int, str]:
    r = CliRunner().invoke(
        app, [*extra, "swarm", "list"], env={"AGENTIHOOKS_CONTROL_URL": url, "AGENTIHOOKS_TOKEN": "t"}
    )
    return r.exit_code, r.output


def test_a_private_ca_given_with_ca_file_is_trusted(ca: Authority) -> None:
    for url in _https(ca, "127.0.0.1"):
        code, out = _cli(url, "--ca-file", str(ca.cert))
        assert code == 0 and "example" in out, out
        code, out = _cli(url)
        assert code == 3
        line = one_error_line(out)
        assert line.startswith(
            f"error: TLS: the controller at {url} presented a certificate that cannot be verified"
        )
        assert "--ca-file" in line


def test_a_certificate_for_another_host_is_named(ca: Authority) -> None:
    for url in _https(ca, "api.other.example"):
        code, out = _cli(url, "--ca-file", str(ca.cert))
        assert code == 3 and "mismatch" in one_error_line(out).lower(), out


def test_an_http_server_at_an_https_url(ca: Authority) -> None:
    for url in _serve(None):
        code, out = _cli(url.replace("http://", "https://"))
        line = one_error_line(out)
        assert code == 3 and "failed the TLS handshake" in line and "https" in line, out


def test_a_bundle_that_is_no_bundle(ca: Authority, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("nothing here\n")
    for url in _https(ca, "127.0.0.1"):
        code, out = _cli(url, "--ca-file", str(junk))
        assert code == 3 and "is not a readable PEM bundle of CAs" in one_error_line(out), out
