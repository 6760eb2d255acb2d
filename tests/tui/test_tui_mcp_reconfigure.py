"""Changing ``mcp_servers`` in the running app (as saving /settings does): only the servers whose
config changed restart, the others keep their process; an open /tools screen follows the app's
servers. Real stdio servers (tests/support/mcp_server.py), the scripted model, ``App.run_test``."""

from __future__ import annotations

import os
from pathlib import Path

from support.chat_app import app_test, settle, type_and_send, until
from support.mcp_app import (
    SIZE,
    WAIT_S,
    bar,
    children_of,
    make_app,
    ready,
    stdio_server,
    tool_results,
    with_servers,
)
from support.scripted_endpoint import answer, call, calls

from hermes_tui.tui.screens.tools import ToolsScreen


def server_pids() -> dict[str, int]:
    """label -> pid of our mcp_server.py children (the label is the argument after ``stdio``)."""
    found = {}
    for pid, state in children_of(os.getpid()).items():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if state != "Z" and b"stdio" in args and args.index(b"stdio") + 1 < len(args):
            found[args[args.index(b"stdio") + 1].decode()] = pid
    return found


@app_test
async def test_toggling_one_server_in_the_settings_leaves_the_other_running(scripted, hermes_home, store, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([calls(call("one__read_note", "r1", key="kept")), answer("still there")])
    one, two = stdio_server("one", trust="trusted"), stdio_server("two", trust="trusted")
    app = make_app(store, model.base_url, workspace, {"one": one, "two": two})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app, "one", "two")
        manager = app.mcp_host.manager
        first = server_pids()
        assert set(first) == {"one", "two"}, first

        app.reconfigure(with_servers(app.config, {"one": one, "two": {**two, "enabled": False}}))
        await until(pilot, lambda: "two" not in server_pids(), "the disabled server's process to end", WAIT_S)
        await until(pilot, lambda: bar(app).text("mcp") == "MCP 1/1 ready", "the status bar")
        assert app.mcp_host.manager is manager and server_pids() == {"one": first["one"]}
        assert app.mcp_host.manager.state("two").reason == "disabled"

        app.reconfigure(with_servers(app.config, {"one": one, "two": two}))
        await ready(pilot, app, "one", "two")
        await until(pilot, lambda: bar(app).text("mcp") == "MCP 2/2 ready", "the status bar")
        again = server_pids()
        assert again["one"] == first["one"] and again["two"] != first["two"]

        # The server kept across both changes still answers the chat's new session of tools.
        await type_and_send(pilot, "read it")
        await settle(pilot, app.chat_screen)
        assert tool_results(app)["r1"] == "note kept: remember the milk"
        assert app.chat_screen.session.conv.messages[-1].content == "still there"
        assert server_pids()["one"] == first["one"]


@app_test
async def test_an_open_tools_screen_follows_the_app_to_new_servers(scripted, hermes_home, store, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([answer("hi")])
    app = make_app(store, model.base_url, workspace, {})
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.chat_screen is not None, "the chat")
        app.run_slash("/tools")
        await until(pilot, lambda: isinstance(app.screen, ToolsScreen) and app.screen.query("#no-servers"),
                    "the tools screen")
        await pilot.pause()
        screen = app.screen
        assert screen.query_one("#no-servers").display and not screen.query_one("#servers").display

        def shown() -> list[str]:
            table = screen.query_one("#servers")
            return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]

        # What reconfigure does to the servers (it then reopens the session, which also closes
        # the screens above the chat): the screen left open follows the app's new manager.
        for servers, names in (({"one": stdio_server("one")}, ["one"]),
                               ({"one": stdio_server("one"), "two": stdio_server("two")}, ["one", "two"])):
            app.config = with_servers(app.config, servers)
            app.mcp_host.update()
            app.mcp_host.show()
            await ready(pilot, app, *names)
            await until(pilot, lambda names=names: shown() == names and screen.mcp is app.mcp_host.manager,
                        f"{names} on the open screen")
            assert screen.query_one("#servers").display and not screen.query_one("#no-servers").display
            tools = screen.query_one("#tools")
            listed = {str(tools.get_row_at(i)[0]) for i in range(tools.row_count)}
            assert {f"{name}__read_note" for name in names} <= listed
        assert app.screen is screen
        app.config = with_servers(app.config, {})
        app.mcp_host.update()
        app.mcp_host.show()
        await until(pilot, lambda: screen.mcp is None and screen.query_one("#no-servers").display,
                    "the screen without servers")
        assert shown() == []
