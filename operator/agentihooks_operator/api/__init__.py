"""The HTTP control API: restore decisions, worker reports, scoped checkpoint routes, status, metrics.

Served by the operator process on kopf's event loop (:mod:`.kopf_hooks`), or
on its own with :func:`run_control_api`.
"""

from __future__ import annotations

from .app import create_app
from .config import ApiConfig
from .registry import SecretReader, SwarmEntry, SwarmRegistry
from .server import ControlServer, run_control_api, start_control_api
from .state import ApiState

__all__ = [
    "ApiConfig",
    "ApiState",
    "ControlServer",
    "SecretReader",
    "SwarmEntry",
    "SwarmRegistry",
    "create_app",
    "run_control_api",
    "start_control_api",
]
