"""Provider credential files: copied from the Pod's read-only Secret mount into the harness home.

The operator mounts the files of a seat's provider credential (Codex ``auth.json`` and
``config.toml``) at ``$AGENTIHOOKS_PROVIDER_FILES`` (``/var/run/swarm/provider``). The harness
reads them from its own home (``$CODEX_HOME``), which lives in the attempt folder, so the worker
copies them there (mode 0600) before the harness starts. Their content is never read here, logged,
or captured: checkpoints take the worktree and the harness's session files only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .attempt import AttemptLayout

#: The files each harness takes from the mount, by harness.
FILES = {"claude": (), "codex": ("auth.json", "config.toml")}


def install(source: Path | None, layout: AttemptLayout) -> list[str]:
    """Copy the harness's files from ``source`` into its home; the names copied."""
    if source is None or not source.is_dir():
        return []
    copied = []
    for name in FILES.get(layout.harness, ()):
        src = source / name
        if not src.is_file():
            continue
        target = layout.harness_home / name
        tmp = target.with_name(f".{name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out, src.open("rb") as data:
            shutil.copyfileobj(data, out)
        os.replace(tmp, target)
        copied.append(name)
    return copied
