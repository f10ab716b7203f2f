"""What ``Validator.verify`` returns: ok or one reason, plus handles to the verified bytes.

The verdict's text names only the reason. ``detail`` may say more for a log
(an archive refusal names the member to blame), never a record value. The
handles (``record`` and
``staged``) are for the caller that restores: it applies the staged files,
which are the bytes that were hashed, never a second read of the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .archive import ArchiveLimits, extract_archive
from .model import ARCHIVE_ROLES, CheckpointRecord
from .reasons import Reason


@dataclass(frozen=True)
class StagedArtifact:
    """A verified artifact copied into the stage folder (file mode 0600)."""

    role: str
    path: Path = field(repr=False)
    size: int
    digest: str
    #: Staged unpacked (``Validator.verify(unpack_archives=True)``): member name → its verified
    #: file, and ``path`` is the folder holding them; ``None`` when ``path`` is the tar itself.
    members: dict[str, Path] | None = field(default=None, repr=False, compare=False)

    @property
    def is_archive(self) -> bool:
        return self.role in ARCHIVE_ROLES

    def extract_to(self, dest: Path, limits: ArchiveLimits | None = None) -> list[Path]:
        """Unpack an archive role into ``dest`` (never outside it); returns the files written."""
        if not self.is_archive or self.members is not None:
            raise ValueError("only archive roles staged as a tar can be extracted")
        return extract_archive(self.path, dest, limits=limits)


@dataclass(frozen=True)
class StagedCheckpoint:
    """Every verified artifact by role, staged under ``directory``."""

    directory: Path = field(repr=False)
    artifacts: dict[str, StagedArtifact] = field(repr=False)

    def get(self, role: str) -> StagedArtifact | None:
        return self.artifacts.get(role)


@dataclass(frozen=True)
class Verdict:
    """``ok`` with no reason, or not ok with exactly one :class:`Reason`."""

    reason: Reason | None
    record: CheckpointRecord | None = field(default=None, repr=False, compare=False)
    staged: StagedCheckpoint | None = field(default=None, repr=False, compare=False)
    #: What the refusal is about, for the worker's log (an archive refusal names its member); not in ``str``.
    detail: str = field(default="", repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.reason is None

    def __str__(self) -> str:
        return "ok" if self.reason is None else self.reason.value

    @classmethod
    def refused(cls, reason: Reason | str, detail: str = "") -> Verdict:
        return cls(reason=Reason(reason), detail=detail)
