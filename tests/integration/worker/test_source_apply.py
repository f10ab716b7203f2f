"""Applying staged source: one fetch of the bundle, untracked files moved into place, clear refusals.

The bundle is fetched once (no separate verification pass when it applies);
when the fetch fails, the bundle is verified to name what went wrong. The
untracked files staged unpacked by the Validator are moved, not copied.
"""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_checkpoint.validator import Validator
from agentihooks_worker.source import SourceRefused, apply_source
from testsupport.checkpoints import build_checkpoint

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)


def staged(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="claude", commits_since_base=2)
    v = Validator().verify(
        store,
        SCOPE,
        b.checkpoint_id,
        execution_id=b.execution_id,
        execution_generation=1,
        stage_dir=tmp_path / "stage",
        unpack_archives=True,
    )
    assert v.ok and v.record is not None and v.staged is not None
    return b, v.record, v.staged


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout.decode()


def test_the_worktree_gets_the_head_the_changes_and_the_untracked_files(tmp_path: Path) -> None:
    b, record, stage = staged(tmp_path)
    wt = tmp_path / "wt"
    wt.mkdir()
    untracked = stage.get("untracked")
    moved = dict(untracked.members)
    apply_source(record, stage, wt, str(b.worktree))
    assert git(wt, "rev-parse", "HEAD").strip() == record.head_commit
    assert "restore" not in git(wt, "for-each-ref")  # the temporary ref is gone
    for name, was in moved.items():
        placed = wt / name
        assert placed.read_bytes() == (b.worktree / name).read_bytes()
        assert stat.S_IMODE(placed.stat().st_mode) == 0o600 and not was.exists()
    assert git(wt, "status", "--porcelain") == git(b.worktree, "status", "--porcelain")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: b"not a bundle\n", "the git bundle does not apply"),
    ],
)
def test_a_damaged_bundle_is_refused_with_what_went_wrong(tmp_path: Path, damage, message) -> None:  # type: ignore[no-untyped-def]
    b, record, stage = staged(tmp_path)
    bundle = stage.get("git_bundle").path
    bundle.write_bytes(damage(bundle.read_bytes()))
    wt = tmp_path / "wt"
    wt.mkdir()
    with pytest.raises(SourceRefused, match=message):
        apply_source(record, stage, wt, str(b.worktree))


def test_a_bundle_whose_tip_is_not_the_head_is_refused(tmp_path: Path) -> None:
    b, record, stage = staged(tmp_path)
    wrong = record.model_copy(update={"head_commit": record.base_commit})
    wt = tmp_path / "wt"
    wt.mkdir()
    with pytest.raises(SourceRefused, match="branch tip is not the checkpoint's head"):
        apply_source(wrong, stage, wt, str(b.worktree))


@pytest.mark.parametrize(
    "member", [".git/hooks/post-checkout", ".git/config", "vendor/lib/.git/hooks/pre-commit", ".GIT/config"]
)
@pytest.mark.parametrize("unpacked", [True, False], ids=["unpacked", "tar"])
def test_untracked_files_under_a_git_folder_are_refused_before_anything_is_written(
    tmp_path: Path, member: str, unpacked: bool
) -> None:
    import io
    import tarfile

    from agentihooks_checkpoint.verdict import StagedArtifact, StagedCheckpoint

    b, record, stage = staged(tmp_path)
    hook = b"#!/bin/sh\necho owned > /tmp/owned\n"
    untracked = stage.get("untracked")
    assert untracked is not None and untracked.members is not None
    if unpacked:
        planted = tmp_path / "planted"
        planted.write_bytes(hook)
        members = {**untracked.members, member: planted}
        hostile = StagedArtifact("untracked", untracked.path, untracked.size, untracked.digest, members)
    else:
        tar_path = tmp_path / "untracked.tar"
        with tarfile.open(tar_path, "w") as tar:
            info = tarfile.TarInfo(member)
            info.size = len(hook)
            tar.addfile(info, io.BytesIO(hook))
        hostile = StagedArtifact("untracked", tar_path, tar_path.stat().st_size, untracked.digest)
    stage = StagedCheckpoint(stage.directory, {**stage.artifacts, "untracked": hostile})
    wt = tmp_path / "wt"
    wt.mkdir()
    with pytest.raises(
        SourceRefused, match=r"^source: the untracked files reach into a repository's .git folder$"
    ):
        apply_source(record, stage, wt, str(b.worktree))
    assert list(wt.iterdir()) == []  # nothing cloned, nothing written
