"""A continuous capture sends what the transcript gained since the last one, not the whole session again.

While the harness runs, its session file (the transcript, and the one big file
of the native session) only grows. So an attempt keeps, between captures, what
it stored of it (:class:`Chain`): the stored objects whose bytes, in order, are
its first ``length`` bytes, and their sha256. The next event capture hashes the
file once, locally, up to its current length. When the first ``length`` bytes
still hash the same, the bytes after them are stored as one new object, and the
record lists the transcript as the chain's objects plus that one (the record's
``segments``, minor 2.3). The native session tar is listed the same way: a small
object with the session's other files and the transcript's tar header, the
transcript's own segments, and a small trailer (padding, the end-of-archive
blocks). What a restore assembles is, byte for byte, a tar of those files; the
validator checks each segment's digest and the whole artifact's.

A chain holds at most :data:`MAX_CHAIN` objects: at the cap, the segments
after its first object are merged into one, sent again (what the transcript
gained since that object, never the whole session). A capture is whole instead
(one object per artifact, readable by any swarm v2 reader, as before) when
there is no chain yet, when the file was rewritten rather than appended to, and
for the periodic and first captures; a whole capture's transcript object starts
the next chain. The cost of an event capture is then what changed (sent and
read back) plus one local read of the session file at disk-cache speed.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentihooks_checkpoint.archive import safe_member_name
from agentihooks_checkpoint.errors import CaptureError
from agentihooks_checkpoint.hashing import CHUNK
from agentihooks_checkpoint.model import ArtifactEntry, Role, Segment

#: Most objects in a chain (what a restore reads per artifact): at the cap, the segments after the
#: chain's first object are merged into one (sent again: what the transcript gained since that object).
MAX_CHAIN = 32

#: Stores a staged file; returns the stored object's (digest, size).
Send = Callable[[Path], tuple[str, int]]


@dataclass
class Chain:
    """What this attempt's captures stored of its transcript so far (empty: nothing yet)."""

    source: Path | None = None
    length: int = 0
    #: ``sha256:`` of the first ``length`` bytes.
    prefix: str = ""
    parts: list[tuple[str, int]] = field(default_factory=list)

    def usable_for(self, transcript: Path) -> bool:
        return bool(self.parts) and self.source == transcript

    def restart(self, transcript: Path, digest: str, size: int) -> None:
        """After a whole capture: its transcript object is the chain's first."""
        self.source, self.length, self.prefix, self.parts = transcript, size, digest, [(digest, size)]


@dataclass(frozen=True)
class Segmented:
    """A capture's transcript and native session as segments, and the chain it leaves."""

    entries: list[ArtifactEntry]
    segments: dict[str, list[Segment]]
    chain: Chain


def segmented(
    req_transcript: Path,
    native: list[tuple[Path, str]],
    chain: Chain,
    work: Path,
    send: Send,
) -> Segmented | None:
    """The transcript (and the native session, when ``native`` lists the transcript's file) as segments
    after ``chain``; ``None`` when this capture must be whole (the file was not appended to)."""
    if not chain.usable_for(req_transcript):
        return None
    st = req_transcript.stat()
    length = st.st_size
    if length < chain.length:
        return None
    head = b""
    named = [rel for src, rel in native if src.resolve() == req_transcript.resolve()]
    if native and len(named) != 1:
        return None  # the native session does not hold the transcript once: keep it whole
    if native:
        others = [(src, rel) for src, rel in native if src.resolve() != req_transcript.resolve()]
        head = tar_head(others, named[0], int(st.st_mtime), length)
    whole, prefix_ok, native_digest = _hash_pass(req_transcript, length, chain.length, chain.prefix, head)
    if not prefix_ok:
        return None
    parts = list(chain.parts)
    if length > chain.length and len(parts) >= MAX_CHAIN:
        first = parts[0][1]  # the chain's first object stays; what came after it becomes one object
        _copy_range(req_transcript, first, length, work / "transcript.merged")
        parts = [parts[0], send(work / "transcript.merged")]
    elif length > chain.length:
        _copy_range(req_transcript, chain.length, length, work / "transcript.tail")
        parts.append(send(work / "transcript.tail"))
    entries = [ArtifactEntry(role=Role.TRANSCRIPT, path="transcript.jsonl", size=length, digest=whole)]
    segments = {Role.TRANSCRIPT.value: [Segment(digest=d, size=n) for d, n in parts]}
    if native:
        trail = tar_trail(len(head), length)
        native_digest.update(trail)
        (work / "native.head").write_bytes(head)
        (work / "native.trail").write_bytes(trail)
        pieces = [send(work / "native.head"), *parts, send(work / "native.trail")]
        size = len(head) + length + len(trail)
        digest = "sha256:" + native_digest.hexdigest()
        entries.append(
            ArtifactEntry(role=Role.NATIVE_SESSION, path="native_session.tar", size=size, digest=digest)
        )
        segments[Role.NATIVE_SESSION.value] = [Segment(digest=d, size=n) for d, n in pieces]
    after = Chain(source=req_transcript, length=length, prefix=whole, parts=parts)
    return Segmented(entries, segments, after)


def _hash_pass(
    path: Path, length: int, cut: int, prefix: str, head: bytes
) -> tuple[str, bool, hashlib._Hash]:
    """One read of ``path``'s first ``length`` bytes: their digest, whether the first ``cut`` of them
    still hash to ``prefix``, and a hasher of ``head`` followed by them (the native tar's)."""
    whole = hashlib.sha256()
    native = hashlib.sha256(head)
    done, prefix_ok = 0, False
    with path.open("rb") as f:
        while done < length:
            data = f.read(min(CHUNK, length - done))
            if not data:
                raise CaptureError("the transcript shrank while it was read")
            if done < cut <= done + len(data):
                whole.update(data[: cut - done])
                prefix_ok = "sha256:" + whole.hexdigest() == prefix
                whole.update(data[cut - done :])
            else:
                whole.update(data)
            native.update(data)
            done += len(data)
    return "sha256:" + whole.hexdigest(), prefix_ok, native


def _copy_range(src: Path, start: int, end: int, out: Path) -> None:
    out.touch(mode=0o600)
    with src.open("rb") as f, out.open("wb") as w:
        f.seek(start)
        left = end - start
        while left:
            data = f.read(min(CHUNK, left))
            if not data:
                raise CaptureError("the transcript shrank while it was read")
            w.write(data)
            left -= len(data)


def tar_head(others: list[tuple[Path, str]], name: str, mtime: int, length: int) -> bytes:
    """The start of a tar of ``others`` then ``name`` (``length`` bytes): every other member whole, and
    the header of the last; as :func:`~agentihooks_checkpoint.archive.build_archive` writes them."""
    buf = io.BytesIO()
    tar = tarfile.TarFile(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
    for src, rel in others:
        safe_member_name(rel)
        info = tarfile.TarInfo(rel)
        st = src.stat(follow_symlinks=False)
        info.size, info.mtime, info.mode = st.st_size, int(st.st_mtime), 0o600
        with src.open("rb") as f:
            tar.addfile(info, f)
    safe_member_name(name)
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = length, mtime, 0o600
    return buf.getvalue()[: tar.offset] + info.tobuf(tarfile.PAX_FORMAT, tar.encoding, tar.errors)


def tar_trail(head: int, length: int) -> bytes:
    """What follows the last member's ``length`` bytes: its padding, the two end-of-archive blocks and
    the padding to a whole record (as :class:`tarfile.TarFile` closes an archive)."""
    pad = -length % tarfile.BLOCKSIZE
    end = head + length + pad + 2 * tarfile.BLOCKSIZE
    return bytes(pad + 2 * tarfile.BLOCKSIZE + (-end % tarfile.RECORDSIZE))
