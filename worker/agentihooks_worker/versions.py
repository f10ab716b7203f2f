"""The harness version gate for native resume.

The installed harness must be in a qualified series (Claude Code 2.1.x, Codex
0.162.x: ``unqualified_version`` otherwise) and be exactly the version that
wrote the captured session (``version_changed`` otherwise, including a record
that does not say which version wrote it).
"""

from __future__ import annotations

from collections.abc import Mapping

from agentihooks_checkpoint.reasons import Reason

from .errors import HarnessError, Refused
from .harness import Harness, HarnessVersion


def check_native_version(
    harness: Harness, executable: str, env: Mapping[str, str], captured: str | None
) -> str:
    """Return the installed version string, or raise :class:`Refused`."""
    try:
        installed = harness.installed_version(executable, env)
    except HarnessError as e:
        raise Refused(
            Reason.UNQUALIFIED_VERSION.value, detail="the installed harness did not report a version"
        ) from e
    if not harness.is_qualified(installed):
        raise Refused(
            Reason.UNQUALIFIED_VERSION.value,
            detail=f"{harness.name} {installed} is not qualified for native resume",
        )
    was = _captured_version(harness, captured)
    if was != installed:
        raise Refused(
            Reason.VERSION_CHANGED.value,
            detail=f"{harness.name} {installed} differs from the version that wrote the session",
        )
    return str(installed)


def _captured_version(harness: Harness, captured: str | None) -> HarnessVersion | None:
    """The record's version: a bare ``1.2.3`` or the CLI's own ``--version`` line."""
    if not captured:
        return None
    for parse in (HarnessVersion.parse, harness.parse_version):
        try:
            return parse(captured)
        except HarnessError:
            continue
    return None
