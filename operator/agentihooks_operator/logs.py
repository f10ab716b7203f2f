"""The operator's log lines: text (the default) or JSON, each line about a Swarm naming it.

``--log-format json`` (``AGENTIHOOKS_LOG_FORMAT=json``) writes one JSON object
per line with kopf's own JSON formatter, for kopf's lines and ours alike:
``message``, ``severity``, ``timestamp``, ``logger``, and ``object`` (apiVersion, kind,
namespace, name) on every line about a Swarm; ``execution_id`` (and ``seat``
where known) on a line about one attempt. kopf sets ``object`` on the lines of
its handlers; ours get it from the context a swarm's daemon, its handler or a
recovery runs in (:func:`about_swarm`, :func:`about_attempt`), which threads
take with them when submitted through :func:`carry`.

Only identifiers go into these fields; the messages are the same as in text,
which never carry a credential or conversation content.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")
_SWARM: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("swarm", default=None)
_ATTEMPT: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("attempt", default=None)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SWARM_API_VERSION = "agentihooks.io/v1alpha1"


class LogFormat(StrEnum):
    text = "text"
    json = "json"


@contextmanager
def _bound(var: contextvars.ContextVar[dict[str, str] | None], value: dict[str, str]) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def about_swarm(namespace: str, name: str, uid: str | None = None) -> AbstractContextManager[None]:
    """Lines logged inside name the Swarm ``namespace/name`` (in kopf's ``object`` shape)."""
    ref = {"apiVersion": SWARM_API_VERSION, "kind": "Swarm", "namespace": namespace, "name": name}
    if uid:
        ref["uid"] = uid
    return _bound(_SWARM, ref)


def about_attempt(execution_id: str, seat: str | None = None) -> AbstractContextManager[None]:
    """Lines logged inside name the attempt (and its seat, when known)."""
    fields = {"execution_id": execution_id}
    if seat:
        fields["seat"] = seat
    return _bound(_ATTEMPT, fields)


def carry(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[[], T]:
    """``fn(*args, **kwargs)`` to run in another thread with the context it was made in (a pool's
    threads do not inherit it)."""
    return functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)


class ContextFields(logging.Filter):
    """Adds the Swarm and attempt of the current context to a record that has none of its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.logger = record.name  # a field of the JSON line (``name`` is the formatter's own)
        swarm = _SWARM.get()
        if swarm is not None and not hasattr(record, "k8s_ref"):
            record.k8s_ref = swarm
        for key, value in (_ATTEMPT.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


def configure(fmt: LogFormat | str = LogFormat.text, *, verbose: bool = False) -> None:
    """One handler on the root logger, on stderr, in ``fmt``."""
    fmt = LogFormat(fmt)
    root = logging.getLogger()
    if fmt is LogFormat.json:
        import kopf

        kopf.configure(verbose=verbose, log_format=kopf.LogFormat.JSON, log_prefix=False)
        handler = root.handlers[-1]  # kopf's stream handler, on stderr
        root.handlers[:] = [handler]
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
        root.handlers[:] = [handler]
        root.setLevel(logging.DEBUG if verbose else logging.INFO)
    handler.addFilter(ContextFields())
