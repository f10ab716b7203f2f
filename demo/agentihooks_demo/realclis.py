"""The real Claude Code and Codex CLIs from npm, installed once into a cache outside the repository.

* :data:`PINNED`: the versions the worker image ships (``deploy/Dockerfile.worker``)
  and the worker qualifies for native resume, in ``<cache>/node_modules``;
* :data:`UNQUALIFIED`: real releases outside the qualified series, in
  ``<cache>/unqualified/node_modules``: what a replacement would run on an image
  that moved to another harness series (``unqualified_version``).

The cache is ``$AGENTIHOOKS_NPM_CACHE`` or ``~/.cache/agentihooks-npm``; an
install happens only when a package is missing or at another version, under a
file lock, so concurrent runs share one install. ``scripts/install-deps.sh``
runs :func:`main` (through ``python -m testsupport.real_clis``) so CI has them
before the tests start.

``make evidence`` runs them in its real-harness cases (:mod:`agentihooks_demo.realresume`),
recording a case as skipped where :func:`ensure` raises :class:`NpmMissing` or
:class:`InstallFailed`; the tests use them through ``testsupport.real_clis``,
whose ``require`` skips or fails a test instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
CODEX_PACKAGE = "@openai/codex"
PINNED = {CLAUDE_PACKAGE: "2.1.332", CODEX_PACKAGE: "0.162.1"}
#: Published releases outside the qualified series (Claude Code 2.1.x, Codex 0.162.x).
UNQUALIFIED = {CLAUDE_PACKAGE: "2.0.77", CODEX_PACKAGE: "0.163.0"}
#: The executable each package installs.
EXECUTABLES = {CLAUDE_PACKAGE: "claude", CODEX_PACKAGE: "codex"}
#: The package of each harness name of a launch record.
PACKAGE_OF = {"claude": CLAUDE_PACKAGE, "codex": CODEX_PACKAGE}


class NpmMissing(RuntimeError):
    """npm is not installed on this machine."""


class InstallFailed(RuntimeError):
    """npm ran and failed, or installed something other than what was asked."""


def cache_dir() -> Path:
    return Path(os.environ.get("AGENTIHOOKS_NPM_CACHE") or Path.home() / ".cache" / "agentihooks-npm")


def prefix_for(packages: Mapping[str, str]) -> Path:
    """Where a set of packages lives: the cache itself for :data:`PINNED`, a folder of its own otherwise."""
    if dict(packages) == PINNED:
        return cache_dir()
    if dict(packages) == UNQUALIFIED:
        return cache_dir() / "unqualified"
    tag = "_".join(f"{p.replace('/', '+')}@{v}" for p, v in sorted(packages.items()))
    return cache_dir() / "other" / tag


def installed_version(prefix: Path, package: str) -> str | None:
    """The version of ``package`` installed under ``prefix`` (from its package.json), if any."""
    try:
        version = json.loads((prefix / "node_modules" / package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return version if isinstance(version, str) else None


def ensure(packages: Mapping[str, str] = PINNED) -> Path:
    """Install ``packages`` (name → exact version) if needed; return their ``node_modules/.bin``.

    Raises :class:`NpmMissing` or :class:`InstallFailed`.
    """
    prefix = prefix_for(packages)
    bin_dir = prefix / "node_modules" / ".bin"
    if _complete(prefix, packages):
        return bin_dir
    npm = shutil.which("npm")
    if npm is None:
        raise NpmMissing("npm is not installed on this machine, so the real harness CLIs cannot be installed")
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [f"{p}@{v}" for p, v in packages.items() if installed_version(prefix, p) != v]
        if missing:
            env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
            try:
                done = subprocess.run(
                    [npm, "install", "--no-audit", "--save-exact", "--prefix", str(prefix), *missing],
                    capture_output=True,
                    text=True,
                    timeout=1200,
                    check=False,
                    env=env,
                )
            except subprocess.TimeoutExpired as e:
                raise InstallFailed(f"npm install {' '.join(missing)} did not finish in 20 minutes") from e
            if done.returncode != 0:
                tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-4:])
                raise InstallFailed(f"npm install {' '.join(missing)} failed: {tail}")
    if not _complete(prefix, packages):
        found = {p: installed_version(prefix, p) for p in packages}
        raise InstallFailed(f"npm installed {found}, not {dict(packages)}")
    return bin_dir


def installed(packages: Mapping[str, str] = PINNED) -> Path | None:
    """``node_modules/.bin`` of ``packages`` when they are all installed at their versions; never installs."""
    prefix = prefix_for(packages)
    return prefix / "node_modules" / ".bin" if _complete(prefix, packages) else None


def _complete(prefix: Path, packages: Mapping[str, str]) -> bool:
    bin_dir = prefix / "node_modules" / ".bin"
    return all(
        installed_version(prefix, p) == v and os.access(bin_dir / EXECUTABLES.get(p, p), os.X_OK)
        for p, v in packages.items()
    )


def executable(bin_dir: Path, harness: str) -> Path:
    """The ``claude`` or ``codex`` executable in ``bin_dir`` for a launch record's harness name."""
    return bin_dir / EXECUTABLES[PACKAGE_OF[harness]]


def main() -> int:
    """Install the pinned and the unqualified CLIs (``scripts/install-deps.sh`` runs this)."""
    for packages in (PINNED, UNQUALIFIED):
        try:
            bin_dir = ensure(packages)
        except NpmMissing as e:
            print(f"install-deps: {e}", file=sys.stderr)
            return 2
        except InstallFailed as e:
            print(f"install-deps: {e}", file=sys.stderr)
            return 1
        names = ", ".join(f"{p}@{v}" for p, v in packages.items())
        print(f"install-deps: {names} in {bin_dir.parent.parent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
