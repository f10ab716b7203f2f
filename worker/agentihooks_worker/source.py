"""Apply a checkpoint's committed and uncommitted source to the task worktree.

Committed work arrives as a git bundle of ``<branch> ^<base>`` (absent when
nothing was committed), uncommitted work as a binary patch against the head
plus a tar of untracked files. With no repository in the worktree the project
is cloned first: from its configured remote, or from the bundle itself when
the bundle needs no earlier commits. Every failure is a refusal worded
``source: <what went wrong>``; git's own output is not repeated (it can hold
file contents).
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

from agentihooks_checkpoint.archive import ArchiveRefused
from agentihooks_checkpoint.model import CheckpointRecord, Role
from agentihooks_checkpoint.reasons import SOURCE_PREFIX
from agentihooks_checkpoint.verdict import StagedArtifact, StagedCheckpoint

from .childenv import child_env
from .errors import Refused
from .native import extract_files, place_files

RESTORE_REF = "refs/agentihooks/restore"


class SourceRefused(Refused):
    """``source: <what>``."""

    def __init__(self, what: str) -> None:
        super().__init__("source", f"{SOURCE_PREFIX}{what}")


def project_remote(project_id: str, remotes: Mapping[str, str]) -> str | None:
    """Where ``project_id`` is cloned from, if known."""
    if project_id in remotes:
        return remotes[project_id]
    if project_id.startswith("github.com/"):
        return f"https://{project_id}.git"
    return None


def _git(cwd: Path, *args: str, what: str) -> str:
    env = child_env(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise SourceRefused(what)
    return done.stdout.decode("utf-8", "replace").strip()


def _has_commit(worktree: Path, commit: str) -> bool:
    env = child_env(GIT_TERMINAL_PROMPT="0")
    cmd = ["git", "-C", str(worktree), "cat-file", "-e", f"{commit}^{{commit}}"]
    return subprocess.run(cmd, capture_output=True, env=env, check=False).returncode == 0


def _is_repository(worktree: Path) -> bool:
    return (worktree / ".git").exists()


def check_worktree(worktree: Path, remote: str | None, bundle: Path | None) -> str | None:
    """Refuse before writing anything; return where to clone from (``None``: a repository is there)."""
    if _is_repository(worktree):
        return None
    if any(worktree.iterdir()):
        raise SourceRefused("the worktree has files but no git repository")
    origin = remote
    if origin is None and bundle is not None:
        origin = str(bundle)
    if origin is None:
        raise SourceRefused("the worktree has no repository and no remote is configured for the project")
    return origin


def reset_partial(worktree: Path) -> None:
    """Undo what an interrupted earlier restore of this attempt wrote into the worktree."""
    if not _is_repository(worktree):
        return
    env = child_env(GIT_TERMINAL_PROMPT="0")
    cmd = ["git", "-C", str(worktree), "rev-parse", "--verify", "-q", "HEAD"]
    if subprocess.run(cmd, capture_output=True, env=env, check=False).returncode != 0:
        for child in worktree.iterdir():  # a clone that never finished: start it again
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        return
    _git(worktree, "reset", "-q", "--hard", what="resetting the interrupted restore failed")
    _git(worktree, "clean", "-fdq", what="cleaning the interrupted restore failed")


def _take_bundle(worktree: Path, bundle: Path, branch: str, head: str, *, cloned: bool) -> None:
    """Bring the bundle's commits in and check its branch tip is ``head``.

    A repository just cloned from the bundle already holds them (as the
    remote-tracking branch): the bundle is not read a second time. Otherwise
    one fetch brings them in; only when it fails is the bundle verified, to
    say whether it does not apply at all or the fetch itself failed.
    """
    if cloned:
        ref = f"refs/remotes/origin/{branch}"
    else:
        env = child_env(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        cmd = ["git", "-C", str(worktree), "fetch", "-q", str(bundle), f"+refs/heads/{branch}:{RESTORE_REF}"]
        if subprocess.run(cmd, capture_output=True, env=env, check=False).returncode != 0:
            _git(worktree, "bundle", "verify", "-q", str(bundle), what="the git bundle does not apply")
            raise SourceRefused("fetching the committed work from the bundle failed")
        ref = RESTORE_REF
    tip = _git(
        worktree, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", what="the bundle has no branch tip"
    )
    if tip != head:
        raise SourceRefused("the bundle's branch tip is not the checkpoint's head commit")
    if not cloned:
        _git(worktree, "update-ref", "-d", RESTORE_REF, what="cleaning up the restore ref failed")


def _refuse_git_members(untracked: StagedArtifact | None) -> None:
    """The untracked files may not reach into a repository's ``.git/`` (any folder of that name, in any
    case): hooks or config written there would run with the worker's own later git calls. The
    committed source arrives through git itself (the bundle), never as files."""
    if untracked is None:
        return
    try:
        if untracked.members is not None:
            names = list(untracked.members)
        else:
            with tarfile.open(untracked.path, "r:") as tar:
                names = tar.getnames()
    except (tarfile.TarError, OSError) as e:
        raise SourceRefused("the untracked files could not be read") from e
    if any(part.lower() == ".git" for name in names for part in PurePosixPath(name).parts):
        raise SourceRefused("the untracked files reach into a repository's .git folder")


def apply_source(
    record: CheckpointRecord,
    staged: StagedCheckpoint,
    worktree: Path,
    remote: str | None,
    before_write: Callable[[], None] | None = None,
) -> None:
    """Make ``worktree`` hold the captured branch at its head plus the uncommitted changes."""
    _refuse_git_members(staged.get(Role.UNTRACKED.value))  # before anything is written
    bundle = staged.get(Role.GIT_BUNDLE.value)
    origin = check_worktree(worktree, remote, bundle.path if bundle else None)
    if before_write is not None:
        before_write()
    if origin is not None:
        _git(
            worktree.parent,
            "clone",
            "-q",
            "--no-checkout",
            origin,
            worktree.name,
            what="cloning the project failed",
        )
    base, head, branch = record.base_commit, record.head_commit, record.branch_name
    if not _has_commit(worktree, base) and remote is not None:
        _git(worktree, "fetch", "-q", remote, what="fetching the base commit failed")
    if not _has_commit(worktree, base):
        raise SourceRefused("the base commit is not in the worktree's repository")
    if bundle is not None:
        _take_bundle(worktree, bundle.path, branch, head, cloned=origin == str(bundle.path))
    elif not _has_commit(worktree, head):
        raise SourceRefused("the head commit is not in the worktree's repository")
    _git(worktree, "checkout", "-q", "-B", branch, head, what="checking out the captured branch failed")
    if _git(worktree, "rev-parse", "HEAD", what="reading HEAD failed") != head:
        raise SourceRefused("the worktree's HEAD is not the checkpoint's head commit")
    patch = staged.get(Role.SOURCE_PATCH.value)
    if patch is not None and patch.size > 0:
        _git(
            worktree,
            "apply",
            "--binary",
            "--whitespace=nowarn",
            str(patch.path),
            what="the patch does not apply",
        )
    untracked = staged.get(Role.UNTRACKED.value)
    if untracked is not None:
        try:
            if untracked.members is not None:
                place_files(untracked.members, worktree)
            else:
                extract_files(untracked.path, worktree)
        except (ArchiveRefused, tarfile.TarError, OSError) as e:
            raise SourceRefused("the untracked files could not be written") from e
