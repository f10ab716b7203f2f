"""Store selection from the environment, and the storage layout's keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentihooks_checkpoint.errors import StoreConfigError
from agentihooks_checkpoint.layout import checkpoint_id_of_pointer, manifest_key, object_key, pointer_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore, S3Store, store_from_env


def test_no_store_configured_is_none() -> None:
    assert store_from_env({}) is None
    assert store_from_env({"AGENTIHOOKS_CHECKPOINT_ROOT": "  "}) is None


def test_absolute_root_gives_a_local_store(tmp_path: Path) -> None:
    store = store_from_env({"AGENTIHOOKS_CHECKPOINT_ROOT": str(tmp_path)})
    assert isinstance(store, LocalStore)
    assert store.root == tmp_path


def test_relative_root_is_refused_with_a_clear_message() -> None:
    with pytest.raises(StoreConfigError, match="AGENTIHOOKS_CHECKPOINT_ROOT must be an absolute path"):
        store_from_env({"AGENTIHOOKS_CHECKPOINT_ROOT": "checkpoints"})
    with pytest.raises(StoreConfigError):
        LocalStore("relative/dir")


def test_bucket_takes_precedence_over_root(tmp_path: Path) -> None:
    client = object()
    store = store_from_env(
        {"AGENTIHOOKS_CHECKPOINT_BUCKET": "b", "AGENTIHOOKS_CHECKPOINT_ROOT": str(tmp_path)},
        s3_client=client,
    )
    assert isinstance(store, S3Store)
    assert store.bucket == "b"
    assert store.client is client


def test_a_relative_root_is_refused_even_beside_a_bucket() -> None:
    """The spec: a relative root is refused; a bucket winning over it does not make it right."""
    with pytest.raises(StoreConfigError, match="AGENTIHOOKS_CHECKPOINT_ROOT must be an absolute path"):
        env = {"AGENTIHOOKS_CHECKPOINT_BUCKET": "b", "AGENTIHOOKS_CHECKPOINT_ROOT": "relative"}
        store_from_env(env, s3_client=object())


def test_layout_keys() -> None:
    scope = StoreScope(swarm="s", task_id="t", task_generation=3)
    assert scope.prefix == "swarms/s/tasks/t/gen-3/"
    assert object_key("sha256:" + "a" * 64) == "objects/sha256/" + "a" * 64
    assert manifest_key("ckpt-1", "b" * 64) == f"checkpoints/ckpt-1/manifest-{'b' * 64}.json"
    assert checkpoint_id_of_pointer(pointer_key("ckpt-1")) == "ckpt-1"
    assert checkpoint_id_of_pointer("checkpoints/ckpt-1/manifest.json") is None
    assert checkpoint_id_of_pointer("checkpoints/../committed.json") is None
    for bad in ("..", "a/b", ""):
        with pytest.raises(ValueError):
            pointer_key(bad)
    with pytest.raises(ValueError):
        object_key("sha256:xyz")
