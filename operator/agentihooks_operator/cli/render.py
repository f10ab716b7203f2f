"""Plain-text tables and lines for the CLI (no colours, stable columns, ``-`` for empty cells)."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


#: The width the default tables fit in (``--wide`` lifts it).
WIDTH = 120
ELLIPSIS = "\u2026"
GAP = 2


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, its last one an ellipsis when anything was cut."""
    if len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + ELLIPSIS if width > 0 else ""


def _fit(headers: Sequence[str], natural: list[int], width: int, shrink: Mapping[str, int]) -> list[int]:
    """Column widths whose sum (with gaps) is at most ``width`` where possible.

    The ``shrink`` columns (free text, such as a reason) give way first, down to their floor;
    then the widest column, one character at a time, never below its header.
    """
    widths = list(natural)
    over = sum(widths) + GAP * (len(widths) - 1) - width
    floors = [(i, shrink[h]) for i, h in enumerate(headers) if h in shrink]
    general = [(i, max(len(h), 3)) for i, h in enumerate(headers)]
    for group in (floors, general):
        while over > 0:
            room = [i for i, floor in group if widths[i] > floor]
            if not room:
                break
            widths[max(room, key=lambda k: widths[k])] -= 1
            over -= 1
    return widths


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    width: int | None = None,
    shrink: Mapping[str, int] | None = None,
) -> str:
    """Aligned columns; with ``width``, long cells are cut with an ellipsis so each line fits."""
    body = [[cell(v) for v in row] for row in rows]
    natural = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    widths = natural if width is None else _fit(headers, natural, width, shrink or {})
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(clip(v, w).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in body]
    return "\n".join(lines)


def when(ms: Any) -> str:
    if not isinstance(ms, int):
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: Handoff columns of ``status`` by default (``--wide``: every column of :data:`HANDOFF_COLUMNS`).
#: The successor is the seat's current execution, in the seats table above.
STATUS_COLUMNS = ("SEAT", "BINDING", "REASON", "CHECKPOINT", "RESUME", "CONTINUITY")
HANDOFF_COLUMNS = (
    "SEAT",
    "AT",
    "BINDING",
    "REASON",
    "CHECKPOINT",
    "RESUME",
    "CONTINUITY",
    "SUCCESSOR",
    "AWAITING",
)
#: Free-text columns that give way first when a row is too wide, down to this many characters.
_SHRINK = {"REASON": 24, "BINDING": 17, "CHECKPOINT": 16, "TASK": 16}


def _card_cells(c: dict[str, Any]) -> dict[str, Any]:
    binding = c.get("binding")
    if binding == "launch blocked" and c.get("launch_blocked"):
        binding = f"launch blocked: {c.get('launch_blocked')}"
        if isinstance(c.get("launch_retry_at"), int):
            binding += f" (next try {when(c['launch_retry_at'])})"
    stops = c.get("old_attempt_stops_by")
    if isinstance(stops, int) and c.get("continuity") == "pending" and stops > time.time() * 1000:
        binding = f"{binding}: waiting for the old attempt to stop until {when(stops)}"
    return {
        "SEAT": c.get("seat"),
        "AT": when(c.get("at")),
        "BINDING": binding,
        "REASON": c.get("reason"),
        "CHECKPOINT": c.get("checkpoint"),
        "RESUME": c.get("resume_label") if c.get("resume_available") else "fresh only",
        "CONTINUITY": c.get("continuity"),
        "SUCCESSOR": c.get("successor"),
        "AWAITING": c.get("awaiting"),
    }


def status_text(body: dict[str, Any], *, wide: bool = False) -> str:
    """The status tables; each line fits :data:`WIDTH` columns unless ``wide`` (every column, uncut)."""
    width = None if wide else WIDTH
    head = (
        f"swarm {body.get('swarm')}  paused: {cell(body.get('paused'))}  "
        f"lease held here: {cell(body.get('lease_held'))}"
    )
    seats = table(
        ["SEAT", "EXECUTION", "GEN", "TASK"],
        [
            [s.get("seat"), s.get("execution_id"), s.get("generation"), s.get("task_id")]
            for s in body.get("seats", [])
        ],
        width=width,
        shrink=_SHRINK,
    )
    cards = body.get("handoffs", [])
    if not cards:
        return f"{head}\n\n{seats}\n\nno handoffs"
    columns = HANDOFF_COLUMNS if wide else STATUS_COLUMNS
    rows = [[_card_cells(c)[h] for h in columns] for c in cards]
    handoffs = table(list(columns), rows, width=width, shrink=_SHRINK)
    notes = _refusal_notes(body, cards, width)
    return f"{head}\n\n{seats}\n\nhandoffs:\n{handoffs}" + (f"\n\n{notes}" if notes else "")


def _refusal_notes(body: dict[str, Any], cards: list[dict[str, Any]], width: int | None) -> str:
    """One note per seat whose replacement refused its restore: the reason, what to fix, the command."""
    out = []
    for c in cards:
        r = c.get("restore_refused")
        if not isinstance(r, dict):
            continue
        text = (
            f"seat {c.get('seat')}: restore refused ({r.get('reason')}) by {r.get('execution_id')}: "
            f"{r.get('hint')}; then: agentihooks swarm {body.get('swarm')} relaunch {c.get('seat')}"
        )
        out.append(textwrap.fill(text, width, subsequent_indent="  ") if width else text)
    return "\n".join(out)


def checkpoints_text(body: dict[str, Any]) -> str:
    rows = [
        [
            c.get("checkpoint_id"),
            c.get("checkpoint_sequence"),
            c.get("execution_id"),
            "native" if c.get("native") else "context",
            c.get("watermark"),
            c.get("complete"),
            c.get("compatible"),
            c.get("created_at"),
        ]
        for c in body.get("checkpoints", [])
    ]
    head = (
        f"seat {body.get('seat')}  task {body.get('task_id')} (generation {body.get('task_generation')})  "
        f"image tag {body.get('compatibility_key')}  newest usable: {cell(body.get('newest_compatible'))}"
    )
    if not rows:
        return f"{head}\n\nno checkpoints"
    headers = ["CHECKPOINT", "SEQ", "EXECUTION", "KIND", "WATERMARK", "COMPLETE", "COMPATIBLE", "CREATED"]
    return f"{head}\n\n{table(headers, rows)}"


def event_line(e: dict[str, Any]) -> str:
    gens = ""
    if e.get("expected_generation") is not None or e.get("observed_generation") is not None:
        gens = f" gen {cell(e.get('expected_generation'))}/{cell(e.get('observed_generation'))}"
    who = f"{cell(e.get('seat'))}  {cell(e.get('execution_id'))}"
    return (
        f"{when(e.get('at_ms'))}  {cell(e.get('type')):<8} {who}"
        f"  epoch {cell(e.get('epoch'))}{gens}  {cell(e.get('detail'))}"
    ).rstrip()
