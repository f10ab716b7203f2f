"""The CLI's text output: tables, the status view, checkpoint rows and event lines."""

from __future__ import annotations

from agentihooks_operator.cli.render import WIDTH, checkpoints_text, clip, event_line, status_text, table


def test_table_aligns_and_marks_empty_cells() -> None:
    out = table(["A", "LONGER"], [["x", None], ["yyyy", True]])
    assert out.splitlines() == ["A     LONGER", "x     -", "yyyy  yes"]


def test_status_text_shows_cards_and_labels() -> None:
    body = {
        "swarm": "example",
        "paused": True,
        "lease_held": False,
        "seats": [{"seat": "eng-2", "execution_id": "exe-1", "generation": 1, "task_id": "t"}],
        "handoffs": [
            {
                "seat": "eng-2",
                "at": 0,
                "binding": "awaiting decision",
                "reason": "oom_killed; native resume from ckpt-7 at record 412",
                "checkpoint": "ckpt-7",
                "resume_available": True,
                "resume_label": "Resume native",
                "continuity": "pending",
                "successor": None,
                "awaiting": "recovery_pending",
            },
            {
                "seat": "eng-3",
                "at": 0,
                "binding": "awaiting decision",
                "reason": "image_pull",
                "checkpoint": None,
                "resume_available": False,
                "resume_label": None,
                "continuity": "pending",
            },
        ],
    }
    text = status_text(body)
    assert "paused: yes" in text and "lease held here: no" in text
    assert "Resume native" in text and "fresh only" in text
    assert "1970-01-01T00:00:00Z" in status_text(body, wide=True)
    assert "no handoffs" in status_text({**body, "handoffs": []})


def test_checkpoints_and_events() -> None:
    text = checkpoints_text(
        {
            "seat": "eng-1",
            "task_id": "t",
            "task_generation": 1,
            "compatibility_key": "v1",
            "newest_compatible": "c2",
            "checkpoints": [
                {
                    "checkpoint_id": "c2",
                    "checkpoint_sequence": 2,
                    "native": False,
                    "complete": True,
                    "compatible": True,
                }
            ],
        }
    )
    assert "c2" in text and "context" in text and "newest usable: c2" in text
    assert "no checkpoints" in checkpoints_text({"checkpoints": []})
    line = event_line(
        {
            "at_ms": 1000,
            "type": "fence",
            "seat": "eng-1",
            "execution_id": "exe-1",
            "epoch": 3,
            "expected_generation": 1,
            "observed_generation": 1,
            "detail": "oom_killed",
        }
    )
    assert line == "1970-01-01T00:00:01Z  fence    eng-1  exe-1  epoch 3 gen 1/1  oom_killed"


EXE = "exe-" + "0123456789abcdef" * 2
LONG_CARD = {
    "seat": "eng-12",
    "at": 1_790_000_000_000,
    "binding": "awaiting decision",
    "reason": f"oom_killed; native resume from {EXE}-41 at record 4123; the node was under memory pressure",
    "checkpoint": f"{EXE}-41",
    "resume_available": True,
    "resume_label": "Continue from context",
    "continuity": "reconstructed",
    "successor": "exe-" + "f" * 32,
    "awaiting": "recovery_pending",
}
LONG_STATUS = {
    "swarm": "example",
    "paused": False,
    "lease_held": True,
    "seats": [{"seat": "eng-12", "execution_id": EXE, "generation": 3, "task_id": "task-" + "t" * 90}],
    "handoffs": [
        LONG_CARD,
        {**LONG_CARD, "seat": "eng-2", "binding": "launch blocked", "launch_blocked": "x" * 80},
    ],
}


def test_clip_marks_what_it_cut() -> None:
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdef", 4) == "abc\u2026"
    assert len(clip("x" * 500, 20)) == 20


def test_table_fits_the_width_shrinking_free_text_first() -> None:
    rows = [["eng-1", "r" * 150, EXE]]
    out = table(["SEAT", "REASON", "EXECUTION"], rows, width=80, shrink={"REASON": 10})
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert EXE in lines[1]  # the ids stay whole while the free text can give way
    assert "\u2026" in lines[1]


def test_status_fits_120_columns_and_wide_shows_everything() -> None:
    text = status_text(LONG_STATUS)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH, [len(line) for line in lines]
    assert "\u2026" in text
    header = next(line for line in lines if line.startswith("SEAT") and "BINDING" in line)
    assert header.split() == ["SEAT", "BINDING", "REASON", "CHECKPOINT", "RESUME", "CONTINUITY"]
    assert "Continue from context" in text and "reconstructed" in text and "launch blocked" in text
    wide = status_text(LONG_STATUS, wide=True)
    assert max(len(line) for line in wide.splitlines()) > WIDTH
    assert "\u2026" not in wide
    for value in (LONG_CARD["reason"], LONG_CARD["successor"], "recovery_pending", "2026-"):
        assert str(value) in wide
    wide_header = next(line for line in wide.splitlines() if line.startswith("SEAT") and "BINDING" in line)
    assert wide_header.split() == [
        "SEAT",
        "AT",
        "BINDING",
        "REASON",
        "CHECKPOINT",
        "RESUME",
        "CONTINUITY",
        "SUCCESSOR",
        "AWAITING",
    ]
