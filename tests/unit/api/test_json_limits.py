"""The depth check that runs before a JSON body is parsed."""

from __future__ import annotations

import json

import pytest
from agentihooks_operator.api.common import JSON_MAX_DEPTH, too_deep


@pytest.mark.parametrize(
    ("body", "deep"),
    [
        (b"[" * 33 + b"]" * 33, True),
        (b"[" * 32 + b"]" * 32, False),
        (b'{"a":' * 33 + b"1" + b"}" * 33, True),
        (b'{"a":' * 32 + b"1" + b"}" * 32, False),
        (b"[" * 60_000, True),  # never closed: still refused before the parser recurses
        (b"[]" * 30_000, False),  # many brackets, one level
        (b'["' + b"[" * 100 + b'"]', False),  # brackets inside a string are text
        (b'["\\"' + b"[" * 100 + b'"]', False),  # an escaped quote does not end the string
        (b'["\\\\"' + b"[" * 40 + b"]" * 40 + b"]", True),  # an escaped backslash does
        (b"", False),
    ],
)
def test_depth_is_counted_outside_strings(body: bytes, deep: bool) -> None:
    assert too_deep(body, JSON_MAX_DEPTH) is deep


def test_everything_the_check_lets_through_parses_without_recursing_too_far() -> None:
    body = b"[" * JSON_MAX_DEPTH + b"]" * JSON_MAX_DEPTH
    assert not too_deep(body)
    assert json.loads(body) is not None
