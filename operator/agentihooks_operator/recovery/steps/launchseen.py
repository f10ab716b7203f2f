"""What of a launch took effect, asked before a launch whose outcome is unknown is sent again.

A launch is two creates (the attempt's Secret and its Pod) sent at once, and its answer can be lost
with the process that sent it. Before sending it again, a pass asks the launcher what exists; and
since "absent" alone cannot tell "never created" from "created, then deleted", it looks for positive
evidence that the launch did take effect although its Pod is gone (:func:`sent_and_gone`). The
launcher's optional methods (``launched``, ``launch_seen``, ``deleted``) are read here only, so a
launcher without them (the simulated ones) falls back to ``exists``.
"""

from __future__ import annotations

import logging

from ..context import Ctx
from ..launcher import ReplacementLauncher

log = logging.getLogger("agentihooks.recovery")


def launched(launcher: ReplacementLauncher, execution_id: str) -> bool:
    """Whether the attempt's launch took effect: ``launcher.launched`` when it has one, else ``exists``."""
    check = getattr(launcher, "launched", None)
    return bool(check(execution_id)) if callable(check) else launcher.exists(execution_id)


def seen(launcher: ReplacementLauncher, execution_id: str) -> str:
    """What of the attempt's launch exists: ``made`` (all of it), ``secret`` (its Secret without its
    Pod: the launch reached the API server), ``pod`` or ``none`` (``launch_seen`` when the launcher
    has it, else ``made`` or ``none`` from :func:`launched`)."""
    check = getattr(launcher, "launch_seen", None)
    if callable(check):
        return str(check(execution_id))
    return "made" if launched(launcher, execution_id) else "none"


def deleted(launcher: ReplacementLauncher, execution_id: str) -> bool:
    """Whether ``launcher`` knows the attempt's Pod was created and has gone since (``deleted``)."""
    check = getattr(launcher, "deleted", None)
    return bool(check(execution_id)) if callable(check) else False


def sent_and_gone(ctx: Ctx, eid: str, entry: dict[str, object], found: str) -> bool:
    """Whether the launch took effect although its Pod is absent now: "absent" alone cannot tell
    "never created" from "created, then deleted" (an admin, an eviction) when the last send's answer
    was lost, and sending it again would run the attempt twice. Positive evidence that it took
    effect: this process's Pod watch saw the Pod go (``deleted``), or the attempt's Secret, sent
    beside the Pod, is there after a send whose outcome is unknown (not a refusal the journal
    holds: a blocked launch's Secret stays while its Pod was refused). The step is then done, and
    the pass fences the attempt for its missing Pod. Costs at worst one generation, when only the
    Secret's create took effect; never a second run."""
    in_flight = not entry.get("detail") or bool(entry.get("inflight"))
    if not (deleted(ctx.launcher, eid) or (found == "secret" and in_flight)):
        return False
    log.warning(
        "recovery of swarm %s: the launch of %s took effect but its Pod is gone; not launched again "
        "(the attempt is fenced as lost)",
        ctx.label,
        eid,
    )
    return True
