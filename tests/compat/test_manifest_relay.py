"""A newer writer's 2.9 record, stored as its own bytes: listed, verified and served back whole.

Rules MANIFEST-2 and MANIFEST-7 (docs/compatibility.md) end to end: the real local store and
S3 (moto server through real boto3) for the listing and the verification, and the live
control API (real aiohttp server, real Redis) for the controller's checkpoint routes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore, S3Store, store_from_env
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.stores.remote import RemoteStore
from agentihooks_checkpoint.validator import Validator
from testsupport.control_api import MASTER_A, World, make_world
from testsupport.original_records import EXECUTION, TRANSCRIPT, commit_original, original_manifest

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)
#: The same task generation as a Swarm of namespace ``default`` keeps it today (the test world's).
WORLD_SCOPE = SCOPE.model_copy(update={"namespace": "default"})
#: Fields of a newer minor this product does not know: one plain, one nested.
NEWER = {"handoff_hint": {"by": "a newer writer", "steps": [1, 2, 3]}, "retention_class": "long"}


@pytest.fixture(params=["local", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointStore:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    endpoint: str = request.getfixturevalue("s3_endpoint")
    bucket: str = request.getfixturevalue("s3_bucket")
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    store = store_from_env(
        {"AGENTIHOOKS_CHECKPOINT_BUCKET": bucket, "AGENTIHOOKS_CHECKPOINT_PREFIX": "ckpts"}, s3_client=client
    )
    assert isinstance(store, S3Store)
    return store


@pytest.mark.parametrize(
    "newer_schema", [True, False], ids=["MANIFEST-2-newer-schema", "MANIFEST-3-older-schema"]
)
def test_manifest_2_a_2_9_record_is_listed_verified_and_kept_whole(
    any_store: CheckpointStore, newer_schema: bool
) -> None:
    """MANIFEST-2, MANIFEST-7: a 2.9 record with unknown fields lists complete, verifies, relays intact."""
    rec = original_manifest(9, newer_schema=newer_schema, **NEWER)
    data = commit_original(any_store, SCOPE, rec)

    [row] = any_store.list_checkpoints(SCOPE)
    assert row.checkpoint_id == rec["checkpoint_id"] and row.complete
    assert row.schema_version == "2.9" and row.unknown_fields == NEWER
    assert row.execution_generation == 1 and row.watermark == 1 and row.compatibility_key is None

    verdict = Validator().verify(
        any_store, SCOPE, rec["checkpoint_id"], execution_id=EXECUTION, execution_generation=1
    )
    assert verdict.ok, str(verdict)
    assert verdict.record is not None and verdict.record.unknown_fields == NEWER

    key, _ = any_store.read_pointer(SCOPE, rec["checkpoint_id"])
    assert any_store.read_bytes(SCOPE, key, 1 << 20) == data  # the store keeps the writer's bytes


@pytest.fixture
def world(redis_url: str, tmp_path: Path) -> Iterator[World]:
    with make_world(redis_url, tmp_path) as w:
        yield w


def test_manifest_7_the_controllers_routes_relay_a_2_9_record_with_its_unknown_fields(world: World) -> None:
    """MANIFEST-7: the checkpoints listing and the worker's scoped store route relay the record whole."""
    eid = world.fail()
    # Another writer's 2.9 record of the fenced attempt; it carries this product's optional
    # compatibility_key, so the controller may offer it for resume.
    rec = original_manifest(9, execution_id=eid, compatibility_key="v1", **NEWER)
    data = commit_original(world.store, WORLD_SCOPE, rec)

    listed = world.call("GET", "/v1/swarms/swarm-a/seats/eng-1/checkpoints", world.tokens[MASTER_A])
    assert listed.status_code == 200, listed.text
    body: dict[str, Any] = listed.json()
    assert body["newest_compatible"] == rec["checkpoint_id"]
    [row] = [r for r in body["checkpoints"] if r["checkpoint_id"] == rec["checkpoint_id"]]
    assert row["unknown_fields"] == NEWER and row["schema_version"] == "2.9" and row["compatible"]

    decision = world.recoveries["swarm-a"].decide(eid, "resume", "operator", spec=world.specs["swarm-a"])
    assert decision.checkpoint == rec["checkpoint_id"] and decision.replacement
    assert decision.directive is not None and decision.directive.recovery.value == "reconstructed"
    remote = RemoteStore(world.url, decision.replacement, world.worker_token(decision.replacement))

    key, _ = remote.read_pointer(WORLD_SCOPE, rec["checkpoint_id"])
    served = remote.read_bytes(WORLD_SCOPE, key, 1 << 20)
    assert served == data
    assert {k: json.loads(served)[k] for k in NEWER} == NEWER
    verdict = Validator().verify(
        remote, WORLD_SCOPE, rec["checkpoint_id"], execution_id=eid, execution_generation=1
    )
    assert verdict.ok, str(verdict)
    assert verdict.staged is None and verdict.record is not None
    with remote.open_read(WORLD_SCOPE, "objects/sha256/" + rec["artifact_hashes"]["transcript"][7:]) as f:
        assert f.read() == TRANSCRIPT
