"""The operator's settings, read once from ``AGENTIHOOKS_*`` environment variables.

Tests build an :class:`OperatorConfig` directly and hand it to the operator
through kopf's memo, together with an injectable clock.
"""

from __future__ import annotations

import os
import socket
from typing import Literal

import redis
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..recovery.store.durable import Durability
from ..redisconn import connect, parse
from .building.podpolicy import TemplatePolicy


def _default_holder() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def parse_selector(text: str) -> dict[str, str]:
    """``a=b,c=d`` → ``{"a": "b", "c": "d"}``; anything else (``!=``, ``in``, a bare key) is refused."""
    labels: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or "!" in key or value.startswith("="):
            raise ValueError(f"the operator Pod selector takes key=value pairs only, not {part!r}")
        labels[key.strip()] = value.strip()
    return labels


class OperatorConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIHOOKS_", extra="ignore", frozen=True)

    #: ``text`` or ``json`` (:mod:`..logs`); read by ``agentihooks-operator`` before anything else starts.
    log_format: Literal["text", "json"] = "text"
    redis_url: str = "redis://127.0.0.1:6379/0"
    #: The Redis password, kept apart from the URL so any characters work (the chart fills it from
    #: its ``existingSecret``). A password written in the URL itself still works when this is unset.
    redis_password: SecretStr | None = None
    #: A PEM bundle of the CAs a TLS Redis's certificate is verified with (the chart mounts
    #: ``redis.external.tls.caSecret`` here); unset: the system's CAs.
    redis_ca_file: str | None = None
    #: The Sentinels' own password, when they need one (``redis+sentinel://`` URLs only).
    redis_sentinel_password: SecretStr | None = None
    #: Replicas that must hold each guarded write before it counts as done (``WAIT``; 0: none).
    #: A write fewer replicas confirm within ``redis_wait_timeout_ms`` is an unknown outcome,
    #: re-observed on the next pass. Not on a Redis Cluster (use ``min-replicas-to-write`` there).
    redis_wait_replicas: int = Field(default=0, ge=0)
    redis_wait_timeout_ms: int = Field(default=1000, ge=1)
    #: Root of every Redis key (the original's ``AGENTIHOOKS_SWARM_KEY_PREFIX``).
    swarm_key_prefix: str = "agentihooks"
    #: This replica's lease-holder identity; also the ``controller-owner`` Pod label.
    operator_id: str = Field(default_factory=_default_holder)
    lease_ms: int = Field(default=15000, ge=1000)
    #: The control API workers report to (written into launch records).
    control_url: str | None = None
    #: Comma-separated namespaces to watch; empty means cluster-wide.
    namespaces: str = ""
    #: Let kopf list and watch Namespaces and CRDs (cluster-wide RBAC). Off: the namespaces named
    #: in ``namespaces`` are used as given, and the Swarm CRD is expected to be installed.
    scan_namespaces: bool = False
    #: A Node NotReady/Unknown this long makes its Pods ``node_lost``.
    node_lost_after_seconds: float = Field(default=40.0, gt=0)
    #: Delay before a pass is retried after a Redis or API error.
    retry_delay_seconds: float = Field(default=2.0, gt=0)
    #: The recovery client's requests per second to the API server, sustained (0: no client-side
    #: limit; the API server's priority and fairness is the limit, see the chart's FlowSchema).
    kube_qps: float = Field(default=0.0, ge=0)
    #: Requests the client may send at once above ``kube_qps`` (0 with a QPS: twice the QPS).
    kube_burst: int = Field(default=0, ge=0)
    #: Connections to the API server kept open for reuse: a burst of failures beyond this many
    #: concurrent calls opens (and TLS-handshakes) a connection per call.
    kube_connections: int = Field(default=64, ge=1)
    #: Share swarms among replicas (k8s/placement.py): rendezvous hashing over the live replicas.
    #: Off: every replica tries every swarm's lease and the first one holds it.
    placement: bool = True
    #: Seconds between two heartbeats of this replica; unset: a sixth of the lease TTL, at most 2 s
    #: (a replica is dropped after 3 missed beats, so before its leases run out).
    placement_heartbeat_seconds: float | None = Field(default=None, gt=0)
    #: A swarm stays with the replica that took it at least this long before it is handed to
    #: the preferred one (hysteresis: a swarm moves at most once per this many seconds).
    placement_hold_seconds: float = Field(default=30.0, ge=0)
    #: ServiceAccounts a Swarm's Pod template may name (comma-separated; empty: none, the worker Pod
    #: runs as its namespace's ``default`` account without a token). See k8s/podpolicy.py.
    worker_service_accounts: str = ""
    #: The operator's own ServiceAccount (``name`` in ``operator_namespace``, or ``namespace/name``):
    #: never lent to a worker Pod, even when listed above.
    operator_service_account: str = ""
    #: The operator's own namespace (the chart sets it from the downward API).
    operator_namespace: str = ""
    #: Labels every operator Pod carries (``key=value,...``; the chart's selector labels). With
    #: ``operator_namespace``, a replica forwards only to an address the API server lists as that
    #: replica's own Pod's IP (api/access/peers.py).
    operator_pod_selector: str = ""
    #: Secrets a Pod template may use without carrying the opt-in label (comma-separated names).
    worker_secrets: str = ""
    #: PersistentVolumeClaims a Swarm may mount, clone or keep checkpoints on without the opt-in label
    #: (comma-separated names; k8s/building/borrowing.py).
    worker_claims: str = ""
    #: Let Swarms of ``operator_namespace`` launch Pods (off: such a Swarm's launches are blocked,
    #: naming the rule; that namespace holds the operator's account and the Redis password).
    allow_operator_namespace: bool = False
    #: Namespaces where no Swarm launches Pods, whatever RBAC grants (comma-separated): a cluster-wide
    #: install's ClusterRole reaches every namespace, and these hold the cluster's own workloads.
    excluded_namespaces: str = "kube-system,kube-public,kube-node-lease"

    @field_validator("operator_pod_selector")
    @classmethod
    def _usable_selector(cls, text: str) -> str:
        parse_selector(text)  # a ValueError naming the part it cannot read
        return text

    @field_validator("redis_url")
    @classmethod
    def _usable_redis_url(cls, url: str) -> str:
        parse(url)  # a ValueError naming AGENTIHOOKS_REDIS_URL and what is wrong
        return url

    @property
    def namespace_list(self) -> list[str]:
        return [n.strip() for n in self.namespaces.split(",") if n.strip()]

    @property
    def template_policy(self) -> TemplatePolicy:
        return TemplatePolicy.from_settings(
            self.worker_service_accounts,
            self.operator_service_account,
            self.worker_secrets,
            self.operator_namespace,
            self.allow_operator_namespace,
            excluded=self.excluded_namespaces,
            claims=self.worker_claims,
        )

    @property
    def heartbeat_seconds(self) -> float:
        if self.placement_heartbeat_seconds is not None:
            return self.placement_heartbeat_seconds
        return min(2.0, self.lease_ms / 6000)


def connect_redis(config: OperatorConfig) -> redis.Redis:
    """The operator's Redis client: ``redis_url`` (one server, ``redis+cluster://`` or
    ``redis+sentinel://``, see :mod:`..redisconn`) plus ``redis_password`` when one is set, with
    the ``WAIT`` durability of ``redis_wait_replicas``."""
    secret = config.redis_password.get_secret_value() if config.redis_password else None
    sentinel = config.redis_sentinel_password
    wait = config.redis_wait_replicas
    return connect(
        config.redis_url,
        secret or None,
        sentinel_password=sentinel.get_secret_value() or None if sentinel else None,
        durability=Durability(wait, config.redis_wait_timeout_ms) if wait else None,
        ca_file=config.redis_ca_file or None,
    )
