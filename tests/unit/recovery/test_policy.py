"""The pure decision rules: automatic choice, checkpoint choice, directives, labels, keys."""

from __future__ import annotations

import pytest
from agentihooks_checkpoint.errors import MalformedDirective
from agentihooks_operator.recovery import policy
from agentihooks_operator.recovery.errors import InvalidInput
from agentihooks_operator.recovery.store.keys import SCRIPT_PARTS, SwarmKeys
from agentihooks_operator.recovery.store.records import FenceRecord
from testsupport.recovery import summary

EID = "exe-" + "a" * 32


def fence(**kw: object) -> FenceRecord:
    data: dict[str, object] = {
        "execution_id": EID,
        "generation": 1,
        "seat": "eng-1",
        "reason": "oom_killed",
        "controller_epoch": 1,
        "fenced_at_ms": 1,
        "native_session": "sess-1",
        "archive_watermark": 400,
        "tail": "t",
    }
    data.update(kw)
    return FenceRecord.model_validate(data)


NATIVE = summary(EID)
CONTEXT = summary(EID, native=False, checkpoint_id="ckpt-c")


@pytest.mark.parametrize(
    ("kw", "checkpoint", "automation", "paused", "expected"),
    [
        ({}, NATIVE, True, False, "resume"),
        ({}, NATIVE, False, False, None),
        ({}, NATIVE, True, True, None),
        ({"reason": "image_pull"}, NATIVE, True, False, None),
        ({"native_session": None}, NATIVE, True, False, None),
        ({}, CONTEXT, True, False, None),
        ({}, None, True, False, None),
        ({"superseded_legacy": True, "native_session": None}, None, True, False, "fresh"),
        ({"superseded_legacy": True}, None, True, True, None),
        ({"superseded_legacy": True}, None, False, False, None),
    ],
)
def test_automatic_choice(kw, checkpoint, automation, paused, expected) -> None:  # type: ignore[no-untyped-def]
    f = fence(**kw)
    assert policy.automatic_choice(f, automation=automation, paused=paused, checkpoint=checkpoint) == expected


def test_catalog_is_consulted_only_when_it_can_matter() -> None:
    assert policy.needs_catalog(fence(), automation=True, paused=False)
    assert not policy.needs_catalog(fence(), automation=True, paused=True)
    assert not policy.needs_catalog(fence(reason="image_pull"), automation=True, paused=False)
    assert not policy.needs_catalog(fence(native_session=None), automation=True, paused=False)


def test_usable_checkpoint_is_newest_complete_compatible_with_a_watermark() -> None:
    listed = [
        summary(EID, checkpoint_id="ckpt-1", sequence=1),
        summary(EID, checkpoint_id="ckpt-2", sequence=2, complete=False),
        summary(EID, checkpoint_id="ckpt-3", sequence=3, key="v0"),
        summary(EID, checkpoint_id="ckpt-4", sequence=4, watermark=None),
    ]
    chosen = policy.usable_checkpoint(listed, "v1")
    assert chosen is not None and chosen.checkpoint_id == "ckpt-1"
    assert policy.usable_checkpoint(listed[1:], "v1") is None


def test_resume_directive_native_and_reconstructed() -> None:
    d = policy.resume_directive(NATIVE, fence())
    assert (d.recovery.value, d.session_id, d.checkpoint_id, d.watermark) == (
        "native",
        "sess-1",
        "ckpt-7",
        412,
    )
    r = policy.resume_directive(NATIVE, fence(native_session=None))
    assert (r.recovery.value, r.session_id) == ("reconstructed", None)
    c = policy.resume_directive(CONTEXT, fence())
    assert c.recovery.value == "reconstructed" and c.checkpoint_id == "ckpt-c"
    assert policy.FRESH.checkpoint_id is None and policy.FRESH.recovery.value == "fresh"


def test_directive_whose_fields_disagree_is_malformed() -> None:
    with pytest.raises(MalformedDirective, match="malformed restore directive"):
        policy.resume_directive(summary(EID, watermark=None), fence())


def test_labels_and_card_reason() -> None:
    assert policy.resume_label(NATIVE, fence()) == "Resume native"
    assert policy.resume_label(NATIVE, fence(native_session=None)) == "Continue from context"
    assert policy.resume_label(CONTEXT, fence()) == "Continue from context"
    assert policy.resume_label(None, fence()) is None
    assert policy.card_reason(fence(), NATIVE) == "oom_killed; native resume from ckpt-7 at record 412"
    assert policy.card_reason(fence(), None) == "oom_killed"
    assert policy.card_reason(fence(), CONTEXT).startswith("oom_killed; continue from context from ckpt-c")


def test_decider_labels_are_fixed_words() -> None:
    assert policy.decider_kind("automation") == "automation"
    assert policy.decider_kind("operator") == "operator"
    assert policy.decider_kind("master@example-1") == "master"


def test_keys_wrap_the_swarm_in_a_hash_tag() -> None:
    k = SwarmKeys("agentihooks", "example")
    assert k.control_owner == "agentihooks:swarm:{example}:control-owner"
    assert k.recovery_paused == "agentihooks:swarm:{example}:recovery-paused"
    assert len(k.all) == len(SCRIPT_PARTS) and all("{example}" in x for x in k.all)


@pytest.mark.parametrize(("prefix", "swarm"), [("agentihooks", "bad name"), ("", "x"), ("a b", "x")])
def test_bad_prefix_or_swarm_is_named(prefix: str, swarm: str) -> None:
    with pytest.raises(InvalidInput, match="not a usable"):
        SwarmKeys(prefix, swarm)


def test_unknown_key_part_is_refused() -> None:
    with pytest.raises(InvalidInput, match="unknown key part"):
        SwarmKeys("agentihooks", "x").part("nope")


def test_fence_record_reads_lua_empty_list() -> None:
    assert fence(released={}).released == []
