"""Keys written outside the core's scripts are named in one place, under the swarm's hash tag."""

from __future__ import annotations

import pytest
from agentihooks_operator.recovery.errors import InvalidInput
from agentihooks_operator.recovery.store.keys import OUTSIDE_PARTS, SCRIPT_PARTS, SwarmKeys


def test_outside_parts_share_the_swarm_slot_and_never_enter_scripts() -> None:
    keys = SwarmKeys("agentihooks", "example")
    names = [
        keys.image_pull_since,
        keys.retire_leftovers,
        keys.api_uploads("exe-" + "a" * 32),
        keys.attempt_stops,
        keys.wait_mark,
    ]
    assert all(n.startswith("agentihooks:swarm:{example}:") for n in names)
    assert [n.split(":")[3] for n in names] == list(OUTSIDE_PARTS)
    assert not set(OUTSIDE_PARTS) & set(SCRIPT_PARTS)


@pytest.mark.parametrize("bad", ["", "../x", "a b", "a:b:c" * 50])
def test_upload_key_refuses_a_bad_execution_id(bad: str) -> None:
    with pytest.raises(InvalidInput):
        SwarmKeys("agentihooks", "example").api_uploads(bad)
