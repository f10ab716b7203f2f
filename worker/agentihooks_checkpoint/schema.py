"""The packaged JSON Schema of the checkpoint record.

``docs/swarm-v2/schemas/checkpoint.json`` is the documented schema; the
package ships a byte-identical copy so installed code can validate records
without the repository. A test fails when the two drift apart, and another
holds the schema and :mod:`agentihooks_checkpoint.model` together.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


def schema_bytes() -> bytes:
    """The packaged schema file, exactly as shipped."""
    return resources.files(__package__).joinpath("schemas/checkpoint.json").read_bytes()


@cache
def checkpoint_schema() -> dict[str, Any]:
    """The parsed schema (draft 2020-12)."""
    loaded: dict[str, Any] = json.loads(schema_bytes())
    return loaded
