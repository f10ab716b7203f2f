"""Settings of the control API, read from ``AGENTIHOOKS_*`` variables (the Helm chart sets them).

The operator token is read once and only its sha256 is kept; a deployment can
also give the digest directly (``AGENTIHOOKS_OPERATOR_TOKEN_SHA256``) so the
token never reaches the operator's environment at all.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .access.auth import sha256_hex
from .access.quotas import Quotas
from .limits import ServerLimits

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ApiConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIHOOKS_", extra="ignore", frozen=True)

    control_host: str = "0.0.0.0"  # noqa: S104 - the API is the operator Pod's Service port
    control_port: int = Field(default=8080, ge=0, le=65535)
    #: Port of the listener serving only ``/healthz`` and ``/readyz`` (api/health.py), which the
    #: API's clients cannot starve; the chart's probes use it. Unset: no second listener.
    health_port: int | None = Field(default=None, ge=0, le=65535)
    operator_token: SecretStr | None = None
    operator_token_sha256: str | None = None
    #: Largest checkpoint object a worker may upload through the scoped routes (bytes).
    checkpoint_object_cap: int = Field(default=2 * 1024**3, ge=1)
    #: How often ``events?follow=true`` looks for new events (seconds).
    events_poll_seconds: float = Field(default=1.0, gt=0, le=60)
    #: Seconds for a request line and headers to arrive (from the connection's start, or from the
    #: first byte of a later request); the client then gets 408 and the connection is closed.
    control_header_timeout: float = Field(default=10.0, gt=0, le=600)
    #: At the connection cap with a client queued, a connection still sending a request head after
    #: this many seconds is closed to make room for it (a slow, never authenticated trickle).
    control_head_grace: float = Field(default=0.5, gt=0, le=600)
    #: Seconds an idle connection is kept open between requests.
    control_keepalive_timeout: float = Field(default=75.0, gt=0, le=3600)
    #: Seconds for a JSON body to arrive in full; for an upload, the longest pause between its bytes.
    control_body_timeout: float = Field(default=30.0, gt=0, le=3600)
    #: Connections open at once; past it new clients wait in the listen queue (then are refused).
    control_max_connections: int = Field(default=256, ge=1, le=65536)
    #: Connections one peer address may hold at once (0: no limit): one Pod, or one host flooding the
    #: listener, keeps at most this many of the slots.
    control_max_connections_per_source: int = Field(default=64, ge=0, le=65536)
    #: Peer networks the per-source limit leaves alone (comma-separated CIDRs; by default loopback,
    #: where ``kubectl port-forward`` brings every client from one address).
    control_per_source_exempt: str = "127.0.0.0/8,::1/128"
    #: Length of the listen queue for clients waiting past the connection cap.
    control_backlog: int = Field(default=128, ge=1, le=65536)
    #: Longest request line and longest header line (bytes), and most header lines per request.
    control_max_line_size: int = Field(default=8190, ge=1024, le=65536)
    control_max_field_size: int = Field(default=8190, ge=1024, le=65536)
    control_max_headers: int = Field(default=128, ge=8, le=1024)
    #: Event streams (``events?follow=true``) one credential may hold open at once; 429 past it.
    control_streams_per_credential: int = Field(default=4, ge=1, le=1024)
    #: Checkpoint uploads one credential may have in flight at once; 429 past it.
    control_uploads_per_credential: int = Field(default=4, ge=1, le=1024)
    #: Bytes all uploads in flight may spool at once (the spool folder's budget); 507 past it.
    control_spool_bytes: int = Field(default=1024**3, ge=1)
    #: Parts of the spool one credential, and one swarm, may hold at once; 429 past either.
    control_spool_credential_share: float = Field(default=0.5, gt=0, le=1)
    control_spool_swarm_share: float = Field(default=0.75, gt=0, le=1)
    #: Bytes per second an upload must average once it has run ``control_upload_grace_seconds``.
    control_upload_min_rate: float = Field(default=64 * 1024, ge=0)
    control_upload_grace_seconds: float = Field(default=10.0, gt=0, le=3600)

    #: Where the other replicas reach this replica's API (``http://POD_IP:PORT``; the chart sets it
    #: from the Pod's IP). Set: this replica advertises it in Redis, and a replica without a swarm's
    #: lease forwards requests there when this one holds it. Unset: nothing is forwarded here.
    api_advertise_url: str | None = None

    @field_validator("api_advertise_url")
    @classmethod
    def _origin(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        url = urlsplit(v.strip())
        host, sep, port_text = url.netloc.rpartition(":")
        if ":" in host and not host.startswith("[") and sep and port_text.isdigit():
            url = url._replace(netloc=f"[{host}]:{port_text}")  # an IPv6 Pod IP put in as it is
        try:
            port = url.port
        except ValueError:
            port = None
        if (
            url.scheme not in ("http", "https")
            or not url.hostname
            or port is None
            or "@" in url.netloc
            or url.path not in ("", "/")
            or url.query
            or url.fragment
        ):
            raise ValueError(
                "AGENTIHOOKS_API_ADVERTISE_URL must be http(s)://HOST:PORT (no user, path or query)"
            )
        return f"{url.scheme}://{url.netloc}"

    @field_validator("operator_token_sha256")
    @classmethod
    def _hex(cls, v: str | None) -> str | None:
        if v is not None and not _HEX64.fullmatch(v.strip().lower()):
            raise ValueError("AGENTIHOOKS_OPERATOR_TOKEN_SHA256 must be 64 hex digits")
        return v.strip().lower() if v else None

    @field_validator("control_per_source_exempt")
    @classmethod
    def _networks(cls, v: str) -> str:
        for part in (n.strip() for n in v.split(",")):
            if not part:
                continue
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(
                    f"AGENTIHOOKS_CONTROL_PER_SOURCE_EXEMPT: {part!r} is not a network "
                    "(CIDR, e.g. 10.0.0.0/8)"
                ) from None
        return v

    def quotas(self) -> Quotas:
        return Quotas(
            streams=self.control_streams_per_credential,
            uploads=self.control_uploads_per_credential,
            spool_bytes=self.control_spool_bytes,
            credential_share=self.control_spool_credential_share,
            swarm_share=self.control_spool_swarm_share,
        )

    def limits(self) -> ServerLimits:
        """The listener's timeouts and caps (:class:`.server.ServerLimits`)."""
        return ServerLimits(
            header_timeout=self.control_header_timeout,
            head_grace=self.control_head_grace,
            keepalive_timeout=self.control_keepalive_timeout,
            body_timeout=self.control_body_timeout,
            max_connections=self.control_max_connections,
            max_connections_per_source=self.control_max_connections_per_source,
            per_source_exempt=tuple(
                n.strip() for n in self.control_per_source_exempt.split(",") if n.strip()
            ),
            backlog=self.control_backlog,
            max_line_size=self.control_max_line_size,
            max_field_size=self.control_max_field_size,
            max_headers=self.control_max_headers,
        )

    def operator_hash(self) -> str | None:
        """The sha256 (hex) of the operator token, or ``None`` when the operator role is disabled."""
        if self.operator_token_sha256:
            return self.operator_token_sha256
        if self.operator_token is not None and self.operator_token.get_secret_value():
            return sha256_hex(self.operator_token.get_secret_value())
        return None
