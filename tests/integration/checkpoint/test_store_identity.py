"""A store's cheap object identity moves with every overwrite, whatever the new bytes' size.

The controller remembers a checkpoint's verdict with its objects' identities and hashes again only
when one moved (:mod:`agentihooks_operator.recovery.verified`). Here, on the local store and on a
real S3 API (moto server, boto3): the identity is stable while nothing is written, moves when the
object is overwritten in place with bytes of the same size, and is ``None`` for an absent key; and a
``Verifications`` over each store catches a same-size corruption made after the first verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agentihooks_checkpoint.catalog import CheckpointSummary
from agentihooks_checkpoint.checks import check_content
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_operator.recovery.verified import Verifications
from testsupport.checkpoints import build_checkpoint

SCOPE = StoreScope(swarm="example", task_id="task-1", task_generation=1)


@pytest.fixture
def store(any_store: CheckpointStore) -> CheckpointStore:
    return any_store


def overwrite_same_size(store: CheckpointStore, key: str, tmp_path: Path) -> None:
    with store.open_read(SCOPE, key) as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF
    garbage = tmp_path / "garbage"
    garbage.write_bytes(bytes(data))
    store.write_file(SCOPE, key, garbage)


def test_identity_moves_with_a_same_size_overwrite(store: CheckpointStore, tmp_path: Path) -> None:
    built = build_checkpoint(store, SCOPE, tmp_path / "w", checkpoint_id="ckpt-1")
    key = object_key(check_content(built.record)[0].digest)
    first = store.identity(SCOPE, key)
    assert first is not None and store.identity(SCOPE, key) == first
    size = store.size_of(SCOPE, key)
    overwrite_same_size(store, key, tmp_path)
    assert store.size_of(SCOPE, key) == size
    assert store.identity(SCOPE, key) not in (None, first)
    assert store.identity(SCOPE, "objects/sha256/" + "0" * 64) is None


def test_a_corruption_after_the_verdict_is_caught_at_the_next_look(
    store: CheckpointStore, tmp_path: Path
) -> None:
    built = build_checkpoint(store, SCOPE, tmp_path / "w", checkpoint_id="ckpt-1")
    summary = next(s for s in store.list_checkpoints(SCOPE) if s.checkpoint_id == "ckpt-1")
    assert isinstance(summary, CheckpointSummary)
    v = Verifications(store)
    assert v.verified(SCOPE, summary) and v.verified(SCOPE, summary)
    assert (v.runs, v.rechecks) == (1, 1)
    overwrite_same_size(store, object_key(check_content(built.record)[-1].digest), tmp_path)
    assert not v.verified(SCOPE, summary)
    assert v.runs == 2
