"""The package as users install it: ``uv build``, a fresh venv, the wheel installed into it,
and ``hermes-tui`` run from a directory outside the repository, so nothing can come from
the source tree. Everything the app reads at run time (the model catalog, the demo session,
the stylesheet) has to be inside the wheel.

Dependencies are installed at the versions in ``uv.lock`` (exported), from the package
registry or uv's cache. The Hugging Face hub is never contacted (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

from hermes_tui import hub

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO_ROOT / "hermes_tui"

BUILD_TIMEOUT_S = 600
INSTALL_TIMEOUT_S = 1200
CLI_TIMEOUT_S = 300

pytestmark = [pytest.mark.integration, pytest.mark.timeout(BUILD_TIMEOUT_S + INSTALL_TIMEOUT_S + CLI_TIMEOUT_S)]


class Installed(NamedTuple):
    wheel: Path
    venv: Path
    site_packages: Path  # where the installed hermes_tui/ lives
    outside: Path  # a working directory outside the repository

    @property
    def script(self) -> Path:
        return self.venv / "bin" / "hermes-tui"


def uv_executable() -> str:
    # ``uv run`` names itself in UV; otherwise uv is on PATH (the project is run with it).
    found = os.environ.get("UV") or shutil.which("uv")
    assert found, "uv is needed to build and install the wheel (see README: the project is run with uv)"
    return found


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without anything pointing at the source tree's venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.pop("OPENAI_API_KEY", None)
    env.update(extra)
    return env


def run(cmd: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        cmd, cwd=cwd, env=env or clean_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, explain(cmd, proc)
    return proc


def explain(cmd: list[str], proc: subprocess.CompletedProcess) -> str:
    return (
        f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n"
        f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """The wheel built from this checkout (through its sdist, as ``uv build`` does), in a fresh venv."""
    uv = uv_executable()
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    run([uv, "build", "--out-dir", str(dist)], cwd=REPO_ROOT, timeout=BUILD_TIMEOUT_S)
    wheels = sorted(dist.glob("hermes_tui-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {dist}, found {[w.name for w in wheels]}"

    requirements = root / "requirements.txt"
    run(
        [uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "--quiet", "-o", str(requirements)],
        cwd=REPO_ROOT, timeout=BUILD_TIMEOUT_S,
    )
    venv = root / "venv"
    run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=root, timeout=INSTALL_TIMEOUT_S)
    run(
        [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), "-r", str(requirements), str(wheels[0])],
        cwd=root, timeout=INSTALL_TIMEOUT_S,
    )

    outside = root / "elsewhere"
    outside.mkdir()
    where = run(
        [str(venv / "bin" / "python"), "-c", "import hermes_tui; print(hermes_tui.__file__)"],
        cwd=outside, timeout=CLI_TIMEOUT_S,
    )
    package = Path(where.stdout.strip()).resolve().parent
    assert package.is_relative_to(venv.resolve()), f"hermes_tui imported from {package}, not from the venv {venv}"
    return Installed(wheel=wheels[0], venv=venv, site_packages=package.parent, outside=outside)


def hermes_tui(installed: Installed, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the installed ``hermes-tui`` outside the repository. The home comes from the
    ``hermes_home`` fixture through the environment; the Hugging Face cache is empty and offline."""
    hf_home = tmp_path / "hf_home"
    (hf_home / "hub").mkdir(parents=True, exist_ok=True)
    env = clean_env(
        HF_HUB_OFFLINE="1", HF_HOME=str(hf_home), PYTHONUNBUFFERED="1",
        PATH=f"{installed.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return run([str(installed.script), *args], cwd=installed.outside, env=env, timeout=CLI_TIMEOUT_S)


def test_wheel_holds_every_package_file_and_no_bytecode(installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))], "bytecode is the installer's job"
    in_source = {
        path.relative_to(REPO_ROOT).as_posix()
        for path in PACKAGE_DIR.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")
    }
    missing = sorted(in_source - names)
    assert not missing, f"files of hermes_tui/ missing from {installed.wheel.name}: {missing}"


def test_installed_models_list_shows_the_bundled_catalog(installed, hermes_home, tmp_path):
    listing = hermes_tui(installed, tmp_path, "models", "list")
    header = listing.stdout.splitlines()[0]
    assert header.startswith("Catalog (") and header.endswith("):"), listing.stdout
    catalog_file = Path(header.removeprefix("Catalog (").removesuffix("):")).resolve()
    assert catalog_file.is_relative_to(installed.site_packages / "hermes_tui"), header  # read from the install
    source_catalog = hub.load_catalog()  # the same file, read from the source tree
    for model in source_catalog:
        assert model.repo in listing.stdout

    data = json.loads(hermes_tui(installed, tmp_path, "models", "list", "--json").stdout)
    assert [m["repo"] for m in data["catalog"]] == [m.repo for m in source_catalog]
    assert sum(m["default_compression"] for m in data["catalog"]) == 1
    assert data["local"] == []  # a fresh home and an empty Hugging Face cache


def test_installed_demo_replays_the_bundled_session(installed, hermes_home, tmp_path):
    demo = hermes_tui(installed, tmp_path, "demo")
    assert "Replaying demo_session.json" in demo.stdout
    assert "Rolling summary now" in demo.stdout
    log = hermes_home / "logs" / "agent.log"
    assert "micro compaction telemetry: " in log.read_text(encoding="utf-8")


def agent_transcript(steps: int = 12) -> list[dict]:
    """A user task, then tool-calling steps with long results: enough to compact in 4,096 tokens."""
    messages: list[dict] = [
        {"role": "system", "content": "You are a coding agent. Use the bash tool."},
        {"role": "user", "content": "Find why the CSV export drops rows and fix it."},
    ]
    for step in range(steps):
        call_id = f"call_{step}"
        messages.append({
            "role": "assistant",
            "content": f"Step {step}: looking at export part {step}.",
            "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"sed -n '{step}0,{step}99p' app/export.py"})},
            }],
        })
        body = "\n".join(f"{step}{line:02d}: row = writer.writerow(customer_{line})" for line in range(40))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": body})
    messages.append({"role": "assistant", "content": "Fixed: rows with non-ASCII names are exported now."})
    return messages


def test_installed_compact_writes_the_compacted_transcript(installed, hermes_home, tmp_path):
    transcript = agent_transcript()
    path = tmp_path / "session.json"
    path.write_text(json.dumps(transcript), encoding="utf-8")
    proc = hermes_tui(installed, tmp_path, "compact", str(path), "--provider", "extractive", "--context-limit", "4096")
    out = json.loads(proc.stdout)
    assert isinstance(out, list) and len(out) < len(transcript)
    assert [m["content"] for m in out if m["role"] == "user"] == [transcript[1]["content"]]
    assert out[0] == transcript[0]
    micro = [m for m in out if isinstance(m.get("meta"), dict) and m["meta"].get("compaction") == "micro"]
    assert len(micro) == 1 and micro[0]["meta"]["summary"].strip()
