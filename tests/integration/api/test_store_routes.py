"""Scoped checkpoint routes: the named checkpoint only, the own scope only, nothing written on refusal."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from agentihooks_checkpoint.errors import CaptureError, CheckpointExists
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.remote import ControlRefused, RemoteStore
from agentihooks_checkpoint.validator import Validator
from testsupport.checkpoints import build_checkpoint

from .conftest import World

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1, namespace="default")


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def replacement(w: World, **kw):  # type: ignore[no-untyped-def]
    eid = w.fail()
    built = w.checkpoint(eid, **kw)
    d = w.recoveries["swarm-a"].decide(eid, "resume", "operator", spec=w.specs["swarm-a"])
    assert d.replacement
    return eid, built, d.replacement, RemoteStore(w.url, d.replacement, w.worker_token(d.replacement))


def test_replacement_verifies_its_named_checkpoint_through_the_controller(world: World) -> None:
    eid, built, _new, remote = replacement(world)
    verdict = Validator().verify(remote, SCOPE, built.checkpoint_id, execution_id=eid, execution_generation=1)
    assert verdict.ok, str(verdict)
    assert remote.list_keys(SCOPE, "checkpoints/") == sorted(
        [
            f"checkpoints/{built.checkpoint_id}/committed.json",
            remote.read_pointer(SCOPE, built.checkpoint_id)[0],
        ]
    )


def test_other_checkpoints_and_other_scopes_cannot_be_read(world: World) -> None:
    eid, built, _new, remote = replacement(world)
    other = world.checkpoint(eid, checkpoint_id="ckpt-other", sequence=99)
    with pytest.raises(ControlRefused) as e:
        remote.read_pointer(SCOPE, other.checkpoint_id)
    assert e.value.status == 403 and e.value.code == "forbidden_scope"
    other_objects = set(other.record.artifact_hashes.values()) - set(built.record.artifact_hashes.values())
    assert other_objects
    digest = next(iter(other_objects))
    with pytest.raises(ControlRefused), remote.open_read(SCOPE, "objects/sha256/" + digest[7:]) as f:
        f.read()
    for scope in (
        StoreScope(swarm="swarm-a", task_id="task-2", task_generation=1, namespace="default"),
        StoreScope(swarm="swarm-a", task_id="task-1", task_generation=2, namespace="default"),
        StoreScope(swarm="swarm-b", task_id="task-1", task_generation=1, namespace="default"),
        # The same swarm, task and generation of another namespace, and the name-only layout.
        StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1, namespace="team-b"),
        StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1),
    ):
        with pytest.raises(ControlRefused) as e:
            remote.read_pointer(scope, built.checkpoint_id)
        assert e.value.status == 403


def test_capture_through_the_controller_writes_into_the_own_scope(world: World) -> None:
    _eid, _built, new, remote = replacement(world)
    made = build_checkpoint(
        remote,
        SCOPE,
        world.tmp / "capture",
        kind="context",
        checkpoint_id="ckpt-new",
        sequence=50,
        execution_id=new,
        execution_generation=2,
        compatibility_key="v1",
    )
    listed = {s.checkpoint_id: s for s in world.store.list_checkpoints(SCOPE)}
    assert listed["ckpt-new"].complete and listed["ckpt-new"].execution_id == new
    pointer = f"checkpoints/{made.checkpoint_id}/committed.json"
    again = world.store.read_bytes(SCOPE, pointer, 4096)
    with pytest.raises(CheckpointExists):
        remote.write_once(SCOPE, pointer, again)
    with pytest.raises(ControlRefused) as e:
        remote.write_once(SCOPE, "checkpoints/ckpt-x/committed.json", b'{"manifest": "x", "sha256": "y"}')
    assert e.value.status == 400


def test_writes_outside_the_own_scope_or_for_another_execution_are_refused(world: World) -> None:
    eid, _built, new, remote = replacement(world)
    before = files(world.store.root)
    data = b"some bytes"
    key = "objects/sha256/" + hashlib.sha256(data).hexdigest()
    for scope in (
        StoreScope(swarm="swarm-a", task_id="task-2", task_generation=1, namespace="default"),
        StoreScope(swarm="swarm-b", task_id="task-1", task_generation=1, namespace="default"),
        StoreScope(swarm="swarm-a", task_id="task-1", task_generation=3, namespace="default"),
        StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1, namespace="team-b"),
        StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1),
    ):
        with pytest.raises(ControlRefused) as e:
            remote.write_bytes(scope, key, data)
        assert e.value.status == 403
    # A manifest claiming another execution (here: the fenced one) is refused too.
    foreign = world.tmp / "foreign"
    with pytest.raises(CaptureError) as refused:
        build_checkpoint(
            remote,
            SCOPE,
            foreign,
            kind="context",
            checkpoint_id="ckpt-foreign",
            execution_id=eid,
            compatibility_key="v1",
        )
    assert isinstance(refused.value.__cause__, ControlRefused) and refused.value.__cause__.status == 403
    assert not any("ckpt-foreign" in k for k in files(world.store.root))
    assert {k: v for k, v in files(world.store.root).items() if "objects" not in k} == {
        k: v for k, v in before.items() if "objects" not in k
    }
    assert new


@pytest.mark.parametrize(
    "key",
    [
        "../task-2/gen-1/objects/sha256/" + "a" * 64,
        "objects/sha256/../../x",
        "/etc/passwd",
        "objects/sha256/" + "A" * 64,
        "checkpoints/../committed.json",
        "checkpoints/ckpt-1/../../x/committed.json",
        "checkpoints/..%2f..%2fx/committed.json",
        "objects\\sha256\\" + "a" * 64,
        "checkpoints/ckpt-1/manifest.json",
        "",
        "objects/sha256/" + "a" * 64 + "/",
    ],
)
def test_path_tricks_are_refused_and_nothing_is_written(world: World, key: str) -> None:
    _eid, _built, new, _remote = replacement(world)
    before = files(world.store.root)
    params = {
        "swarm": "swarm-a",
        "task_id": "task-1",
        "task_generation": "1",
        "namespace": "default",
        "key": key,
    }
    r = world.call(
        "PUT",
        f"/v1/executions/{new}/checkpoint-store/object",
        world.worker_token(new),
        params=params,
        content=b"x",
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_key"
    g = world.call(
        "GET", f"/v1/executions/{new}/checkpoint-store/object", world.worker_token(new), params=params
    )
    assert g.status_code == 400
    assert files(world.store.root) == before


def test_oversized_and_mismatched_uploads_are_refused_and_leave_nothing(world: World) -> None:
    _eid, _built, new, remote = replacement(world)
    world.state.object_cap = 1024
    before = files(world.store.root)
    big = os.urandom(4096)
    path = world.tmp / "big.bin"
    path.write_bytes(big)
    with pytest.raises(ControlRefused) as e:
        remote.write_file(SCOPE, "objects/sha256/" + hashlib.sha256(big).hexdigest(), path)
    assert e.value.status == 413
    # Streamed without a declared length: the cap is enforced while reading.
    params = {
        "swarm": "swarm-a",
        "task_id": "task-1",
        "task_generation": "1",
        "namespace": "default",
        "key": "objects/sha256/" + hashlib.sha256(big).hexdigest(),
    }
    r = world.call(
        "PUT",
        f"/v1/executions/{new}/checkpoint-store/object",
        world.worker_token(new),
        params=params,
        content=iter([big[:1000], big[1000:]]),
    )
    assert r.status_code == 413
    with pytest.raises(ControlRefused) as e:
        remote.write_bytes(SCOPE, "objects/sha256/" + "0" * 64, b"not those bytes")
    assert e.value.status == 400 and e.value.code == "digest_mismatch"
    assert files(world.store.root) == before


def test_fenced_attempt_credential_is_refused_at_once(world: World) -> None:
    eid, built, new, remote = replacement(world)
    assert remote.size_of(SCOPE, f"checkpoints/{built.checkpoint_id}/committed.json")
    # The replacement fails too: its credential stops working at the fence.
    spec = world.specs["swarm-a"]
    from testsupport.recovery import observe

    world.recoveries["swarm-a"].reconcile(spec, observe([(new, "eng-1", 2)], failed={new: "evicted"}))
    with pytest.raises(ControlRefused) as e:
        remote.size_of(SCOPE, f"checkpoints/{built.checkpoint_id}/committed.json")
    # revoked: its worker is told it was fenced (it stops its agent), and gets nothing
    assert (e.value.status, e.value.code) == (410, "fenced")
    assert eid


def test_an_upload_cut_off_midway_leaves_nothing_behind(world: World) -> None:
    import socket
    import time
    from urllib.parse import urlencode, urlparse

    _eid, _built, new, remote = replacement(world)
    spool = world.tmp / "spool"
    spool.mkdir()
    world.state.spool_dir = str(spool)
    before = files(world.store.root)
    data = os.urandom(200_000)
    key = "objects/sha256/" + hashlib.sha256(data).hexdigest()
    query = urlencode(
        {"swarm": "swarm-a", "task_id": "task-1", "task_generation": "1", "namespace": "default", "key": key}
    )
    u = urlparse(world.url)
    head = (
        f"PUT /v1/executions/{new}/checkpoint-store/object?{query} HTTP/1.1\r\n"
        f"Host: {u.hostname}\r\nAuthorization: Bearer {world.worker_token(new)}\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()

    def wait_for(condition) -> None:  # type: ignore[no-untyped-def]
        for _ in range(400):
            if condition():
                return
            time.sleep(0.05)
        raise AssertionError("condition not reached")

    with socket.create_connection((u.hostname, u.port)) as s:
        s.sendall(head + data[:50_000])
        wait_for(lambda: any(spool.iterdir()))  # the server is streaming into its spool file
        spooled = next(spool.iterdir())
        assert spooled.stat().st_mode & 0o777 == 0o600
    # The worker died mid-upload: the spool file goes, nothing reaches the store.
    wait_for(lambda: not any(spool.iterdir()))
    assert files(world.store.root) == before
    # The same upload sent again in full is stored once.
    path = world.tmp / "again.bin"
    path.write_bytes(data)
    remote.write_file(SCOPE, key, path)
    added = set(files(world.store.root)) - set(before)
    assert added == {f"namespaces/default/swarms/swarm-a/tasks/task-1/gen-1/{key}"}
