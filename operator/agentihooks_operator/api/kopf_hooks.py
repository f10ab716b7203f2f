"""Runs the control API inside the operator process, on kopf's event loop.

:func:`register` adds a start-up handler (bind the server), a clean-up handler
(stop it) and an event handler that keeps each Swarm's current spec. A small
task publishes every swarm the operator's recovery loops run (``memo["passes"]``)
to the API's registry once a second, so the API answers with the same
Recovery instance (and lease) the operator uses. Nothing registers at import:
the operator's entry point calls :func:`register` once.

A server that cannot bind (port taken) is logged and skipped; the operator
keeps recovering and ``/readyz`` stays unreachable, which Kubernetes reports.
Set ``AGENTIHOOKS_CONTROL_API=false`` to run without it. With
``AGENTIHOOKS_API_ADVERTISE_URL`` set, another task advertises this replica's
address to the others (:mod:`.access.endpoints`) until the clean-up removes it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
from typing import Any

import kopf
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_checkpoint.stores.env import store_from_env
from pydantic import ValidationError

from .. import instruments
from ..k8s.config import OperatorConfig, connect_redis
from ..k8s.crd import GROUP, PLURAL, VERSION
from ..recovery import Recovery
from ..recovery.identity import SwarmId
from ..swarm import SwarmSpec
from .access.endpoints import Endpoints, advertise_forever
from .access.peers import peers_from_settings
from .config import ApiConfig
from .health import start_health_listener
from .registry import SwarmRegistry
from .server import start_control_api
from .state import ApiState

log = logging.getLogger("agentihooks.api")
REGISTRY = "control_api_registry"
SERVER = "control_api_server"
STOPPING = "control_api_stopping"
SPECS = "control_api_specs"
SYNC = "control_api_sync"
HEALTH = "control_api_health"
ADVERTISE = "control_api_advertise"
_registered: set[int] = set()


def secret_reader(memo: Any) -> Any:
    """Read a master credential (the Secret's ``token`` key) with the operator's Kubernetes client."""

    def read(namespace: str, name: str) -> str | None:
        obj = memo["kube"].get("secrets", namespace, name)
        if not obj:
            return None
        raw = (obj.get("data") or {}).get("token")
        if raw:
            return base64.b64decode(raw).decode("utf-8").strip()
        text = (obj.get("stringData") or {}).get("token")
        return str(text).strip() if text else None

    return read


async def publish(
    memo: Any, name: str, namespace: str, recovery: Recovery, spec: SwarmSpec, *, pass_seconds: float | None
) -> None:
    """Make ``name`` visible to the API (reads master Secrets off the loop when the spec changed)."""
    registry: SwarmRegistry | None = memo.get(REGISTRY)
    if registry is None:
        return
    holder = memo["config"].operator_id
    await asyncio.to_thread(
        registry.publish, name, recovery, spec, holder=holder, namespace=namespace, pass_seconds=pass_seconds
    )


async def _sync(memo: Any) -> None:
    """Publish every swarm whose recovery loop runs, with the spec last seen for it."""
    while True:
        passes: dict[tuple[str, str], Any] = dict(memo.get("passes") or {})
        specs: dict[tuple[str, str], SwarmSpec] = memo[SPECS]
        for key, runner in passes.items():
            spec = specs.get(key)
            if spec is not None and getattr(runner, "recovery", None) is not None:
                seconds = getattr(runner, "last_pass_seconds", None)
                try:
                    await publish(memo, key[1], key[0], runner.recovery, spec, pass_seconds=seconds)
                except Exception as e:  # never let publishing stop the loop
                    log.warning("control API: publishing swarm %s failed (%s)", key[1], type(e).__name__)
        await asyncio.sleep(1.0)


async def start_api(memo: kopf.Memo, **_: Any) -> None:
    memo[SPECS] = memo.get(SPECS) or {}
    if os.environ.get("AGENTIHOOKS_CONTROL_API", "true").lower() in ("0", "false", "no"):
        return
    config = ApiConfig()
    operator = memo.get("config") or OperatorConfig()
    if memo.get("redis") is None:
        memo["redis"] = connect_redis(operator)
    registry = memo.get(REGISTRY) or SwarmRegistry(secret_reader(memo))
    memo[REGISTRY] = registry
    memo[STOPPING] = False
    store = store_from_env(os.environ)
    state = ApiState(
        registry=registry,
        redis=memo["redis"],
        operator_hash=config.operator_hash(),
        catalog=store if store is not None else (memo.get("catalog") or EmptyCatalog()),
        store=store,
        object_cap=config.checkpoint_object_cap,
        events_poll_seconds=config.events_poll_seconds,
        quotas=config.quotas(),
        upload_min_rate=config.control_upload_min_rate,
        upload_grace=config.control_upload_grace_seconds,
        kopf_ready=lambda: not (memo.get(STOPPING, False) or _signalled(memo)),
        key_prefix=operator.swarm_key_prefix,
        metrics=instruments.of(memo),
        peers=peers_from_settings(
            lambda: memo["kube"], operator.operator_namespace, operator.operator_pod_selector
        ),
    )
    try:
        memo[SERVER] = await start_control_api(
            state, config.control_host, config.control_port, config.limits()
        )
    except OSError as e:
        log.error(
            "control API cannot listen on port %s (%s); running without it", config.control_port, e.strerror
        )
        return
    if config.health_port is not None:
        try:
            memo[HEALTH] = await start_health_listener(state, config.control_host, config.health_port)
            log.info("probes answered on port %s", memo[HEALTH].port)
        except OSError as e:
            log.error("the probes' listener cannot listen on port %s (%s)", config.health_port, e.strerror)
    memo[SYNC] = asyncio.create_task(_sync(memo))
    if config.api_advertise_url:  # the other replicas forward this one's swarms' writes here
        endpoints = Endpoints(memo["redis"], operator.swarm_key_prefix)
        memo[ADVERTISE] = asyncio.create_task(
            advertise_forever(endpoints, operator.operator_id, config.api_advertise_url)
        )
    log.info("control API listening on port %s", memo[SERVER].port)


async def stop_api(memo: kopf.Memo, **_: Any) -> None:
    memo[STOPPING] = True
    for name in (ADVERTISE, SYNC):  # the address first: the others stop forwarding here at once
        task = memo.get(name)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    for name in (SERVER, HEALTH):
        server = memo.get(name)
        if server is not None:
            await server.stop()


def _signalled(memo: kopf.Memo) -> bool:
    """Whether the process was told to stop (SIGTERM/SIGINT: ``memo["stopping"]``, set by
    :mod:`..main`) before the control API's own stop: the clients may close under a request."""
    flag = memo.get("stopping")
    return bool(flag is not None and flag.is_set())


def swarm_seen(event: Any, spec: Any, name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    """Keep each Swarm's parsed spec; a deleted or invalid Swarm leaves the API."""
    specs: dict[tuple[str, str], SwarmSpec] = memo.setdefault(SPECS, {})
    key = (namespace or "default", name)
    parsed: SwarmSpec | None = None
    if (event or {}).get("type") != "DELETED":
        with contextlib.suppress(ValidationError, TypeError, ValueError):
            parsed = SwarmSpec.model_validate(dict(spec or {}))
    if parsed is None:
        specs.pop(key, None)
        registry: SwarmRegistry | None = memo.get(REGISTRY)
        if registry is not None:
            registry.withdraw(name, namespace or "default")
        if (event or {}).get("type") == "DELETED":
            instruments.of(memo).forget_swarm(SwarmId(namespace or "default", name))
    else:
        specs[key] = parsed


def register(registry: kopf.OperatorRegistry | None = None) -> None:
    """Add the control API's handlers to ``registry`` (kopf's default one) once."""
    reg = registry or kopf.get_default_registry()
    if id(reg) in _registered:
        return
    _registered.add(id(reg))
    kopf.on.startup(registry=reg, id="control-api-start")(start_api)
    kopf.on.cleanup(registry=reg, id="control-api-stop")(stop_api)
    kopf.on.event(GROUP, VERSION, PLURAL, registry=reg, id="control-api-specs")(swarm_seen)
