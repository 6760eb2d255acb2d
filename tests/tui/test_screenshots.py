"""``assets/make_screenshots.py`` runs as the README says and writes every screenshot it names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "assets" / "make_screenshots.py"
TIMEOUT_S = 600  # only bounds a hang: the app runs five screens on a shared machine

# A word each screen shows (Textual writes a space as &#160; in its SVG).
SHOWS = {
    "chat": "compacted",
    "sessions": "Sessions",
    "models": "Catalog",
    "bench": "Benchmark",
    "settings": "Settings",
}


def test_the_script_writes_an_svg_of_each_main_screen(tmp_path, hermes_home):
    out = tmp_path / "shots"
    # Its throwaway home is a fixed folder under the temp dir: this test's own temp dir.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{name}.svg" for name in SHOWS)
    for name, word in SHOWS.items():
        svg = (out / f"{name}.svg").read_text(encoding="utf-8")
        assert svg.lstrip().startswith("<svg") and svg.rstrip().endswith("</svg>"), name
        assert word in svg, f"{name}.svg does not show {word!r}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert all(f"assets/{name}.svg" in readme for name in SHOWS), "the README shows each screenshot"
