"""Continuous captures send what the transcript gained (segments), on the local store and on moto S3.

An attempt's first capture is whole; each event capture after it stores only the
bytes its session file gained (one object), the native tar's small head and
trail, and a record listing the artifacts as those objects in order (minor 2.3).
A verification assembles them, checking every segment and the whole artifact:
what is staged is byte for byte what a whole capture of the same file would
have stored. A rewritten transcript, or a chain at its cap, makes the next
capture whole again. A record whose segments were tampered with is refused with
the reason naming what is wrong.
"""

from __future__ import annotations

import json
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.archive import build_archive
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.validator import Validator
from agentihooks_checkpoint.verdict import Verdict
from agentihooks_worker.capture import CaptureRequest, capture
from agentihooks_worker.capture import segments as seg_module
from agentihooks_worker.capture.segments import Chain
from testsupport.checkpoints import claude_project_dir, edit_record, make_repo, store_path

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)
EXE = f"exe-{uuid.uuid4().hex}"


class Seat:
    """One attempt's worktree and Claude session (a transcript and a subagent file), captured in turn."""

    def __init__(self, store: CheckpointStore, tmp: Path) -> None:
        self.store, self.tmp = store, tmp
        self.worktree = tmp / "worktree"
        make_repo(self.worktree, dirty=True)
        self.home = tmp / "home"
        self.session = str(uuid.uuid4())
        folder = self.home / ".claude" / "projects" / claude_project_dir(self.worktree)
        folder.mkdir(parents=True)
        self.transcript = folder / f"{self.session}.jsonl"
        self.extra = folder / self.session / "subagents" / "agent-1.jsonl"
        self.extra.parent.mkdir(parents=True)
        self.extra.write_bytes(b'{"sub": 1}\n')
        self.turns = 0
        self.add_turns(3)
        self.chain = Chain()
        self.known: dict[str, str] = {}
        self.sequence = 0

    def add_turns(self, n: int, size: int = 300) -> None:
        with self.transcript.open("ab") as f:
            for _ in range(n):
                line = {"type": "user", "n": self.turns, "sessionId": self.session, "pad": "x" * size}
                f.write(json.dumps(line).encode() + b"\n")
                self.turns += 1

    @property
    def native(self) -> list[str]:
        return [p.relative_to(self.home).as_posix() for p in (self.transcript, self.extra)]

    def capture(self, *, segments: bool) -> str:
        self.sequence += 1
        checkpoint_id = f"{EXE}-{self.sequence}"
        req = CaptureRequest(
            scope=SCOPE,
            checkpoint_id=checkpoint_id,
            checkpoint_sequence=self.sequence,
            execution_id=EXE,
            execution_generation=1,
            project_id="local:fixture",
            harness="claude",
            compatibility_key="worker:1.0.0",
            transcript=self.transcript,
            watermark=self.turns - 1,
            worktree=self.worktree,
            harness_home=self.home,
            native_files=self.native,
            native_session_id=self.session,
            native_harness_version="2.1.332",
            quiescence_method="partial_capture",
        )
        work = self.tmp / "work"
        work.mkdir(exist_ok=True)
        capture(self.store, req, work_dir=work, known=self.known, chain=self.chain, segments=segments)
        return checkpoint_id

    def verify(self, checkpoint_id: str, stage: Path | None = None) -> Verdict:
        return Validator().verify(
            self.store, SCOPE, checkpoint_id, execution_id=EXE, execution_generation=1, stage_dir=stage
        )

    def record(self, checkpoint_id: str) -> dict[str, Any]:
        key, _ = self.store.read_pointer(SCOPE, checkpoint_id)
        return dict(json.loads(self.store.read_bytes(SCOPE, key, 1 << 20)))


def objects(store: CheckpointStore) -> set[str]:
    return set(store.list_keys(SCOPE, "objects/"))


def test_an_event_capture_sends_what_the_transcript_gained_and_restores_the_same_bytes(
    any_store: CheckpointStore, tmp_path: Path
) -> None:
    seat = Seat(any_store, tmp_path)
    first = seat.capture(segments=True)  # no chain yet: whole
    assert "segments" not in seat.record(first) and seat.record(first)["schema_version"] == "2.2"
    assert seat.chain.parts and seat.chain.length == seat.transcript.stat().st_size
    before = objects(any_store)
    seat.add_turns(2, size=5000)
    gained = seat.transcript.stat().st_size - seat.chain.length
    second = seat.capture(segments=True)
    record = seat.record(second)
    assert record["schema_version"] == "2.3"
    new = objects(any_store) - before
    sizes = {k: any_store.size_of(SCOPE, k) or 0 for k in new}
    # what was sent: the gained bytes, the tar's head (the subagent file, the header) and its trail
    assert len(new) == 3, sizes
    assert gained in sizes.values()
    assert sum(sizes.values()) < gained + 12 * 1024  # no copy of the earlier transcript was sent
    transcript = record["segments"]["transcript"]
    assert [s["size"] for s in transcript] == [seat.chain.length - gained, gained]
    native = record["segments"]["native_session"]
    assert native[1:-1] == transcript  # the native tar shares the transcript's objects
    # a verification assembles both; they are what a whole capture of the same files would store
    v = seat.verify(second, tmp_path / "stage")
    assert v.ok, v
    assert v.staged is not None
    assert v.staged.artifacts["transcript"].path.read_bytes() == seat.transcript.read_bytes()
    whole = tmp_path / "whole.tar"
    build_archive(whole, [(seat.extra, seat.native[1]), (seat.transcript, seat.native[0])])
    assert v.staged.artifacts["native_session"].path.read_bytes() == whole.read_bytes()
    with tarfile.open(v.staged.artifacts["native_session"].path) as tar:
        assert sorted(tar.getnames()) == sorted(seat.native)
    assert v.record is not None and v.record.watermark == seat.turns - 1
    assert v.record.transcript_durable_cursor is not None
    assert v.record.transcript_durable_cursor.byte_offset == seat.transcript.stat().st_size
    # an unchanged transcript adds no transcript segment; the next gain adds one more
    third = seat.capture(segments=True)
    assert seat.record(third)["segments"]["transcript"] == transcript
    seat.add_turns(1)
    fourth = seat.capture(segments=True)
    assert len(seat.record(fourth)["segments"]["transcript"]) == 3
    assert seat.verify(fourth).ok


def test_a_rewritten_transcript_makes_the_next_capture_whole(
    any_store: CheckpointStore, tmp_path: Path
) -> None:
    seat = Seat(any_store, tmp_path)
    seat.capture(segments=True)
    data = bytearray(seat.transcript.read_bytes())
    data[40] = ord("Z")  # the harness rewrote an earlier line (not an append)
    seat.transcript.write_bytes(bytes(data) + b'{"more": 1}\n')
    again = seat.capture(segments=True)
    assert "segments" not in seat.record(again)
    v = seat.verify(again, tmp_path / "stage")
    assert v.ok and v.staged is not None
    assert v.staged.artifacts["transcript"].path.read_bytes() == seat.transcript.read_bytes()
    # and the chain starts again from that whole capture
    seat.add_turns(1)
    assert len(seat.record(seat.capture(segments=True))["segments"]["transcript"]) == 2


def test_a_chain_at_its_cap_and_a_periodic_capture_are_whole(
    any_store: CheckpointStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seg_module, "SEGMENTS_BEFORE_WHOLE", 3)
    seat = Seat(any_store, tmp_path)
    seat.capture(segments=True)
    counts = []
    for _ in range(4):
        seat.add_turns(1)
        counts.append(len(seat.record(seat.capture(segments=True)).get("segments", {}).get("transcript", [])))
    assert counts == [2, 3, 0, 2]  # 3 objects is the cap: the next is whole and starts a new chain
    seat.add_turns(1)
    assert "segments" not in seat.record(seat.capture(segments=False))  # a periodic capture


# -- hostile records -------------------------------------------------------------------------------
@pytest.fixture
def segmented(any_store: CheckpointStore, tmp_path: Path) -> tuple[Seat, str]:
    seat = Seat(any_store, tmp_path)
    seat.capture(segments=True)
    seat.add_turns(2)
    checkpoint_id = seat.capture(segments=True)
    assert seat.verify(checkpoint_id).ok
    return seat, checkpoint_id


def _edit(seat: Seat, checkpoint_id: str, change: Any) -> str:
    edit_record(seat.store, SCOPE, checkpoint_id, change)
    return str(seat.verify(checkpoint_id).reason)


def test_a_segment_overwritten_with_garbage_of_its_size_is_corrupt(segmented: tuple[Seat, str]) -> None:
    seat, checkpoint_id = segmented
    tail = seat.record(checkpoint_id)["segments"]["transcript"][-1]
    key = object_key(tail["digest"])
    garbage = b"g" * tail["size"]
    if hasattr(seat.store, "root"):
        path = store_path(seat.store, SCOPE, key)  # type: ignore[arg-type]
        path.chmod(0o600)
        path.write_bytes(garbage)
    else:
        s3: Any = seat.store
        s3.client.put_object(Bucket=s3.bucket, Key=f"{s3.prefix}{SCOPE.prefix}{key}", Body=garbage)
    assert str(seat.verify(checkpoint_id).reason) == "corrupt_object"


@pytest.mark.parametrize(
    ("what", "change", "reason"),
    [
        ("reordered", lambda r: r["segments"]["transcript"].reverse(), "corrupt_object"),
        ("a size off", lambda r: r["segments"]["transcript"][0].update(size=1), "inventory_mismatch"),
        ("for an unlisted role", lambda r: r["segments"].update(git_bundle=r["segments"]["transcript"]),
         "inventory_mismatch"),
        ("too many", lambda r: r["segments"].update(
            transcript=[{"digest": "sha256:" + "0" * 64, "size": 0}] * 64 + r["segments"]["transcript"]),
         "inventory_mismatch"),
        ("none", lambda r: r["segments"].update(transcript=[]), "inventory_mismatch"),
        ("an absent object", lambda r: r["segments"]["transcript"].insert(
            0, {"digest": "sha256:" + "1" * 64, "size": 0}), "missing_object"),
        ("without an inventory", lambda r: r.pop("artifacts"), "inventory_mismatch"),
        ("not keyed by a role", lambda r: r["segments"].update({"../x": []}), "invalid_record"),
    ],
)  # fmt: skip
def test_tampered_segments_are_refused_with_their_reason(
    segmented: tuple[Seat, str], what: str, change: Any, reason: str
) -> None:
    seat, checkpoint_id = segmented
    assert _edit(seat, checkpoint_id, change) == reason, what
