"""The provider credential files reach the harness home (0600) and nothing else of the mount does."""

from __future__ import annotations

import stat
from pathlib import Path

from agentihooks_worker.attempt import AttemptLayout
from agentihooks_worker.provider_files import install


def _layout(tmp_path: Path, harness: str) -> AttemptLayout:
    layout = AttemptLayout(tmp_path / "attempts", "exe-" + "d" * 32, harness, "t-1")
    layout.create()
    return layout


def test_codex_files_are_copied_into_codex_home(tmp_path: Path) -> None:
    mount = tmp_path / "provider"
    mount.mkdir()
    (mount / "auth.json").write_text('{"OPENAI_API_KEY": "sk-test"}')
    (mount / "config.toml").write_text('model_provider = "x"\n')
    (mount / "stray").write_text("ignored")
    layout = _layout(tmp_path, "codex")
    assert install(mount, layout) == ["auth.json", "config.toml"]
    auth = layout.codex_home / "auth.json"
    assert auth.read_text() == '{"OPENAI_API_KEY": "sk-test"}'
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    assert not (layout.codex_home / "stray").exists()
    assert sorted(p.name for p in layout.codex_home.iterdir()) == ["auth.json", "config.toml"]
    # A second boot of the same attempt overwrites them in place.
    (mount / "auth.json").write_text("{}")
    assert install(mount, layout) == ["auth.json", "config.toml"]
    assert auth.read_text() == "{}"


def test_nothing_to_copy(tmp_path: Path) -> None:
    layout = _layout(tmp_path, "claude")
    assert install(None, layout) == []
    assert install(tmp_path / "absent", layout) == []
    mount = tmp_path / "provider"
    mount.mkdir()
    (mount / "auth.json").write_text("{}")
    assert install(mount, layout) == []  # Claude Code takes its credential from the environment
