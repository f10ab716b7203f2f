"""A series of captures sends only what changed: unchanged artifacts are neither uploaded nor read back.

Real git repositories and a real local store. The second capture of a turn that changed only the
transcript uploads the transcript alone (the bundle, the patch and the untracked files are the
objects the first one verified, still with the identity the store gave them then); its record
still lists every object, and it verifies on its own. An object changed in the store since (same
size, other bytes) is uploaded again, never trusted.
"""

from __future__ import annotations

from pathlib import Path

from agentihooks_checkpoint.checks import check_content
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_checkpoint.validator import Validator
from agentihooks_worker.capture import CaptureRequest, capture
from testsupport.checkpoints import build_checkpoint

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)


class CountingStore(LocalStore):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.written: list[str] = []

    def write_file(self, scope: StoreScope, key: str, path: Path) -> None:
        self.written.append(key)
        super().write_file(scope, key, path)


def request(b, n: int, transcript: Path) -> CaptureRequest:  # type: ignore[no-untyped-def]
    return CaptureRequest(
        scope=SCOPE, checkpoint_id=f"exe-9-{n}", checkpoint_sequence=n, execution_id="exe-9",
        execution_generation=2, project_id="local:fixture", harness="claude",
        compatibility_key="worker:1.0.0", transcript=transcript,
        watermark=transcript.read_bytes().count(b"\n") - 1, worktree=b.worktree, base_commit=b.base_commit,
    )  # fmt: skip


def grow(transcript: Path, n: int) -> None:
    with transcript.open("ab") as f:
        f.write(b'{"type": "assistant", "turn": %d}\n' % n)


def test_only_the_changed_transcript_is_sent(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="context", commits_since_base=2)
    transcript = tmp_path / "live.jsonl"
    transcript.write_bytes(b.transcript.read_bytes())
    known: dict[str, str] = {}
    store.written.clear()
    first = capture(store, request(b, 1, transcript), known=known)
    roles = {e.role: e.digest for e in first.record.artifacts or []}
    assert {"transcript", "git_bundle", "source_patch", "untracked"} <= set(roles)
    assert len(store.written) == len(roles)  # the first one sends everything
    grow(transcript, 1)
    store.written.clear()
    second = capture(store, request(b, 2, transcript), known=known)
    again = {e.role: e.digest for e in second.record.artifacts or []}
    assert set(again) == set(roles) and again["transcript"] != roles["transcript"]
    assert store.written == [object_key(again["transcript"])]  # only what changed went out
    v = Validator().verify(store, SCOPE, "exe-9-2", execution_id="exe-9", execution_generation=2)
    assert v.ok and v.record is not None and check_content(v.record)  # complete on its own


def test_an_object_changed_in_the_store_is_sent_again(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="context", commits_since_base=2)
    transcript = tmp_path / "live.jsonl"
    transcript.write_bytes(b.transcript.read_bytes())
    known: dict[str, str] = {}
    first = capture(store, request(b, 1, transcript), known=known)
    patch = next(e.digest for e in first.record.artifacts or [] if e.role == "source_patch")
    path = store.root / SCOPE.prefix / object_key(patch)
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, other bytes, after this worker verified it
    grow(transcript, 1)
    store.written.clear()
    capture(store, request(b, 2, transcript), known=known)
    assert object_key(patch) in store.written  # not trusted: uploaded again
    v = Validator().verify(store, SCOPE, "exe-9-2", execution_id="exe-9", execution_generation=2)
    assert v.ok
