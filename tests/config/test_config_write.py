"""Writing config.yaml (config_write): the documented default file, whole-file saves, atomic
replacement, and refusing a file that is not ours."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import yaml
from support.config_defaults import DOCUMENTED_DEFAULTS
from support.hermes_home import AGENT_CONFIG

from hermes_tui.config import Config, ConfigError, apply_overrides, load_config
from hermes_tui.config import problems as config_problems
from hermes_tui.config import write as config_write
from hermes_tui.config.edit import save_changes
from hermes_tui.config.write import (
    default_config_text,
    render_config_text,
    save_config,
    write_default_config,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- default file


def test_write_default_round_trips(tmp_path):
    path = tmp_path / "sub" / "dir" / "config.yaml"
    write_default_config(path)
    assert path.read_text(encoding="utf-8") == default_config_text()
    assert load_config(path) == Config()


def test_default_text_documents_every_key():
    text = default_config_text()
    for key_path in config_problems.all_keys(Config):
        leaf = key_path.rpartition(".")[2]
        lines = [line for line in text.splitlines() if line.strip().startswith(f"{leaf}:")]
        assert lines, key_path
        assert all("#" in line for line in lines), key_path
    # The additions are explained.
    assert "extractive" in text and "needs no model" in text
    assert "max_tokens: null" in text
    assert "tokenizer.json" in text
    model_section = text.split("\ncompression:")[0]
    assert any(line.strip().startswith("max_tokens: 1024") and "longest reply" in line
               for line in model_section.splitlines())
    # The file itself is plain data equal to the defaults.
    assert yaml.safe_load(text) == DOCUMENTED_DEFAULTS


def test_write_default_never_overwrites(tmp_path):
    path = write(tmp_path, "compression:\n  threshold: 0.5\n")
    write_default_config(path)
    assert path.read_text() == "compression:\n  threshold: 0.5\n"
    assert load_config(path).compression.threshold == 0.5
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]  # no temp file left


def test_write_default_creates_private_parent(tmp_path):
    path = tmp_path / "home" / "config.yaml"
    write_default_config(path)
    assert path.parent.is_dir()
    assert (path.parent.stat().st_mode & 0o777) == 0o700


def test_save_round_trips_and_documents(tmp_path):
    path = tmp_path / "home" / "config.yaml"
    config = Config().with_overrides(
        {"compression.threshold": 0.65, "model.model": "true", "auxiliary.compression.max_tokens": 300}
    )
    save_config(config, path)
    assert load_config(path) == config
    text = path.read_text()
    assert "threshold: 0.65" in text and "# " in text
    assert render_config_text(config) == text


def test_save_validates_first_and_leaves_the_file_alone(tmp_path):
    path = write(tmp_path, "compression:\n  threshold: 0.5\n")
    before = path.read_text()
    config = load_config(path)
    config.compression.threshold = 7.0  # assignment is not validated; save must catch it
    with pytest.raises(ConfigError) as info:
        save_config(config, path)
    assert str(info.value) == f"{path}: compression.threshold: must be greater than 0 and at most 1, got 7.0"
    assert path.read_text() == before


def test_save_is_atomic_when_the_write_fails(tmp_path, monkeypatch):
    path = write(tmp_path, "compression:\n  threshold: 0.5\n")
    before = path.read_text()

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(config_write.os, "replace", crash)
    with pytest.raises(ConfigError) as info:
        save_config(Config(), path)
    assert str(info.value) == f"{path}: cannot write: No space left on device"
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]  # temp file cleaned up


def test_save_replaces_via_a_temp_file_in_the_same_dir(tmp_path, monkeypatch):
    path = write(tmp_path, "")
    os.chmod(path, 0o640)
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append((Path(src).parent, Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(config_write.os, "replace", spy)
    save_config(Config(), path)
    assert seen == [(tmp_path, path)]
    assert (path.stat().st_mode & 0o777) == 0o640  # existing permissions kept
    assert load_config(path) == Config()




@pytest.mark.parametrize("text, problem", [
    (AGENT_CONFIG, "top-level sections terminal, toolsets are not hermes-tui's"),
    ("model:\n  provider: auto\ndisplay:\n  skin: dark\n", "top-level section display is not hermes-tui's"),
    ("- a\n- list\n", "the top level is a list, not sections of keys"),
    ("terminal:\n  backend: [local\n", "not valid YAML, and its line 'terminal:' is not a hermes-tui section"),
])
def test_save_refuses_a_file_that_is_not_ours_and_keeps_it_byte_identical(tmp_path, text, problem):
    path = tmp_path / "config.yaml"
    path.write_bytes(text.encode())
    for save in (lambda: save_config(Config(), path),
                 lambda: save_changes(path, {"compression.threshold": 0.6}, base=Config())):
        with pytest.raises(ConfigError) as caught:
            save()
        message = str(caught.value)
        assert message == (f"{path}: not a hermes-tui config ({problem}); it was left untouched: "
                           "point --config or HERMES_TUI_HOME at a config.yaml of hermes-tui's own")
        assert path.read_bytes() == text.encode()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]  # no backup, no temp file


def test_a_broken_file_of_ours_is_replaced_and_every_backup_is_kept(tmp_path):
    """Each replaced version gets a backup of its own: the second save never overwrites the first's."""
    path = tmp_path / "config.yaml"
    first = b"# mine\ncompression:\n  threshold: [0.5\n"
    path.write_bytes(first)
    result = save_changes(path, {"compression.threshold": 0.5}, base=Config())
    assert result.backup is not None and result.backup.read_bytes() == first
    assert load_config(path).compression.threshold == 0.5
    second = b"compression:\n  threshold: 7\n"  # the user breaks it again, differently
    path.write_bytes(second)
    again = save_changes(path, {"compression.threshold": 0.4}, base=Config())
    assert again.backup is not None and again.backup != result.backup
    assert result.backup.read_bytes() == first and again.backup.read_bytes() == second
    assert sorted(p.name for p in tmp_path.glob("config.yaml.*.bak")) == sorted([result.backup.name, again.backup.name])
    assert load_config(path).compression.threshold == 0.4


def test_a_loadable_file_is_edited_in_place_without_a_backup(tmp_path):
    path = write(tmp_path, "compression:\n  threshold: 0.5   # my note\n")
    result = save_changes(path, {"compression.threshold": 0.7})
    assert result.kept_layout and result.backup is None
    assert path.read_text() == "compression:\n  threshold: 0.7   # my note\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_mcp_servers_round_trip_through_save(tmp_path):
    path = write(tmp_path, """\
        mcp_servers:
          gh: {command: npx, env: {GH: $GITHUB_TOKEN}, cwd: ~/src}
          web: {url: "http://127.0.0.1:9/mcp", headers: {X-Key: "${WEB_KEY}"}, enabled: false}
        """)
    config = load_config(path)
    save_config(config, path)
    assert load_config(path) == config
    assert "mcp_servers:" in path.read_text() and "  gh:\n    command: npx" in path.read_text()
    changed = apply_overrides(config, {"mcp_servers.web.enabled": True})
    assert changed.mcp_servers["web"].enabled and not config.mcp_servers["web"].enabled


def test_a_bad_server_entry_added_through_the_settings_is_a_config_error_naming_it():
    """The entry path of ``apply_changes`` (a whole ``mcp_servers`` entry) words its problem
    like every other; it raised TypeError (its problems were built without the schema)."""
    from hermes_tui.config.edit import apply_changes

    with pytest.raises(ConfigError) as caught:
        apply_changes(Config(), {"mcp_servers.docs": {"command": "", "url": ""}})
    assert str(caught.value) == "mcp_servers.docs: set either command (stdio) or url (streamable HTTP)"
