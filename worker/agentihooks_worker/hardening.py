"""Keep the agent out of its supervisor: the harness may not read the worker's credential from it.

The supervisor and the agent harness it starts run as the same user, so without more the agent could
read the supervisor's environment (``/proc/<ppid>/environ``, which keeps the environment the process
was started with even after ``os.environ`` forgets a name) or its memory (``/proc/<ppid>/mem``), and
with them the worker's credential. Marking the supervisor not dumpable (``PR_SET_DUMPABLE`` 0) makes
the kernel treat those files as another user's: a process without ``CAP_SYS_PTRACE`` (every worker
Pod under Pod Security ``restricted``) is refused them, and neither core dumps nor ptrace attach work.
The harness itself starts dumpable again (``execve`` resets the flag), so its own tools are unaffected.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3


def _prctl(option: int, arg: int) -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    result: int = libc.prctl(option, arg, 0, 0, 0)
    if result < 0:
        raise OSError(ctypes.get_errno(), "prctl failed")
    return result


def keep_children_out() -> bool:
    """Make this process not dumpable; False (and a warning) where the platform has no ``prctl``."""
    if not sys.platform.startswith("linux"):
        log.warning("the supervisor cannot be made undumpable on %s", sys.platform)
        return False
    _prctl(_PR_SET_DUMPABLE, 0)
    return True


def dumpable() -> bool:
    """Whether this process is dumpable (its ``/proc`` files readable by its own user)."""
    return _prctl(_PR_GET_DUMPABLE, 0) != 0
