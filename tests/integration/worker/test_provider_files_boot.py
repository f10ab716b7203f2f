"""A real boot of a Codex replacement with a provider credential file mounted: the file reaches
``$CODEX_HOME`` (0600) before the harness runs, and the checkpoint the boot captures holds none of it."""

from __future__ import annotations

import stat
from pathlib import Path

from .conftest import NEW_EXECUTION, SCOPE, ScenarioFactory

AUTH = b'{"OPENAI_API_KEY": "sk-proj-PROVIDER-FILE-TEST-81f3"}'
CONFIG = b'model_provider = "loopback"\n[model_providers.loopback]\nbase_url = "http://127.0.0.1:9/v1"\n'


def _store_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_codex_auth_file_reaches_the_harness_home_and_never_the_checkpoint(
    scenario: ScenarioFactory, tmp_path: Path
) -> None:
    mount = tmp_path / "provider"
    mount.mkdir()
    (mount / "auth.json").write_bytes(AUTH)
    (mount / "config.toml").write_bytes(CONFIG)
    sc = scenario("codex", "native")
    sc.settings = sc.settings.model_copy(update={"provider_files": mount})
    before = _store_bytes(tmp_path / "store")
    ctx = sc.boot().prepare()
    home = sc.layout.codex_home
    assert ctx.env["CODEX_HOME"] == str(home)
    assert (home / "auth.json").read_bytes() == AUTH
    assert (home / "config.toml").read_bytes() == CONFIG
    assert stat.S_IMODE((home / "auth.json").stat().st_mode) == 0o600
    # The boot captured a checkpoint of this attempt; nothing of the credential is in the store.
    assert sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)
    after = _store_bytes(tmp_path / "store")
    assert len(after) > len(before)
    assert b"PROVIDER-FILE-TEST" not in after and b"model_providers.loopback" not in after
