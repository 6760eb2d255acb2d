"""``hermes-tui models import PATH``: bring a local model into the models folder.

Two kinds of source:

* **An MLX model folder** (``config.json``, ``model*.safetensors``, tokenizer files), e.g.
  one made by ``mlx_lm convert`` or downloaded elsewhere. It is checked (the config parses,
  the weight files are complete, a tokenizer is there, the installed mlx-lm knows the
  ``model_type``) and its files are hard-linked into ``models_dir()/NAME`` (copied when the
  two are on different filesystems).

* **A GGUF file** (llama.cpp's format). It is converted into an MLX model folder:

  - architectures: ``llama`` (Llama 1/2/3.x, Mistral 7B, SmolLM, TinyLlama and the other
    models llama.cpp stores as "llama") and ``qwen2`` (Qwen2, Qwen2.5: Q/K/V biases, tied
    or untied embeddings), dense models only; anything else is refused;
  - every tensor is decoded from the file's bytes (``gguf/quants.py``; ``mx.load`` refuses
    a whole file for one Q5_0 tensor, and MLX 0.32 decodes Q4_K wrongly). Q4_0, Q4_1,
    Q5_0, Q5_1 and Q8_0 become MLX affine weights of 4, 5 or 8 bits (group size 32)
    without loss; Q4_K becomes MLX 4-bit (its sub-block scales rounded once to float16);
    Q6_K and Q2_K, whose 16-weight sub-blocks no MLX layout holds, become float16; F32
    and F16 are kept, BF16 becomes float16. Other types (Q3_K, Q5_K, IQ*, ...) are refused;
  - llama.cpp stores a llama's Q and K projections permuted for its interleaved RoPE; the
    permutation is undone so the folder is an ordinary Hugging Face-layout Llama (qwen2
    files are not permuted);
  - Llama 3.1/3.2's ``rope_freqs`` tensor becomes the matching ``rope_scaling`` entry;
  - the tokenizer is rebuilt as a ``tokenizer.json`` from the GGUF metadata: ``gpt2``
    (byte-level BPE, with the pre-tokenizer llama.cpp names in ``tokenizer.ggml.pre``) or
    ``llama`` (SentencePiece BPE with byte fallback); ``tokenizer_config.json`` carries
    the chat template and the special tokens.

Nothing is written under the destination name until the import is complete: the work
happens in a hidden temporary folder next to it that is renamed at the end, and removed
on any failure. Every user error is a :class:`ModelImportError` with a one-line message.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hermes_tui.hub.gguf.convert import convert_gguf
from hermes_tui.hub.gguf.header import check_gguf_header, has_gguf_magic, read_gguf_header
from hermes_tui.hub.import_common import ModelImportError, ProgressFn, brief
from hermes_tui.util import paths

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def import_model(
    path: Path | str,
    name: str | None = None,
    *,
    dest_root: Path | None = None,
    progress: ProgressFn | None = None,
) -> Path:
    """Import an MLX model folder or a GGUF file as ``dest_root/NAME``; return that folder.

    ``dest_root`` defaults to :func:`hermes_tui.util.paths.models_dir`. ``name`` defaults to
    the folder name or the file's stem (characters other than letters, digits, ``.``,
    ``_`` and ``-`` become ``-``). An existing model of that name is never overwritten.
    """
    source = Path(path).expanduser()
    if not source.exists():
        raise ModelImportError(f"{source}: no such file or folder")
    if source.is_dir():
        kind = "mlx"
        default_name = source.resolve().name
    elif source.is_file():
        if not has_gguf_magic(source):
            raise ModelImportError(
                f"{source}: not a GGUF file (no GGUF signature) and not an MLX model folder"
            )
        kind = "gguf"
        default_name = source.stem
    else:
        raise ModelImportError(f"{source}: not a regular file or folder")

    model_name = _check_name(name) if name is not None else _default_name(default_name)
    root = Path(dest_root) if dest_root is not None else paths.models_dir()
    dest = root / model_name
    _refuse_existing(dest, model_name)

    # Check everything that can be checked cheaply before writing anything.
    if kind == "mlx":
        files = _check_mlx_folder(source)
    else:
        header = read_gguf_header(source)
        check_gguf_header(source, header)

    paths.ensure_dir(root)
    work = Path(tempfile.mkdtemp(prefix=f".import-{model_name}-", dir=root))
    try:
        if kind == "mlx":
            _link_or_copy(files, work, progress)
        else:
            convert_gguf(source, header, work, progress)
        _refuse_existing(dest, model_name)  # someone may have taken the name meanwhile
        os.rename(work, dest)
    except OSError as exc:  # disk full, permissions...
        shutil.rmtree(work, ignore_errors=True)
        raise ModelImportError(f"{dest}: cannot write the model ({brief(exc)})") from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return dest


def _refuse_existing(dest: Path, name: str) -> None:
    if dest.exists() or dest.is_symlink():
        raise ModelImportError(
            f"a model named {name!r} already exists ({dest}); choose another --name or remove it first"
        )


def _check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise ModelImportError(
            f"--name {name!r}: use letters, digits, '.', '_' and '-' (up to 100, starting with a letter or digit)"
        )
    return name


def _default_name(stem: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:100]
    return cleaned or "model"




TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model")


def _check_mlx_folder(folder: Path) -> list[Path]:
    """The files to import, after checking the folder is a loadable MLX model."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelImportError(f"{folder}: not an MLX model folder (no config.json)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelImportError(f"{config_path}: cannot read it as JSON ({brief(exc)})") from None
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise ModelImportError(f"{config_path}: no model_type; not a model config")
    model_type = config["model_type"]
    if not _mlx_lm_knows(model_type):
        raise ModelImportError(
            f"{folder}: model_type {model_type!r} is not supported by the installed mlx-lm"
        )

    weights = sorted(folder.glob("model*.safetensors"))  # what mlx_lm.load reads
    if not weights:
        others = sorted(p.name for p in folder.glob("*.safetensors"))
        hint = f" (found {', '.join(others[:3])}: not MLX-named)" if others else ""
        raise ModelImportError(f"{folder}: no model*.safetensors weights{hint}")
    index_path = folder / "model.safetensors.index.json"
    if index_path.is_file():
        try:
            weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
            needed = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelImportError(f"{index_path}: unreadable index ({brief(exc)})") from None
        missing = [n for n in needed if not (folder / n).is_file()]
        if missing:
            raise ModelImportError(f"{folder}: weight file {missing[0]} is missing (named in the index)")
    for weight_file in weights:
        _check_safetensors(weight_file)

    if not any((folder / n).is_file() for n in TOKENIZER_FILES) and not (
        (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()
    ):
        raise ModelImportError(f"{folder}: no tokenizer (tokenizer.json or tokenizer.model)")

    # Every top-level file: weights, configs, tokenizer files, chat templates, README...
    # Hidden files (.DS_Store, .gitattributes) and sub-folders (.cache, .git) are skipped.
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def _mlx_lm_knows(model_type: str) -> bool:
    try:
        from mlx_lm.utils import MODEL_REMAPPING as remapping  # noqa: N811 - a local name here
    except ImportError:  # pragma: no cover - older or newer mlx-lm layouts
        remapping = {}
    module = remapping.get(model_type, model_type).replace("-", "_")
    try:
        return importlib.util.find_spec(f"mlx_lm.models.{module}") is not None
    except (ImportError, ValueError):
        return False


def _check_safetensors(path: Path) -> None:
    """The header parses and the file is as long as the header says (catches truncation)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if header_len > size - 8 or header_len > 100 << 20:
                raise ValueError("header length out of range")
            header = json.loads(f.read(header_len))
        end = max(
            (v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0
        )
    except (OSError, struct.error, ValueError, KeyError, TypeError, IndexError):
        raise ModelImportError(f"{path}: not a readable safetensors file") from None
    if 8 + header_len + end != size:
        raise ModelImportError(
            f"{path}: truncated or corrupt ({size} bytes, the header describes {8 + header_len + end})"
        )


def _link_or_copy(files: Sequence[Path], dest: Path, progress: ProgressFn | None) -> None:
    total = sum(p.stat().st_size for p in files)
    done = 0
    if progress:
        progress("copying", 0, total)
    for src in files:
        target = dest / src.name
        try:
            # Same filesystem: a hard link costs no space (and follows a symlinked source,
            # as in Hugging Face cache snapshots).
            os.link(src, target)
        except OSError:
            try:
                shutil.copyfile(src, target)
            except OSError as exc:
                raise ModelImportError(f"{src}: cannot copy ({brief(exc)})") from None
        done += src.stat().st_size
        if progress:
            progress("copying", done, total)
