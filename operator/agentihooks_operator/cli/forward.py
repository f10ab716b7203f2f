"""A loopback port of this process that leads to one port of one Pod, through the API server.

What ``kubectl port-forward`` does, kept inside the CLI so a command needs no second terminal: each
connection accepted on ``127.0.0.1:<random>`` opens its own ``pods/portforward`` stream (the Kubernetes
client's websocket) and bytes are copied both ways until either side closes. The threads are daemons:
the forward lives exactly as long as the command. :meth:`Forwarder.start` opens one stream first and
closes it, so a refusal (no ``create`` on ``pods/portforward``, a kubelet that cannot be reached) is a
clear error before any request is sent rather than a dropped connection later.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Any

from .client import EXIT_UNREACHABLE, CliError

_CHUNK = 65536


class Forwarder:
    def __init__(self, core: Any, namespace: str, pod: str, port: int) -> None:
        self.core, self.namespace, self.pod, self.port = core, namespace, pod, port
        self._listener: socket.socket | None = None
        self.url = ""

    def _open(self) -> Any:
        from kubernetes.stream import portforward

        return portforward(
            self.core.connect_get_namespaced_pod_portforward, self.pod, self.namespace, ports=str(self.port)
        )

    def start(self) -> None:
        target = f"Pod {self.namespace}/{self.pod} port {self.port}"
        try:
            probe = self._open()
        except Exception as e:  # the client raises ApiException, WebSocket and socket errors alike
            status = getattr(e, "status", None)
            if status == 403:
                why = "forbidden: the kubeconfig's user needs create on pods/portforward"
            else:
                why = f"{type(e).__name__} {status or ''}".strip()
            raise CliError(f"port-forward to {target} failed ({why})", EXIT_UNREACHABLE) from e
        probe.close()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self._listener = listener
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name="agentihooks-forward", daemon=True).start()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            stream = self._open()
        except Exception:
            conn.close()  # the client sees the connection drop and names the URL it could not reach
            return
        remote = stream.socket(self.port)
        try:
            _pump(conn, remote)
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            stream.close()

    def close(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None


def _pump(a: Any, b: Any) -> None:
    """Copy bytes both ways between two sockets until one side closes."""
    peers = {a.fileno(): b, b.fileno(): a}
    sockets = {a.fileno(): a, b.fileno(): b}
    while True:
        ready, _, _ = select.select(list(sockets.values()), [], [])
        for s in ready:
            try:
                data = s.recv(_CHUNK)
            except OSError:
                return
            if not data:
                return
            try:
                peers[s.fileno()].sendall(data)
            except OSError:
                return
