"""Models on this machine: list them, find one, delete one.

Where models live
  * the Hugging Face cache (``HF_HOME``/``HF_HUB_CACHE``), where downloads go, so that
    ``resolve.resolve_model_path("org/name")`` finds them offline;
  * ``paths.models_dir()`` (``$HERMES_TUI_HOME/models``), one folder per imported model.
``delete_model`` never removes anything outside those two places.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hermes_tui.hub.catalog import ROLES, catalog_repos
from hermes_tui.hub.errors import HubError
from hermes_tui.hub.hf import hf_cache_dir
from hermes_tui.util import paths

if TYPE_CHECKING:
    from hermes_tui.config import Config


@dataclass(frozen=True)
class LocalModel:
    name: str               # repo id (hf-cache) or folder name (local)
    path: Path              # what to load: the snapshot folder, or the local folder
    root: Path              # what delete_model removes: the cache repo folder, or the local folder
    size_bytes: int         # on disk, partial downloads included
    source: Literal["hf-cache", "local"]
    in_catalog: bool
    roles: tuple[str, ...]  # roles config.yaml gives it now ("chat", "compression")
    complete: bool = True   # a loadable snapshot exists (config.json + *.safetensors)
    partial_bytes: int = 0  # bytes in interrupted downloads (resumed by the next pull)


def _tree_size(root: Path) -> int:
    """Bytes of the regular files under ``root`` (symlinks are not followed or counted)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(dirpath, name)):
                total += st.st_size
    return total


def _partial_bytes(repo_root: Path) -> int:
    total = 0
    for partial in (repo_root / "blobs").glob("*.incomplete"):
        try:
            total += partial.stat().st_size
        except OSError:
            pass
    return total


def looks_like_mlx(files: list[str]) -> bool:
    return "config.json" in files and any(name.endswith(".safetensors") for name in files)


def _cache_repo_id(folder: str) -> str | None:
    if not folder.startswith("models--"):
        return None
    parts = folder[len("models--"):].split("--")
    return "/".join(parts) if len(parts) == 2 and all(parts) else None


def _cached_models(cache: Path) -> list[tuple[str, Path, Path, bool]]:
    """(repo id, snapshot path or repo folder, repo folder, complete) of MLX-looking cache entries."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    found: dict[str, tuple[str, Path, Path, bool]] = {}
    try:
        info = scan_cache_dir(cache)
    except CacheNotFound:
        return []
    for repo in info.repos:
        if repo.repo_type != "model":
            continue
        revisions = sorted(repo.revisions, key=lambda r: ("main" in r.refs, r.last_modified), reverse=True)
        snapshot = next(
            (r.snapshot_path for r in revisions if looks_like_mlx([f.file_name for f in r.files])), None
        )
        if snapshot is not None:
            found[repo.repo_id] = (repo.repo_id, snapshot, repo.repo_path, True)
        elif _partial_bytes(repo.repo_path):
            found[repo.repo_id] = (repo.repo_id, repo.repo_path, repo.repo_path, False)
    # A first download interrupted before any snapshot exists: scan_cache_dir skips the
    # folder (no snapshots/), but its partial blobs are worth listing (to resume or delete).
    for folder in sorted(cache.glob("models--*")):
        repo_id = _cache_repo_id(folder.name)
        if repo_id and repo_id not in found and folder.is_dir() and _partial_bytes(folder):
            found[repo_id] = (repo_id, folder, folder, False)
    return list(found.values())


def _config_roles(config: Config | None) -> dict[str, str]:
    """role -> configured model value."""
    if config is None:
        return {}
    return {"chat": config.model.model, "compression": config.auxiliary.compression.model}


def _same_model(value: str, name: str, path: Path) -> bool:
    if not value:
        return False
    if value == name:
        return True
    candidate = Path(value).expanduser()
    if not candidate.is_absolute() and not value.startswith(("./", "../", "~")):
        return False
    try:
        return candidate.resolve() == path.resolve()
    except OSError:
        return False


def _load_config_quietly(config_path: Path | None) -> Config | None:
    from hermes_tui.config import ConfigError, load_config

    try:
        return load_config(config_path)
    except ConfigError:
        return None  # listing what is on disk must work even with a broken config file


def local_models(config_path: Path | None = None) -> list[LocalModel]:
    """Models in the HF cache (MLX-looking ones) and in ``models_dir()``; cache first, by name."""
    config = _load_config_quietly(config_path)
    configured = _config_roles(config)
    catalog = catalog_repos()

    def roles_of(name: str, path: Path) -> tuple[str, ...]:
        return tuple(role for role in ROLES if _same_model(configured.get(role, ""), name, path))

    models: list[LocalModel] = []
    cache = hf_cache_dir()
    if cache.is_dir():
        for repo_id, path, root, complete in sorted(_cached_models(cache)):
            models.append(
                LocalModel(
                    name=repo_id, path=path, root=root, size_bytes=_tree_size(root), source="hf-cache",
                    in_catalog=repo_id in catalog, roles=roles_of(repo_id, path) if complete else (),
                    complete=complete, partial_bytes=_partial_bytes(root),
                )
            )
    folder = paths.models_dir()
    if folder.is_dir():
        for child in sorted(folder.iterdir()):
            if child.name.startswith(".") or not child.is_dir() or not (child / "config.json").is_file():
                continue  # hidden folders are work in progress (e.g. an import being written)
            models.append(
                LocalModel(
                    name=child.name, path=child, root=child, size_bytes=_tree_size(child), source="local",
                    in_catalog=False, roles=roles_of(child.name, child),
                )
            )
    return models


def find_local_model(name: str, config_path: Path | None = None) -> LocalModel:
    """The local model ``name`` (repo id, folder name in models_dir, or its path)."""
    models = local_models(config_path)
    for model in models:
        if model.name == name:
            return model
    candidate = Path(name).expanduser()
    if candidate.exists():
        for model in models:
            if candidate.resolve() in (model.path.resolve(), model.root.resolve()):
                return model
    raise HubError(
        f"{name}: no such model in the Hugging Face cache ({hf_cache_dir()}) or in {paths.models_dir()}"
    )


# --------------------------------------------------------------------------- delete


def _inside(child: Path, parent: Path) -> bool:
    """``child`` is a direct entry of ``parent`` (no symlink games: compared unresolved and resolved)."""
    try:
        same_parent = child.parent == parent and child.parent.resolve() == parent.resolve()
        return same_parent and child.name not in ("", ".", "..")
    except OSError:
        return False


def delete_model(name: str) -> int:
    """Delete a downloaded (HF cache) or imported (models_dir) model; returns the bytes freed.

    Only a repo folder directly under the HF cache or a folder directly under
    ``models_dir()`` is ever removed; for the cache, the repo's lock folder goes too.
    """
    model = find_local_model(name)
    root = model.root
    if model.source == "hf-cache":
        base = hf_cache_dir()
        allowed = _inside(root, base) and root.name.startswith("models--")
    else:
        base = paths.models_dir()
        allowed = _inside(root, base)
    if not allowed:
        raise HubError(f"{root}: refusing to delete: not a model folder directly under {base}")
    if root.is_symlink():
        # A link placed in models_dir: remove the link, never what it points to.
        root.unlink()
        return 0
    freed = _tree_size(root)
    try:
        shutil.rmtree(root)
    except OSError as exc:
        raise HubError(f"{root}: cannot delete ({exc.strerror or exc})") from None
    if model.source == "hf-cache":
        shutil.rmtree(base / ".locks" / root.name, ignore_errors=True)
    return freed
