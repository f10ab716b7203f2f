"""The git side of a capture: committed work as a bundle, uncommitted work as a patch plus files.

* committed source: ``git bundle create`` of ``<branch> ^<base>`` (skipped when base equals head);
* uncommitted source: ``git diff --binary HEAD`` (staged and unstaged changes to tracked files);
* untracked files: ``git ls-files --others --exclude-standard`` (so ``.gitignore`` is respected).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentihooks_checkpoint.errors import CaptureError

from ..childenv import child_env


def git(worktree: Path, *args: str, out: Path | None = None) -> bytes:
    """Run git in ``worktree``; raise :class:`CaptureError` (without its output) on failure."""
    env = child_env(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    cmd = ["git", "-C", str(worktree), "-c", "core.quotepath=off", *args]
    if out is not None:
        with out.open("wb") as f:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, env=env, check=False)
        stdout = b""
    else:
        proc = subprocess.run(cmd, capture_output=True, env=env, check=False)
        stdout = proc.stdout
    if proc.returncode != 0:
        raise CaptureError(f"git {args[0]} failed in the worktree")
    return stdout


def head_commit(worktree: Path) -> str:
    return git(worktree, "rev-parse", "--verify", "HEAD^{commit}").decode().strip()


def current_branch(worktree: Path) -> str:
    try:
        return git(worktree, "symbolic-ref", "--short", "HEAD").decode().strip()
    except CaptureError as e:
        raise CaptureError("the worktree has a detached HEAD; name the branch explicitly") from e


def check_range(worktree: Path, base: str, head: str, branch: str) -> None:
    """``base`` must be an ancestor of ``head``, and ``branch`` must point at ``head``."""
    tip = git(worktree, "rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}").decode().strip()
    if tip != head:
        raise CaptureError("the branch does not point at the worktree's HEAD")
    try:
        git(worktree, "merge-base", "--is-ancestor", base, head)
    except CaptureError as e:
        raise CaptureError("base_commit is not an ancestor of HEAD") from e


def write_bundle(worktree: Path, base: str, branch: str, out: Path) -> None:
    git(worktree, "bundle", "create", "-q", str(out), f"refs/heads/{branch}", f"^{base}")


def write_patch(worktree: Path, out: Path) -> int:
    """Write the uncommitted changes to tracked files; return the patch size."""
    git(worktree, "diff", "--binary", "--no-color", "--no-ext-diff", "HEAD", out=out)
    return out.stat().st_size


def untracked_files(worktree: Path) -> list[str]:
    raw = git(worktree, "ls-files", "--others", "--exclude-standard", "-z")
    return sorted(p for p in raw.decode("utf-8", "surrogateescape").split("\0") if p)
