"""Warming an image's files before its Pods run (testsupport/nodecache.py).

The layers are found through ``ctr`` (faked here with the replies containerd 1.6 gives: Go's field
names in the mounts JSON, a plain manifest or an index); the files are really read from a folder.
That the chain IDs match what containerd unpacks under is shown on the real node, where every image
import warms through them (an unknown key makes the view fail and the node refuse to come up).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from testsupport.nodecache import WarmFailed, chain_ids, layer_dirs, read_tree

A, B, C = (f"sha256:{c * 64}" for c in "abc")
REF = "agentihooks.local/agentihooks-worker:1"


def test_chain_ids_follow_the_oci_rule() -> None:
    ab = "sha256:" + hashlib.sha256(f"{A} {B}".encode()).hexdigest()
    abc = "sha256:" + hashlib.sha256(f"{ab} {C}".encode()).hexdigest()
    assert chain_ids([A]) == [A]
    assert chain_ids([A, B, C]) == [A, ab, abc]
    assert chain_ids([]) == []


class FakeCtr:
    """``ctr -n k8s.io ...`` as containerd answers it, for one image; records what was asked."""

    def __init__(self, manifest: dict[str, Any], mounts: list[dict[str, Any]], listed: bool = True) -> None:
        self.content = {"sha256:m": manifest, "sha256:cfg": {"rootfs": {"diff_ids": [A, B]}}}
        self.mounts = mounts
        self.listed = listed
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        out, code = "", 0
        if args[:2] == ("images", "ls"):
            out = "REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
            out += (
                f"{REF} application/vnd.oci.image.manifest.v1+json sha256:m 1GiB linux/amd64 -\n"
                * self.listed
            )
        elif args[:2] == ("content", "get"):
            found = self.content.get(args[2])
            out, code = (json.dumps(found), 0) if found else ("", 1)
        elif args[:2] == ("snapshots", "view"):
            out = json.dumps(self.mounts)
        return subprocess.CompletedProcess(list(args), code, out, "" if code == 0 else "not found")


MANIFEST = {"config": {"digest": "sha256:cfg"}}


def test_the_layers_come_from_the_views_lowerdirs_lowest_first_and_the_view_is_removed() -> None:
    mounts = [{"Type": "overlay", "Source": "overlay", "Options": ["index=off", "lowerdir=/s/2/fs:/s/1/fs"]}]
    ctr = FakeCtr(MANIFEST, mounts)
    assert layer_dirs(ctr, REF) == [Path("/s/1/fs"), Path("/s/2/fs")]
    view = next(c for c in ctr.calls if c[:2] == ("snapshots", "view"))
    assert view[-1] == chain_ids([A, B])[-1]  # the image's top layer
    assert ctr.calls[-1] == ("snapshots", "rm", view[-2])


def test_a_one_layer_image_is_its_bind_mount_and_an_index_picks_amd64() -> None:
    index = {
        "manifests": [
            {"digest": "sha256:arm", "platform": {"architecture": "arm64"}},
            {"digest": "sha256:m", "platform": {"architecture": "amd64"}},
        ]
    }
    ctr = FakeCtr(index, [{"Type": "bind", "Source": "/s/9/fs", "Options": ["ro", "rbind"]}])
    ctr.content["sha256:index"] = index
    ctr.content["sha256:m"] = MANIFEST
    assert layer_dirs(ctr, REF) == [Path("/s/9/fs")]


@pytest.mark.parametrize(
    ("listed", "mounts", "named"),
    [
        (False, [], "does not list the image"),
        (True, [{"Type": "tmpfs", "Source": "none", "Options": []}], "named no folder"),
    ],
)
def test_an_image_that_cannot_be_found_is_named(
    listed: bool, mounts: list[dict[str, Any]], named: str
) -> None:
    with pytest.raises(WarmFailed, match=named) as e:
        layer_dirs(FakeCtr(MANIFEST, mounts, listed=listed), REF)
    assert REF in str(e.value)


def test_every_regular_file_is_read_once_and_nothing_else_is_opened(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "claude").write_bytes(b"x" * 3_000_000)  # more than one read
    os.link(tmp_path / "bin" / "claude", tmp_path / "bin" / "claude-linked")  # the same pages
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hostname").write_text("node\n")
    os.symlink("/dev/zero", tmp_path / "etc" / "endless")  # never followed
    os.mkfifo(tmp_path / "etc" / "pipe")  # opened without blocking, never read
    assert read_tree(tmp_path) == 3_000_000 + 5
