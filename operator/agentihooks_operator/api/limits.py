"""The control API listener's timeouts and caps (see :mod:`.server`); set by ``AGENTIHOOKS_CONTROL_*``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerLimits:
    """How long clients may take and how many may connect; see :mod:`.server`."""

    #: Seconds for a request line and its headers to arrive in full.
    header_timeout: float = 10.0
    #: At the cap with a client waiting, a connection still sending a request head after this many
    #: seconds is closed to make room (a head takes milliseconds; a trickle of bytes holds a slot).
    head_grace: float = 0.5
    #: Seconds an idle connection is kept open between requests.
    keepalive_timeout: float = 75.0
    #: Seconds for a JSON body to arrive in full; for an upload, the longest pause between its bytes.
    body_timeout: float = 30.0
    #: Connections open at once; further clients wait in the listen queue.
    max_connections: int = 256
    #: Connections one peer address may hold at once (0: no limit); past it a new one is answered
    #: ``429 too_many_connections`` and closed. Behind something that hides clients' addresses (an
    #: Ingress controller, ``kubectl port-forward``) every client shares one address: raise it there.
    max_connections_per_source: int = 64
    #: Addresses the per-source limit leaves alone (CIDRs): by default loopback, where every client of
    #: ``kubectl port-forward`` (and the operator's own Pod) arrives from one address.
    per_source_exempt: tuple[str, ...] = ("127.0.0.0/8", "::1/128")
    #: Length of the kernel's listen queue (clients waiting past the cap).
    backlog: int = 128
    #: Longest request line, and longest header line, in bytes.
    max_line_size: int = 8190
    max_field_size: int = 8190
    #: Most header lines in one request.
    max_headers: int = 128
