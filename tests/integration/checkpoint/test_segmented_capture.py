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

import tarfile
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.archive import build_archive
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_worker.capture import segments as seg_module
from testsupport.checkpoints import edit_record, store_path
from testsupport.sessions import SCOPE, GrowingSession


def objects(store: CheckpointStore) -> set[str]:
    return set(store.list_keys(SCOPE, "objects/"))


def test_an_event_capture_sends_what_the_transcript_gained_and_restores_the_same_bytes(
    any_store: CheckpointStore, tmp_path: Path
) -> None:
    seat = GrowingSession(any_store, tmp_path)
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
    seat = GrowingSession(any_store, tmp_path)
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


def test_a_chain_at_its_cap_merges_what_followed_its_first_object(
    any_store: CheckpointStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seg_module, "MAX_CHAIN", 3)
    seat = GrowingSession(any_store, tmp_path)
    seat.capture(segments=True)
    base = seat.chain.parts[0]
    sizes = []
    for _ in range(4):
        seat.add_turns(1)
        checkpoint_id = seat.capture(segments=True)
        sizes.append([s["size"] for s in seat.record(checkpoint_id)["segments"]["transcript"]])
        assert seat.verify(checkpoint_id).ok
    turn = sizes[0][1]
    # at 3 objects, the next capture merges everything after the chain's first object into one
    assert sizes == [[base[1], turn], [base[1], turn, turn], [base[1], 3 * turn], [base[1], 3 * turn, turn]]
    seat.add_turns(1)
    assert "segments" not in seat.record(seat.capture(segments=False))  # a periodic capture is whole


class Crash(BaseException):
    """The worker process dying at a capture step (nothing after it runs)."""


@pytest.mark.parametrize(
    "at", ["uploaded:transcript", "uploaded:native_session", "verified", "manifest_written"]
)
def test_a_capture_dying_at_any_step_commits_nothing_and_keeps_the_chain(
    any_store: CheckpointStore, tmp_path: Path, at: str
) -> None:
    seat = GrowingSession(any_store, tmp_path)
    seat.capture(segments=True)
    before = (seat.chain.length, list(seat.chain.parts))
    seat.add_turns(2)

    def die(step: str) -> None:
        if step == at:
            raise Crash(step)

    with pytest.raises(Crash):
        seat.capture(segments=True, on_step=die)
    assert [c.checkpoint_id for c in any_store.list_checkpoints(SCOPE)] == [f"{seat.execution_id}-1"]
    assert (seat.chain.length, seat.chain.parts) == before  # moved on only by a commit
    again = seat.capture(segments=True)
    assert len(seat.record(again)["segments"]["transcript"]) == 2
    v = seat.verify(again, tmp_path / "stage")
    assert v.ok and v.staged is not None
    assert v.staged.artifacts["transcript"].path.read_bytes() == seat.transcript.read_bytes()


# -- hostile records -------------------------------------------------------------------------------
@pytest.fixture
def segmented(any_store: CheckpointStore, tmp_path: Path) -> tuple[GrowingSession, str]:
    seat = GrowingSession(any_store, tmp_path)
    seat.capture(segments=True)
    seat.add_turns(2)
    checkpoint_id = seat.capture(segments=True)
    assert seat.verify(checkpoint_id).ok
    return seat, checkpoint_id


def _edit(seat: GrowingSession, checkpoint_id: str, change: Any) -> str:
    edit_record(seat.store, SCOPE, checkpoint_id, change)
    return str(seat.verify(checkpoint_id).reason)


def test_a_segment_overwritten_with_garbage_of_its_size_is_corrupt(
    segmented: tuple[GrowingSession, str],
) -> None:
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
    segmented: tuple[GrowingSession, str], what: str, change: Any, reason: str
) -> None:
    seat, checkpoint_id = segmented
    assert _edit(seat, checkpoint_id, change) == reason, what
