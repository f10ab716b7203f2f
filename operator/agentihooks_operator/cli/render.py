"""Plain-text tables and lines for the CLI (no colours, stable columns, ``-`` for empty cells)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    body = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in body]
    return "\n".join(lines)


def when(ms: Any) -> str:
    if not isinstance(ms, int):
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_text(body: dict[str, Any]) -> str:
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
    )
    cards = body.get("handoffs", [])
    if not cards:
        return f"{head}\n\n{seats}\n\nno handoffs"
    handoffs = table(
        ["SEAT", "AT", "BINDING", "REASON", "CHECKPOINT", "RESUME", "CONTINUITY", "SUCCESSOR", "AWAITING"],
        [
            [
                c.get("seat"),
                when(c.get("at")),
                c.get("binding"),
                c.get("reason"),
                c.get("checkpoint"),
                c.get("resume_label") if c.get("resume_available") else "fresh only",
                c.get("continuity"),
                c.get("successor"),
                c.get("awaiting"),
            ]
            for c in cards
        ],
    )
    return f"{head}\n\n{seats}\n\nhandoffs:\n{handoffs}"


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
