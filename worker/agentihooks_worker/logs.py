"""The worker's log lines: text (the default) or JSON, with the fields the operator's JSON lines carry.

``AGENTIHOOKS_LOG_FORMAT=json`` (set it in the Swarm's ``podTemplate`` env)
writes one JSON object per line: ``message``, ``severity``, ``timestamp``,
``logger``, and, once the launch record is read, ``object`` (the
Swarm: kind, namespace, name), ``seat`` and ``execution_id``: the fields of
the operator's ``--log-format json`` (kopf's formatter), so one log query
finds a seat's lines on both sides. The worker's event lines
(``restore_refused``, ``boot_failed``...) are JSON objects in either format.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from pythonjsonlogger.json import JsonFormatter

TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")
_IDENTITY: dict[str, Any] = {}


def identify(*, swarm: str, namespace: str | None, seat: str, execution_id: str) -> None:
    """Name the attempt on every later line (called once the launch record is read)."""
    ref: dict[str, Any] = {"apiVersion": "agentihooks.io/v1alpha1", "kind": "Swarm", "name": swarm}
    if namespace:
        ref["namespace"] = namespace
    _IDENTITY.update({"k8s_ref": ref, "seat": seat, "execution_id": execution_id})


class _Json(JsonFormatter):
    def add_fields(
        self, log_record: dict[str, Any], record: logging.LogRecord, message: dict[str, Any]
    ) -> None:
        super().add_fields(log_record, record, message)
        log_record["logger"] = record.name
        log_record.setdefault("severity", _severity(record.levelno))
        ref = log_record.pop("k8s_ref", None)
        if ref is not None:
            log_record["object"] = ref


def _severity(level: int) -> str:
    for bound, word in ((logging.DEBUG, "debug"), (logging.INFO, "info"), (logging.WARNING, "warn")):
        if level <= bound:
            return word
    return "error" if level <= logging.ERROR else "fatal"


class _Identity(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _IDENTITY.items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


def configure(fmt: str) -> None:
    """One stderr handler on the root logger; ``fmt`` is ``text`` or ``json`` (else ValueError)."""
    if fmt not in FORMATS:
        raise ValueError(f"AGENTIHOOKS_LOG_FORMAT is text or json, not {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_Json(timestamp=True))
        handler.addFilter(_Identity())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
