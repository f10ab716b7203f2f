"""The worker's credential stays in the worker: out of its environment, out of every child's.

The operator hands the worker its token in ``AGENTIHOOKS_WORKER_TOKEN``. At boot
the worker takes it out of ``os.environ`` (:func:`take_token`) and keeps it in
memory only, so no process it starts inherits it: not the harness (its
environment is built without it anyway, :mod:`.attempt`), and not the ``git``
runs of a capture, which an agent of the same user could otherwise read in
``/proc/<pid>/environ`` while they run. :func:`child_env` is the environment
every such child gets.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from .attempt import WORKER_ONLY

TOKEN_ENV = WORKER_ONLY[0]


def take_token(environ: MutableMapping[str, str]) -> str | None:
    """Remove the worker's credential from ``environ`` (every name in ``WORKER_ONLY``); return it."""
    token = environ.get(TOKEN_ENV)
    for name in WORKER_ONLY:
        environ.pop(name, None)
    return token


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child (a ``git`` run): without the worker's credential."""
    env = {k: v for k, v in os.environ.items() if k not in WORKER_ONLY}
    env.update(extra)
    return env
