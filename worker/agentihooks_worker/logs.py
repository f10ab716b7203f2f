"""The worker's log lines: text (the default) or JSON, with the fields the operator's JSON lines carry.

``AGENTIHOOKS_LOG_FORMAT=json`` (set it in the Swarm's ``podTemplate`` env)
writes one JSON object per line: ``message``, ``severity``, ``timestamp``,
``logger``, and, once the launch record is read, ``object`` (the
Swarm: kind, namespace, name), ``seat`` and ``execution_id``: the fields of
the operator's ``--log-format json`` (kopf's formatter), so one log query
finds a seat's lines on both sides. The worker's event lines
(``restore_verified``, ``checkpoint_committed``, ``restore_refused``...) are
JSON objects in either format; in ``json`` they carry the same fields too
(:func:`decorate`), after their own, which stay exactly as the text format
writes them.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter

TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")
_IDENTITY: dict[str, Any] = {}
#: The format :func:`configure` set (event lines are decorated only in ``json``).
_FORMAT: list[str] = ["text"]


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
    _FORMAT[0] = fmt
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_Json(timestamp=True))
        handler.addFilter(_Identity())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def decorate(line: str) -> str:
    """An event line (one JSON object) with the fields of the JSON format added after its own, once
    ``json`` is configured: ``severity``, ``timestamp``, ``logger`` and the attempt's ``object``,
    ``seat`` and ``execution_id``; a field the event has already is kept. Anything else as it is."""
    if _FORMAT[0] != "json" or not line.startswith("{"):
        return line
    try:
        event = json.loads(line)
    except ValueError:
        return line
    if not isinstance(event, dict):
        return line
    extra: dict[str, Any] = {
        "severity": "error" if str(event.get("event", "")).endswith(("_failed", "_refused")) else "info",
        "timestamp": datetime.now(UTC).isoformat(),
        "logger": "agentihooks_worker.events",
    }
    if _IDENTITY:
        extra.update(
            {
                "object": _IDENTITY["k8s_ref"],
                "seat": _IDENTITY["seat"],
                "execution_id": _IDENTITY["execution_id"],
            }
        )
    return json.dumps({**event, **{k: v for k, v in extra.items() if k not in event}})
