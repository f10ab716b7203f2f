"""A live control API over a real Redis and a real local checkpoint store, with two swarms.

Swarm ``swarm-a`` has master ``master@example-1``; ``swarm-b`` has
``master@example-2``. Each seat's generation 1 is admitted and running; tests
fail attempts through real recovery passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from testsupport.control_api import MASTER_A, MASTER_B, World, make_world

__all__ = ["MASTER_A", "MASTER_B", "World"]


@pytest.fixture
def world(redis_url: str, tmp_path: Path) -> Iterator[World]:
    with make_world(redis_url, tmp_path) as w:
        yield w
