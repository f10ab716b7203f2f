"""Where things live inside a scope of a store (keys relative to ``StoreScope.prefix``).

::

    objects/sha256/<hex>              content-addressed artifact bytes
    checkpoints/<id>/manifest-<hex>.json  the record bytes (<hex> = their sha256)
    checkpoints/<id>/committed.json       {"manifest": <key>, "sha256": <hex>}

``committed.json`` is written last and only once: a checkpoint without it is
not a checkpoint (``manifest_absent``), so an interrupted capture never lists.
"""

from __future__ import annotations

import re

from .scope import safe_segment

CHECKPOINTS = "checkpoints/"
POINTER_NAME = "committed.json"
_HEX = re.compile(r"^[0-9a-f]{64}$")


def object_key(digest: str) -> str:
    """Key of the object with ``digest`` (``sha256:<hex>`` or bare hex)."""
    hexpart = digest.removeprefix("sha256:")
    if not _HEX.fullmatch(hexpart):
        raise ValueError("not a sha256 digest")
    return f"objects/sha256/{hexpart}"


def manifest_key(checkpoint_id: str, hexdigest: str) -> str:
    """Key of a manifest; named by its own hash, so a second writer never replaces a committed one."""
    if not _HEX.fullmatch(hexdigest):
        raise ValueError("not a sha256 digest")
    return f"{CHECKPOINTS}{safe_segment(checkpoint_id)}/manifest-{hexdigest}.json"


def pointer_key(checkpoint_id: str) -> str:
    return f"{CHECKPOINTS}{safe_segment(checkpoint_id)}/{POINTER_NAME}"


def checkpoint_id_of_pointer(key: str) -> str | None:
    """The checkpoint id if ``key`` is a commit pointer key, else ``None``."""
    if not (key.startswith(CHECKPOINTS) and key.endswith("/" + POINTER_NAME)):
        return None
    middle = key[len(CHECKPOINTS) : -len(POINTER_NAME) - 1]
    try:
        return safe_segment(middle)
    except ValueError:
        return None
