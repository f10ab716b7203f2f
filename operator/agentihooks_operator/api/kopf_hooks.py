"""Runs the control API inside the operator: kopf start-up and clean-up handlers, and swarm publishing.

Importing this module registers the handlers. The operator's recovery loop
calls :func:`publish` after each pass so the API sees that swarm's Recovery
and current spec; :func:`withdraw` when the loop ends.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from typing import Any

import kopf
from agentihooks_checkpoint.stores.env import store_from_env

from ..recovery import Recovery
from ..swarm import SwarmSpec
from .config import ApiConfig
from .registry import SwarmRegistry
from .server import start_control_api
from .state import ApiState

log = logging.getLogger("agentihooks.api")
REGISTRY = "control_api_registry"
SERVER = "control_api_server"
STOPPING = "control_api_stopping"


def secret_reader(kube: Any) -> Any:
    """Read a master credential (the Secret's ``token`` key) with the operator's Kubernetes client."""

    def read(namespace: str, name: str) -> str | None:
        obj = kube.get("secrets", namespace, name)
        if not obj:
            return None
        raw = (obj.get("data") or {}).get("token")
        if raw:
            return base64.b64decode(raw).decode("utf-8").strip()
        text = (obj.get("stringData") or {}).get("token")
        return str(text).strip() if text else None

    return read


@kopf.on.startup()
async def start_api(memo: kopf.Memo, **_: Any) -> None:
    config = ApiConfig()
    registry: SwarmRegistry = memo.get(REGISTRY) or SwarmRegistry(secret_reader(memo["kube"]))
    memo[REGISTRY] = registry
    memo[STOPPING] = False
    store = store_from_env(os.environ)
    state = ApiState(
        registry=registry,
        redis=memo["redis"],
        operator_hash=config.operator_hash(),
        catalog=store if store is not None else memo["catalog"],
        store=store,
        object_cap=config.checkpoint_object_cap,
        events_poll_seconds=config.events_poll_seconds,
        kopf_ready=lambda: not memo.get(STOPPING, False),
    )
    memo[SERVER] = await start_control_api(state, config.control_host, config.control_port)
    log.info("control API listening on port %s", memo[SERVER].port)


@kopf.on.cleanup()
async def stop_api(memo: kopf.Memo, **_: Any) -> None:
    memo[STOPPING] = True
    server = memo.get(SERVER)
    if server is not None:
        await server.stop()


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


def withdraw(memo: Any, name: str) -> None:
    registry: SwarmRegistry | None = memo.get(REGISTRY)
    if registry is not None:
        registry.withdraw(name)
