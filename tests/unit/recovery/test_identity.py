"""A Swarm is namespace/name: its keys, its joined form and the name-only lookup (issue 22)."""

from __future__ import annotations

import pytest
from agentihooks_operator.recovery.errors import InvalidInput, RecoveryRefused
from agentihooks_operator.recovery.identity import AMBIGUOUS, SwarmId, resolve
from agentihooks_operator.recovery.store.keys import OUTSIDE_PARTS, SCRIPT_PARTS, SwarmKeys
from redis.crc import key_slot

TEAM_A = SwarmId("team-a", "eng")
TEAM_B = SwarmId("team-b", "eng")


def _every_key(keys: SwarmKeys) -> list[str]:
    return [
        *keys.all,
        keys.image_pull_since,
        keys.retire_leftovers,
        keys.api_uploads("exe-" + "a" * 32),
        keys.attempt_stops,
        keys.wait_mark,
    ]


def test_same_named_swarms_of_two_namespaces_share_no_key() -> None:
    a, b = SwarmKeys.of("agentihooks", TEAM_A), SwarmKeys.of("agentihooks", TEAM_B)
    assert not set(_every_key(a)) & set(_every_key(b))
    assert a.seats == "agentihooks:swarm:{team-a/eng}:seats"
    assert len(_every_key(a)) == len(SCRIPT_PARTS) + len(OUTSIDE_PARTS)


def test_every_key_of_one_namespaced_swarm_hashes_to_one_slot() -> None:
    slots = {key_slot(k.encode()) for k in _every_key(SwarmKeys.of("agentihooks", TEAM_A))}
    assert len(slots) == 1


def test_name_only_layout_is_unchanged_when_no_namespace_is_given() -> None:
    keys = SwarmKeys("agentihooks", "eng")
    assert keys.seats == "agentihooks:swarm:{eng}:seats"
    assert keys.unbraced("seats") == "agentihooks:swarm:eng:seats"
    assert SwarmKeys.of("agentihooks", TEAM_A).unbraced("seats") == keys.unbraced("seats")


def test_joined_form_round_trips_and_names_the_routes() -> None:
    assert SwarmId.parse("team-a/eng") == TEAM_A
    assert TEAM_A.joined == str(TEAM_A) == "team-a/eng"
    assert TEAM_A.url_path == "/v1/namespaces/team-a/swarms/eng"
    assert SwarmId.parse("ns/a.b@c") == SwarmId("ns", "a.b@c")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("eng", "no namespace"),
        ("/eng", "namespace: ''"),
        ("Team/eng", "namespace: 'Team'"),
        ("a.b/eng", "namespace: 'a.b'"),
        ("x" * 64 + "/eng", "namespace"),
        ("team-a/", "swarm name: ''"),
        ("team-a/a/b", "swarm name: 'a/b'"),
        ("team-a/a b", "swarm name: 'a b'"),
    ],
)
def test_bad_identities_are_refused_naming_the_bad_part(text: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        SwarmId.parse(text)
    assert fragment in str(caught.value)


def test_keys_refuse_an_unusable_namespace() -> None:
    with pytest.raises(InvalidInput, match="namespace: 'A_B'"):
        SwarmKeys("agentihooks", "eng", "A_B")


def test_name_only_lookup_answers_when_one_namespace_holds_the_name() -> None:
    known = [TEAM_A, SwarmId("team-b", "ops")]
    assert resolve("eng", known) == TEAM_A
    assert resolve("ops", known) == SwarmId("team-b", "ops")


def test_name_only_lookup_is_refused_naming_both_namespaces_when_ambiguous() -> None:
    known = [TEAM_B, TEAM_A]
    with pytest.raises(RecoveryRefused) as caught:
        resolve("eng", known)
    assert caught.value.reason == AMBIGUOUS
    assert "team-a, team-b" in caught.value.message
    assert known == [TEAM_B, TEAM_A]  # only read


def test_lookup_with_a_namespace_takes_only_that_swarm() -> None:
    known = [TEAM_A, TEAM_B]
    assert resolve("eng", known, namespace="team-b") == TEAM_B
    with pytest.raises(InvalidInput, match="no swarm team-c/eng"):
        resolve("eng", known, namespace="team-c")


def test_lookup_of_an_unknown_or_bad_name_is_refused() -> None:
    with pytest.raises(InvalidInput, match="in any namespace"):
        resolve("nope", [TEAM_A])
    with pytest.raises(InvalidInput, match="swarm name: 'a b'"):
        resolve("a b", [TEAM_A])
