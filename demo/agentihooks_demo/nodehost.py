"""The real node behind ``--real-node`` and the evidence's real-node case: bringing it up, what it runs.

The node itself is the tests' harness (``tests/testsupport/realnode.py``: containerd, runc, a real
kubelet, kube-scheduler and kube-proxy beside the loopback control plane; root only, one per
machine), so this runs from a checkout of the repository only. :class:`RealNodeHook` is what
``start_stack(node=...)`` calls between the control plane and the operator: the node comes up, the
project's worker image (``scripts/images.sh``, built here and cached by its inputs) is imported into
its containerd, and the operator's control API then listens on the node's address, where Pods reach it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .stack import StackError, demo_repository

REPO = Path(__file__).resolve().parents[2]


def node_support() -> Any:
    """The tests' real-node harness (``tests/testsupport``): this runs from a checkout only."""
    tests = REPO / "tests"
    if not (tests / "testsupport" / "realnode.py").exists():
        raise StackError("--real-node needs a checkout of the repository (tests/testsupport/realnode.py)")
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))
    from testsupport import realnode  # type: ignore[import-not-found]

    return realnode


def node_reason() -> str | None:
    """Why this machine (or this copy of the project) cannot host the real node, or ``None``."""
    try:
        return str(node_support().why_not() or "") or None
    except StackError as e:
        return str(e)


class RealNodeHook:
    """Brings the real node up beside the stack's control plane (``start_stack(node=...)``) and
    imports the project's worker image into its containerd; ``down`` tears all of it down."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.realnode = node_support()
        self.address: str = self.realnode.NODE_IP
        self.say = say
        self.node: Any = None
        self.worker_ref = ""
        self.worker_archive: Path | None = None
        self.images: dict[str, str] = {}
        self.versions: dict[str, str] = {}

    def up(self, kube: Any) -> None:
        from testsupport.images import project_images  # type: ignore[import-not-found]

        self.node = self.realnode.RealNode(kube.plane)
        try:
            self.node.up()
            self.say("[start] building or finding the project's images (scripts/images.sh; cached by inputs)")
            ref, tarball = project_images()["worker"]
            self.node.import_image(tarball)
        except (self.realnode.NodeUnavailable, RuntimeError) as e:
            self.down()
            raise StackError(f"the real node did not come up: {e}") from e
        self.worker_ref = ref
        self.worker_archive = Path(tarball)
        self.images = {"worker": ref, "worker_archive": Path(tarball).name, "pause": self.realnode.PAUSE_REF}
        self.versions = node_versions(self.node)
        self.say(
            f"[start] real node {self.node.name} at {self.address}: {self.versions['kubelet']}, "
            f"{self.versions['containerd']}, {self.versions['runc']}; worker image {ref} imported"
        )

    def other_claude(self) -> tuple[Path, str] | None:
        """The worker image under the same tag with the unqualified Claude Code the tests install
        (``scripts/install-deps.sh``), and that version; ``None`` where that CLI is not installed."""
        from testsupport.images import worker_with_claude  # type: ignore[import-not-found]
        from testsupport.realnode import IMAGES  # type: ignore[import-not-found]

        from . import realclis

        package = realclis.prefix_for(realclis.UNQUALIFIED) / "node_modules" / realclis.CLAUDE_PACKAGE
        if self.worker_archive is None or not (package / "package.json").exists():
            return None
        archive = worker_with_claude(self.worker_archive, self.worker_ref, package, IMAGES)
        return archive, realclis.UNQUALIFIED[realclis.CLAUDE_PACKAGE]

    def record(self) -> dict[str, Any]:
        """The record's ``backend.node``: what the node ran and the images it used."""
        return {"versions": self.versions, "images": self.images, "root": str(self.node.root)}

    def down(self, keep_logs: Path | None = None) -> None:
        """Tear the node down (and what it made); its containers' logs are copied to ``keep_logs``
        first, since the teardown removes the node's folders."""
        if self.node is None:
            return
        if keep_logs is not None:
            import shutil

            with contextlib.suppress(OSError):
                shutil.copytree(self.node.root / "pod-logs", keep_logs, dirs_exist_ok=True)
        self.node.down()
        self.node = None


def node_versions(node: Any) -> dict[str, str]:
    """What the node's parts report about themselves."""

    def first(argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
        except OSError:
            return "unavailable"
        return ((done.stdout or done.stderr).strip().splitlines() or [""])[0]

    binaries = node_support().node_binaries()
    return {
        "kubelet": first([str(binaries / "kubelet"), "--version"]),
        "kube-scheduler": first([str(binaries / "kube-scheduler"), "--version"]),
        "kube-proxy": first([str(binaries / "kube-proxy"), "--version"]),
        "containerd": first(["containerd", "--version"]),
        "runc": first(["runc", "--version"]),
        "node": f"{node.name} at {node_support().NODE_IP}",
    }


@contextmanager
def git_daemon(top: Path, host: str) -> Iterator[str]:
    """The demo project as a bare repository served by ``git daemon`` on ``host`` (Pods clone it)."""
    repo = demo_repository(top / "work")
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(top / "app.git")], check=True)
    from .procs import free_port, wait_listening

    port = free_port()
    argv = ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={top}"]
    daemon = subprocess.Popen(
        [*argv, f"--listen={host}", f"--port={port}", str(top)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(host, port, daemon, "git daemon")  # before a worker clones: a refused clone ends it
    except RuntimeError:
        daemon.kill()
        raise
    try:
        yield f"git://{host}:{port}/app.git"
    finally:
        daemon.terminate()
        daemon.wait(10)
