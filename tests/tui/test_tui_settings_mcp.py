"""The settings screen edits ``mcp_servers``: add a stdio or an HTTP server, disable one, remove
one, through the real screen in ``App.run_test`` and a real config.yaml; every line of the
user's that the edit is not about stays byte for byte."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from support.chat_app import ScreenApp
from textual.widgets import Button, Input, Static, Switch

from hermes_tui.config import Config, load_config
from hermes_tui.config.edit import REMOVE, changed_values, save_changes
from hermes_tui.tui.screens.settings import SettingsScreen

USER_CONFIG = """\
# my laptop setup
model:
  provider: openai-api   # llama-server on the desk
  model: qwen
  base_url: http://127.0.0.1:8080/v1

mcp_servers:
  # the docs server: keep it, it is the one I use most
  docs:
    command: npx
    args: [-y, "@acme/docs-mcp"]    # pinned on purpose
    env: [DOCS_TOKEN]
    trust: read-only
  # the old one, off for now
  legacy:
    url: https://legacy.example.com/mcp
    enabled: false

# the end: notes for later
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def config_path(tmp_path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(USER_CONFIG)
    return path




def diff(before: str, after: str) -> tuple[list[str], list[str]]:
    lines = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [line[2:] for line in lines if line.startswith("- ")], [line[2:] for line in lines if line.startswith("+ ")]


async def add_server(pilot, screen, name: str, target: str) -> None:
    screen.query_one("#mcp-new-name", Input).value = name
    screen.query_one("#mcp-new-target", Input).value = target
    screen.query_one("#mcp-add", Button).press()
    await pilot.pause()
    await pilot.pause()


@pytest.mark.anyio
async def test_settings_add_disable_and_remove_mcp_servers_keeping_the_users_comments(config_path):
    app = ScreenApp(lambda: SettingsScreen(config_path))
    async with app.run_test(size=(120, 50)) as pilot:
        screen = app.screen
        await add_server(pilot, screen, "files", "uvx mcp-server-files --root '/home/me/my notes'")
        await add_server(pilot, screen, "search", "https://search.example.com/mcp")
        screen.query_one("#mcp-enabled-docs", Switch).value = False
        screen.query_one("#mcp-remove-legacy", Button).press()
        await pilot.pause()
        assert "modified" in str(screen.query_one("#heading", Static).content)
        await pilot.press("ctrl+s")
        await pilot.pause()
    [saved] = app.results
    assert isinstance(saved, Config)
    assert load_config(config_path) == saved
    servers = saved.mcp_servers
    assert list(servers) == ["docs", "files", "search"]
    assert servers["docs"].enabled is False and servers["docs"].trust == "read-only"
    assert servers["docs"].env == {"DOCS_TOKEN": "$DOCS_TOKEN"}  # what the form does not edit stays
    assert servers["files"].command == "uvx"
    assert servers["files"].args == ["mcp-server-files", "--root", "/home/me/my notes"]
    assert servers["search"].url == "https://search.example.com/mcp" and servers["search"].transport == "http"

    removed, added = diff(USER_CONFIG, config_path.read_text())
    # Exactly the legacy entry's own lines go; its comment above stays (it is the user's text).
    assert removed == ["  legacy:", "    url: https://legacy.example.com/mcp", "    enabled: false"]
    assert added == [
        "    enabled: false",
        "  files:", "    command: uvx", "    args: [mcp-server-files, --root, /home/me/my notes]",
        "  search:", "    url: https://search.example.com/mcp",
    ]
    text = config_path.read_text()
    for line in USER_CONFIG.splitlines():
        if line not in removed:
            assert line in text.splitlines()
    assert text.startswith("# my laptop setup\nmodel:\n  provider: openai-api   # llama-server on the desk\n")
    assert text.endswith("\n# the end: notes for later\n")


@pytest.mark.anyio
async def test_a_bad_server_is_refused_in_the_form_and_nothing_is_written(config_path):
    app = ScreenApp(lambda: SettingsScreen(config_path))
    async with app.run_test(size=(120, 50)) as pilot:
        screen = app.screen
        await add_server(pilot, screen, "my server", "npx x")
        error = screen.query_one("#mcp-error", Static)
        assert error.has_class("-shown") and "use 1-32 letters, digits, _ or -" in str(error.content)
        await add_server(pilot, screen, "docs", "npx other")
        assert "configured already" in str(error.content)
        await add_server(pilot, screen, "ftp", "ftp://files.example.com")
        assert screen.query("#mcp-row-ftp")  # a command named ftp://…: the form cannot know better
        screen.query_one("#mcp-remove-ftp", Button).press()
        await pilot.pause()
        assert not screen.query("#mcp-row-ftp")
        assert screen.changes() == {}
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]
    assert config_path.read_text() == USER_CONFIG


def test_the_template_file_takes_a_first_server_in_place(tmp_path):
    """``mcp_servers: {}`` as the template writes it becomes a block holding the new entry."""
    from hermes_tui.config.write import save_config

    path = tmp_path / "config.yaml"
    save_config(Config(), path)
    before = path.read_text() + "# mine\n"
    path.write_text(before)
    result = save_changes(path, {"mcp_servers.notes": {"command": "notes-mcp", "env": {"KEY": "$KEY"}}})
    assert result.kept_layout
    removed, added = diff(before, path.read_text())
    assert [line.split("#")[0].rstrip() for line in removed] == ["mcp_servers: {}"]
    assert [line.split("#")[0].rstrip() for line in added] == [
        "mcp_servers:", "  notes:", "    command: notes-mcp", "    env:", "      KEY: $KEY"]
    assert path.read_text().endswith("# mine\n")
    assert load_config(path).mcp_servers["notes"].env == {"KEY": "$KEY"}


def test_changed_values_name_whole_entries_added_and_removed():
    old = Config.model_validate({"mcp_servers": {"a": {"command": "x"}, "b": {"url": "https://b/mcp"}}})
    new = Config.model_validate({"mcp_servers": {"a": {"command": "x", "enabled": False},
                                                 "c": {"command": "y", "args": ["-v"]}}})
    assert changed_values(old, new) == {
        "mcp_servers.a.enabled": False, "mcp_servers.b": REMOVE, "mcp_servers.c": {"command": "y", "args": ["-v"]},
    }
