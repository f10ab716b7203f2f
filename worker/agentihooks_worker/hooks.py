"""The harness's own hooks announce its events to the worker, so a capture follows each turn.

Claude Code runs the commands of its ``hooks`` settings at its lifecycle events.
The worker merges two into the user settings of the attempt's Claude home
(``$CLAUDE_CONFIG_DIR/settings.json``): ``Stop`` (a turn ended) and
``PostToolUse`` (a tool ran: a file edited, a command run). Each appends one
byte to the worker's signal file (``$AGENTIHOOKS_CAPTURE_SIGNAL``), which
:class:`.triggers.CaptureTriggers` watches. The command never fails the agent:
a missing variable or an unwritable file is ignored (the worker's file-change
watch and its timer still capture).

The merge keeps everything else in the file; a hook the worker added before
(same command) is not added twice; a file that is not a JSON object, or whose
``hooks`` are not in Claude Code's shape, is refused and left as it is.

Codex runs its ``notify`` program after each turn (``agent-turn-complete``,
with the event's JSON as the last argument). The worker never edits the
user's ``config.toml`` for it: it adds a ``-c notify=[...]`` override to the
command line (:func:`codex_notify_override`) that appends the byte and then
runs the user's own ``notify`` program, when the file names one, with the
event's argument as Codex would have. The event carries conversation text; the
hook never reads, keeps or logs it.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from .errors import WorkerError
from .onboarding import _atomic_write, load_object

SIGNAL_ENV = "AGENTIHOOKS_CAPTURE_SIGNAL"
#: What each hook runs: one byte appended to the signal file; never an error for the harness.
HOOK_COMMAND = f'[ -n "${SIGNAL_ENV}" ] && printf . >> "${SIGNAL_ENV}" 2>/dev/null; exit 0'
EVENTS = ("Stop", "PostToolUse")


class HookSettingsError(WorkerError):
    """The harness's settings file exists but cannot be merged into."""


def add_capture_hooks(settings_file: Path) -> dict[str, Any]:
    """Merge the capture hooks into ``settings_file`` (created 0600 when absent); return the result."""
    data, mode = load_object(settings_file, HookSettingsError)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise HookSettingsError(f"{settings_file.name}: 'hooks' is not an object; leaving it as it is")
    for event in EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise HookSettingsError(f"{settings_file.name}: hooks.{event} is not a list; leaving it as it is")
        if any(_ours(g) for g in groups):
            continue
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": HOOK_COMMAND}]}
        if event == "PostToolUse":
            group = {"matcher": "*", **group}
        groups.append(group)
    _atomic_write(settings_file, json.dumps(data, indent=2).encode() + b"\n", mode)
    return data


def _ours(group: object) -> bool:
    if not isinstance(group, dict):
        return False
    inner = group.get("hooks")
    return isinstance(inner, list) and any(
        isinstance(h, dict) and h.get("command") == HOOK_COMMAND for h in inner
    )


#: Codex's notify program: the byte, then the user's own program (when there is one) with the event.
NOTIFY_SCRIPT = f'{HOOK_COMMAND.removesuffix("exit 0")}[ "$#" -gt 1 ] && exec "$@"; exit 0'


def codex_notify_override(config_toml: Path) -> str | None:
    """The ``notify=[...]`` value for Codex's ``-c`` option, chaining the user's own ``notify`` from
    ``config_toml``; ``None`` (no hook: the file watch still captures) when that file cannot be read
    as TOML or its ``notify`` is not a list of strings."""
    user: list[str] = []
    if config_toml.exists():
        try:
            data = tomllib.loads(config_toml.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None
        found = data.get("notify", [])
        if not isinstance(found, list) or not all(isinstance(a, str) for a in found):
            return None
        user = found
    # A TOML array of basic strings: JSON's string escapes (ASCII only) are TOML's.
    return "notify=" + json.dumps(["sh", "-c", NOTIFY_SCRIPT, "sh", *user], ensure_ascii=True)
