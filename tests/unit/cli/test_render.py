"""The CLI's text output: tables, the status view, checkpoint rows and event lines."""

from __future__ import annotations

from agentihooks_operator.cli.render import checkpoints_text, event_line, status_text, table


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
    assert "Resume native" in text and "fresh only" in text and "1970-01-01T00:00:00Z" in text
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
