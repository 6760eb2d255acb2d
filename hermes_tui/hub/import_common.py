"""What the import steps share: the error, the progress callback, limits, small helpers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_tui.util.errors import AppError

# progress(stage, done, total): "copying" and "writing" count bytes, "converting" counts
# tensors, "reading" goes 0/1 then 1/1 (mx.load reads the whole file in one call).
ProgressFn = Callable[[str, int, int], None]

SUPPORTED_ARCHITECTURES = ("llama", "qwen2")
SUPPORTED_TOKENIZERS = ("gpt2", "llama")

SHARD_BYTES = 5 << 30  # like mlx_lm: at most ~5 GB per safetensors file


class ModelImportError(AppError):
    """The import cannot be done; the message is one line saying what and why."""


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def brief(exc: BaseException) -> str:
    """An exception as one short line."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."
