"""Where a model named in config.yaml is on this machine: a local MLX model folder, a name
``models import`` gave one, or a Hugging Face repo id already in the local cache.

Never downloads. Every place that takes a model name resolves it here: the MLX runtime loading
it, the checks that say whether a configured model can run, the models screen choosing one.
"""

from __future__ import annotations

from pathlib import Path

from hermes_tui.util import paths
from hermes_tui.util.errors import AppError

MISSING_MODEL_HELP = (
    "download it first (e.g. `hf download {name}` on a machine with network access), "
    "or point the config at a local MLX model folder"
)


# ModelUnavailable kinds.
NOT_DOWNLOADED = "not_downloaded"  # an HF repo id not in the local cache
NOT_A_MODEL_FOLDER = "not_a_model_folder"  # no such folder, or one that is not an MLX model
CANNOT_LOAD = "cannot_load"  # the files are there, loading them failed


class ModelUnavailable(AppError):
    """The model cannot be loaded here; the message says which and how to get it, ``model``
    names it as the config did (or its folder), ``kind`` is one of the constants above."""


def imported_model(name: str) -> Path | None:
    """The folder ``models import --name NAME`` made for ``name`` (a bare name), if there is one."""
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        return None
    folder = paths.models_dir() / name
    return folder if (folder / "config.json").is_file() else None


def resolve_model_path(name: str) -> Path:
    """A local MLX model folder, a name ``models import`` gave one, or an HF repo id already in
    the local cache. Never downloads. Every place that takes a model name resolves it here."""
    path = Path(name).expanduser()
    imported = imported_model(name) if not path.exists() else None
    if imported is not None:
        return imported
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelUnavailable(
                f"{path}: not an MLX model folder (no config.json)", kind=NOT_A_MODEL_FOLDER, model=str(path)
            )
        return path
    if name.count("/") != 1 or name.startswith((".", "/", "~")):
        raise ModelUnavailable(
            f"{name}: no such model folder (nor a model imported under that name in {paths.models_dir()})",
            kind=NOT_A_MODEL_FOLDER, model=name,
        )
    try:
        from huggingface_hub import snapshot_download
        from mlx_lm.utils import DEFAULT_ALLOW_PATTERNS

        return Path(snapshot_download(name, local_files_only=True, allow_patterns=DEFAULT_ALLOW_PATTERNS))
    except Exception:  # noqa: BLE001 - every hub failure means "not here"
        raise ModelUnavailable(
            f"model {name} is not in the local Hugging Face cache: " + MISSING_MODEL_HELP.format(name=name),
            kind=NOT_DOWNLOADED, model=name,
        ) from None
