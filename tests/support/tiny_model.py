"""The tiny test model's recipe (``models/build_tiny.py``), imported by path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_TINY = REPO_ROOT / "models" / "build_tiny.py"


def load_build_tiny():
    """Import models/build_tiny.py by path (models/ is not a package)."""
    spec = importlib.util.spec_from_file_location("build_tiny", BUILD_TINY)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module
