"""Start-up: each command imports what it needs when it needs it.

Checked in a fresh interpreter per command, through ``sys.modules`` once the command is
done (or, for the app, at its first frame): ``--help`` loads no model, store, config or UI
library; ``sessions list`` opens the store and nothing of the models or the UI; the app with
endpoints for both models shows its first frame without mlx_lm or the openai SDK. The
figures are benchmarks/bench_startup.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT_S = 180  # only bounds a hang: the machine is shared

# Top-level packages whose import costs start-up time (numpy and pydantic tens to hundreds
# of ms, mlx_lm with transformers and the openai SDK seconds on a slow machine).
HEAVY = ["mlx", "mlx_lm", "transformers", "numpy", "sqlite_utils", "openai", "pydantic", "yaml",
         "textual", "rich", "huggingface_hub", "tokenizers", "httpx", "httpx2", "jsonschema", "mcp"]

REPORT = """
import json, sys
def report():
    import gc
    names = list(sys.modules)  # one snapshot: a worker thread may be importing meanwhile
    loaded = {m.split(".")[0] for m in names} | {m for m in names if m.startswith("hermes_tui.")}
    print("MODULES=" + json.dumps(sorted(loaded)), flush=True)
    print("COLLECTOR=" + json.dumps(gc.isenabled()), flush=True)
"""

COMMAND = REPORT + """
from hermes_tui.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
report()
raise SystemExit(code)
"""

# The app headless, until its first frame of the chat screen.
FIRST_FRAME = REPORT + """
import os
from textual.app import App
_display, _run = App._display, App.run
def first_frame(self, screen, renderable):
    _display(self, screen, renderable)
    if type(screen).__name__ == "ChatScreen":
        report()
        os._exit(0)
App._display = first_frame
App.run = lambda self, **kw: _run(self, **{**kw, "headless": True, "size": (100, 30)})
from hermes_tui.cli import main
main(sys.argv[1:])
print("no first frame", flush=True)
os._exit(3)
"""

ENDPOINTS = """\
model:
  provider: openai-api
  base_url: http://127.0.0.1:9/v1
  model: chat
auxiliary:
  compression:
    provider: openai-api
    base_url: http://127.0.0.1:9/v1
    model: small
"""


def loaded_modules(home: Path, code: str, *args: str) -> set[str]:
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=home, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("MODULES=")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return set(json.loads(lines[-1].removeprefix("MODULES=")))


@pytest.fixture
def home(hermes_home: Path) -> Path:
    (hermes_home / "config.yaml").write_text(ENDPOINTS, encoding="utf-8")
    return hermes_home


def test_help_imports_no_model_store_config_or_ui_library(home):
    loaded = loaded_modules(home, COMMAND, "--help")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    ours = {m for m in loaded if m.startswith("hermes_tui.")}
    assert not {"hermes_tui.store", "hermes_tui.compaction"} & ours, sorted(ours)
    # Of the config, only the provider registry (plain data: the names --provider accepts); not
    # the settings, their schema or the YAML reader.
    config = {m for m in ours if m.startswith("hermes_tui.config")}
    assert config <= {"hermes_tui.config", "hermes_tui.config.provider_registry"}, sorted(config)
    assert "yaml" not in loaded


@pytest.mark.parametrize("args", [("sessions", "list"), ("sessions", "list", "--json")])
def test_sessions_list_opens_the_store_and_imports_no_model_or_ui_library(home, args):
    from hermes_tui.store import Store

    with Store(home / "state.db") as store:
        store.create_session("a stored chat")
    loaded = loaded_modules(home, COMMAND, *args)
    assert {"sqlite3", "hermes_tui.store"} <= loaded  # it did read the store
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_app_with_endpoints_reaches_its_first_frame_without_mlx_lm_the_openai_sdk_or_pydantic(home):
    loaded = loaded_modules(home, FIRST_FRAME)
    assert "textual" in loaded and "hermes_tui.tui.screens.chat" in loaded and "hermes_tui.config" in loaded
    # pydantic (~45 ms to import here) comes with the SDKs, after the first frame; the config is hermes_tui.config.schema's.
    later = {"mlx_lm", "transformers", "openai", "sqlite_utils", "pydantic", "pydantic_core"}
    assert not loaded & later, sorted(loaded & later)


def test_the_first_frame_waits_for_no_tool_validator_http_library_downloads_or_transcript_reader(home):
    # Each is needed later (a tool call, the first model request, the models screen, `open`,
    # the first Markdown view, a search or listing, a problem to show).
    later = {"jsonschema", "httpcore2", "httpcore", "hermes_tui.hub.downloads", "hermes_tui.hermes_agent.sessions",
             "hermes_tui.providers.openai.transport", "markdown_it", "pathspec",
             "hermes_tui.tui.screens.first_run"}
    loaded = loaded_modules(home, FIRST_FRAME)
    assert "hermes_tui.tui.screens.chat" in loaded
    assert not loaded & later, sorted(loaded & later)


def test_the_choices_the_parsers_name_are_the_packages_own():
    """The command line names a few constants itself (importing their packages would load
    compaction, the hub or the store for ``--help``); they must stay what those packages use."""
    from hermes_tui import hub
    from hermes_tui.analysis.bench_results import DEFAULT_PASSES
    from hermes_tui.analysis.replay import TURN_MODES
    from hermes_tui.cli import bench, common, models
    from hermes_tui.compaction.micro import MODES
    from hermes_tui.compaction.policy import POLICIES
    from hermes_tui.config import FALLBACK_CONTEXT_LIMIT

    assert common.TURN_MODES == TURN_MODES
    assert common.MICRO_MODES == MODES
    assert common.POLICIES == POLICIES
    assert common.FALLBACK_CONTEXT_LIMIT == FALLBACK_CONTEXT_LIMIT
    assert models.ROLES == hub.ROLES
    assert bench.DEFAULT_PASSES == DEFAULT_PASSES


def test_the_collector_is_held_off_until_the_first_frame(home):
    """Nearly all of start-up's objects stay: the collections before the first frame free
    little and cost 35-90 ms of it; ``tui.heap`` turns the collector back on after that frame."""
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", FIRST_FRAME], env=env, cwd=home, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert "COLLECTOR=false" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_with_mcp_servers_the_first_frame_waits_for_neither_the_mcp_sdk_nor_a_server(home):
    """The SDK takes ~0.4 s to import here: it comes on a thread after the first frame, and the
    servers start once it is in (tests/tui/test_tui_mcp.py has them working)."""
    with (home / "config.yaml").open("a", encoding="utf-8") as config:
        config.write("mcp_servers:\n  docs:\n    command: /bin/sleep\n    args: ['30']\n")
    loaded = loaded_modules(home, FIRST_FRAME)
    assert "hermes_tui.tui.screens.chat" in loaded
    later = {"mcp", "mcp_types", "anyio", "pydantic", "hermes_tui.tools.mcp"}
    assert not loaded & later, sorted(loaded & later)
