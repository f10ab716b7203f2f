"""Which store keys exist and which a worker may read: pure rules, every trick refused."""

from __future__ import annotations

import pytest
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_operator.api.errors import HttpProblem
from agentihooks_operator.api.handlers.store_rules import Named, check_scope_params, parse_key, readable

HEX = "a" * 64
OTHER = "b" * 64


def test_the_three_key_shapes() -> None:
    assert parse_key(f"objects/sha256/{HEX}").kind == "object"
    m = parse_key(f"checkpoints/ckpt-7/manifest-{HEX}.json")
    assert (m.kind, m.name, m.digest) == ("manifest", "ckpt-7", HEX)
    p = parse_key("checkpoints/ckpt-7/committed.json")
    assert (p.kind, p.name) == ("pointer", "ckpt-7")


@pytest.mark.parametrize(
    "key",
    [
        "",
        "/objects/sha256/" + HEX,
        "objects/sha256/" + HEX.upper(),
        "objects/sha256/" + HEX[:-1],
        "objects/sha256/../" + HEX,
        "objects\\sha256\\" + HEX,
        "checkpoints/../committed.json",
        "checkpoints/./committed.json",
        "checkpoints/a/b/committed.json",
        "checkpoints/ckpt-7/manifest.json",
        "checkpoints/.hidden/committed.json",
        "checkpoints/ckpt%2f../committed.json",
        "checkpoints/ckpt-7/committed.json\x00",
        "other/thing",
    ],
)
def test_everything_else_is_invalid(key: str) -> None:
    with pytest.raises(HttpProblem) as e:
        parse_key(key)
    assert e.value.status == 400 and e.value.code == "invalid_key"


def test_only_the_named_checkpoint_is_readable() -> None:
    named = Named("ckpt-7", f"checkpoints/ckpt-7/manifest-{HEX}.json", frozenset({"sha256:" + HEX}))
    assert readable(parse_key("checkpoints/ckpt-7/committed.json"), named)
    assert readable(parse_key(f"checkpoints/ckpt-7/manifest-{HEX}.json"), named)
    assert readable(parse_key(f"objects/sha256/{HEX}"), named)
    assert not readable(parse_key(f"objects/sha256/{OTHER}"), named)
    assert not readable(parse_key(f"checkpoints/ckpt-7/manifest-{OTHER}.json"), named)
    assert not readable(parse_key("checkpoints/ckpt-8/committed.json"), named)
    assert not readable(parse_key("checkpoints/ckpt-7/committed.json"), Named(None))


def test_the_named_scope_must_be_the_workers_own() -> None:
    scope = StoreScope(swarm="s", task_id="t", task_generation=2)
    check_scope_params(scope, "s", "t", "2")
    for args in (("s", "t", "1"), ("s", "u", "2"), ("x", "t", "2"), (None, None, None), ("s", "t", "02")):
        with pytest.raises(HttpProblem) as e:
            check_scope_params(scope, *args)
        assert e.value.status == 403
