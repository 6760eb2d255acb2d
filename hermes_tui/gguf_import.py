"""``hermes-tui models import PATH``: bring a local model into the models folder.

Two kinds of source:

* **An MLX model folder** (``config.json``, ``model*.safetensors``, tokenizer files), e.g.
  one made by ``mlx_lm convert`` or downloaded elsewhere. It is checked (the config parses,
  the weight files are complete, a tokenizer is there, the installed mlx-lm knows the
  ``model_type``) and its files are hard-linked into ``models_dir()/NAME`` (copied when the
  two are on different filesystems).

* **A GGUF file** (llama.cpp's format). It is converted into an MLX model folder:

  - architectures: ``llama`` (Llama 1/2/3.x, Mistral 7B, SmolLM, TinyLlama and the other
    models llama.cpp stores as "llama"), dense models only; anything else is refused;
  - tensors are read with ``mx.load(path, return_metadata=True)``. Q4_0, Q4_1 and Q8_0 come
    back as MLX affine-quantized weights (group size 32) and stay quantized. Q4_K is
    repacked from the file's bytes into MLX 4-bit (group size 32) without loss, because
    MLX 0.32's own Q4_K decoder gives every second 32-weight sub-block the wrong scale.
    Q2_K and Q6_K are dequantized by MLX to float16; F32, F16 are kept, BF16 becomes
    float16. Other types (Q5_x, Q3_K, IQ*) are refused: MLX cannot read them;
  - llama.cpp stores the Q and K projections permuted for its interleaved RoPE; the
    permutation is undone so the folder is an ordinary Hugging Face-layout Llama;
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

import argparse
import importlib.util
import json
import os
import re
import shutil
import struct
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from hermes_tui import paths

# progress(stage, done, total): "copying" and "writing" count bytes, "converting" counts
# tensors, "reading" goes 0/1 then 1/1 (mx.load reads the whole file in one call).
ProgressFn = Callable[[str, int, int], None]

SUPPORTED_ARCHITECTURES = ("llama",)
SUPPORTED_TOKENIZERS = ("gpt2", "llama")

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
SHARD_BYTES = 5 << 30  # like mlx_lm: at most ~5 GB per safetensors file


class ModelImportError(Exception):
    """The import cannot be done; the message is one line saying what and why."""


# --- entry point -----------------------------------------------------------------------


def import_model(
    path: Path | str,
    name: str | None = None,
    *,
    dest_root: Path | None = None,
    progress: ProgressFn | None = None,
) -> Path:
    """Import an MLX model folder or a GGUF file as ``dest_root/NAME``; return that folder.

    ``dest_root`` defaults to :func:`hermes_tui.paths.models_dir`. ``name`` defaults to
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
        if not _has_gguf_magic(source):
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
        _check_gguf_header(source, header)

    paths.ensure_dir(root)
    work = Path(tempfile.mkdtemp(prefix=f".import-{model_name}-", dir=root))
    try:
        if kind == "mlx":
            _link_or_copy(files, work, progress)
        else:
            _convert_gguf(source, header, work, progress)
        _refuse_existing(dest, model_name)  # someone may have taken the name meanwhile
        os.rename(work, dest)
    except OSError as exc:  # disk full, permissions...
        shutil.rmtree(work, ignore_errors=True)
        raise ModelImportError(f"{dest}: cannot write the model ({_brief(exc)})") from None
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


# --- MLX folders -------------------------------------------------------------------------


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model")


def _check_mlx_folder(folder: Path) -> list[Path]:
    """The files to import, after checking the folder is a loadable MLX model."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelImportError(f"{folder}: not an MLX model folder (no config.json)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelImportError(f"{config_path}: cannot read it as JSON ({_brief(exc)})") from None
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
            raise ModelImportError(f"{index_path}: unreadable index ({_brief(exc)})") from None
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
        from mlx_lm.utils import MODEL_REMAPPING
    except ImportError:  # pragma: no cover - older or newer mlx-lm layouts
        MODEL_REMAPPING = {}
    module = MODEL_REMAPPING.get(model_type, model_type).replace("-", "_")
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
                raise ModelImportError(f"{src}: cannot copy ({_brief(exc)})") from None
        done += src.stat().st_size
        if progress:
            progress("copying", done, total)


# --- GGUF header -------------------------------------------------------------------------

GGUF_MAGIC = b"GGUF"

# ggml tensor types (ggml.h / gguf.GGMLQuantizationType): name, block size, bytes per block.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
}
# What this importer handles (what MLX reads correctly, plus Q4_K which is repacked here).
MLX_QUANTIZED = {"Q4_0": 4, "Q4_1": 4, "Q8_0": 8}  # -> MLX affine, group size 32
READABLE_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q2_K", "Q6_K")

# GGUF metadata value types: struct format of the scalars; 8 = string, 9 = array.
_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}


@dataclass
class GGUFTensor:
    name: str
    shape: tuple[int, ...]  # numpy order: rows first (GGUF stores the dims reversed)
    type_name: str
    offset: int  # absolute position of the data in the file
    nbytes: int


@dataclass
class GGUFHeader:
    version: int
    metadata: dict[str, Any]  # scalars and strings; arrays are recorded by length only
    tensors: list[GGUFTensor] = field(default_factory=list)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))


def _has_gguf_magic(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def read_gguf_header(path: Path) -> GGUFHeader:
    """Parse the header and tensor table of a GGUF file (not the tensor data).

    Array values (token lists, merges) are skipped, not decoded: this is a quick
    validation pass; ``mx.load`` reads the full metadata.
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            return _parse_gguf_header(f, size)
    except (struct.error, EOFError, UnicodeDecodeError, ValueError, OverflowError) as exc:
        raise ModelImportError(f"{path}: truncated or corrupt GGUF file ({_brief(exc)})") from None
    except OSError as exc:
        raise ModelImportError(f"{path}: cannot read ({_brief(exc)})") from None


def _parse_gguf_header(f, size: int) -> GGUFHeader:
    def read(n: int) -> bytes:
        data = f.read(n)
        if len(data) != n:
            raise EOFError("unexpected end of file")
        return data

    def unpack(fmt: str):
        return struct.unpack(fmt, read(struct.calcsize(fmt)))[0]

    def string() -> str:
        n = unpack("<Q")
        if n > size:
            raise ValueError("string length out of range")
        return read(n).decode("utf-8")

    def skip_value(vtype: int) -> Any:
        if vtype in _GGUF_SCALARS:
            return unpack(_GGUF_SCALARS[vtype])
        if vtype == 8:
            return string()
        if vtype == 9:
            item_type, count = unpack("<I"), unpack("<Q")
            if count > size:
                raise ValueError("array length out of range")
            if item_type in _GGUF_SCALARS:
                f.seek(count * struct.calcsize(_GGUF_SCALARS[item_type]), 1)
            elif item_type == 8:
                for _ in range(count):
                    n = unpack("<Q")
                    if n > size:
                        raise ValueError("string length out of range")
                    f.seek(n, 1)
            else:  # nested arrays: not used by llama.cpp's writers
                for _ in range(count):
                    skip_value(item_type)
            return ArrayLength(count)
        raise ValueError(f"unknown metadata value type {vtype}")

    if read(4) != GGUF_MAGIC:
        raise ValueError("no GGUF signature")
    version = unpack("<I")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} (this reads versions 2 and 3)")
    n_tensors, n_kv = unpack("<Q"), unpack("<Q")
    if n_tensors > 1_000_000 or n_kv > 1_000_000:
        raise ValueError("implausible header counts")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = string()
        metadata[key] = skip_value(unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        n_dims = unpack("<I")
        if n_dims > 8:
            raise ValueError(f"tensor {name} has {n_dims} dimensions")
        dims = [unpack("<Q") for _ in range(n_dims)]
        infos.append((name, tuple(reversed(dims)), unpack("<I"), unpack("<Q")))
    alignment = int(metadata.get("general.alignment", 32) or 32)
    data_start = -(-f.tell() // alignment) * alignment
    tensors = []
    for name, shape, type_id, offset in infos:
        type_name, block, block_bytes = GGML_TYPES.get(type_id, (f"type {type_id}", 1, 0))
        count = 1
        for d in shape:
            count *= d
        nbytes = count // block * block_bytes
        if block_bytes and data_start + offset + nbytes > size:
            raise EOFError(f"tensor {name} extends past the end of the file")
        tensors.append(GGUFTensor(name, shape, type_name, data_start + offset, nbytes))
    return GGUFHeader(version, metadata, tensors)


class ArrayLength(int):
    """Placeholder for an array value the header pass skipped: its length."""


def _check_gguf_header(path: Path, header: GGUFHeader) -> None:
    arch = header.architecture
    if int(header.metadata.get("split.count", 1) or 1) > 1:
        raise ModelImportError(
            f"{path.name}: one part of a split GGUF; merge the parts first (llama-gguf-split --merge)"
        )
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ModelImportError(
            f"{path.name}: GGUF architecture {arch or '(none)'!r} is not supported "
            f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})"
        )
    if int(header.metadata.get(f"{arch}.expert_count", 0) or 0) > 0:
        raise ModelImportError(f"{path.name}: mixture-of-experts {arch} models are not supported")
    tokenizer = header.metadata.get("tokenizer.ggml.model")
    if tokenizer not in SUPPORTED_TOKENIZERS:
        raise ModelImportError(
            f"{path.name}: tokenizer type {tokenizer or '(none)'!r} is not supported "
            f"(supported: {', '.join(SUPPORTED_TOKENIZERS)})"
        )
    unreadable = sorted({t.type_name for t in header.tensors if t.type_name not in READABLE_TYPES})
    if unreadable:
        raise ModelImportError(
            f"{path.name}: tensor type {', '.join(unreadable)} cannot be converted "
            f"(supported: {', '.join(READABLE_TYPES)}; try a Q4_K_M, Q4_0 or Q8_0 file)"
        )
    if not header.tensors:
        raise ModelImportError(f"{path.name}: the GGUF holds no tensors")


# --- GGUF -> MLX -------------------------------------------------------------------------

# llama.cpp tensor names -> mlx_lm llama names (the suffix, .weight/.scales/.biases/.bias,
# is kept).
_LLAMA_GLOBAL = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
_LLAMA_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_BLOCK_NAME = re.compile(r"blk\.(\d+)\.([a-z_]+)\.(weight|scales|biases|bias)")
_GLOBAL_NAME = re.compile(r"([a-z_]+)\.(weight|scales|biases|bias)")


def _mlx_name(gguf_name: str) -> tuple[str, str | None]:
    """(MLX name, llama.cpp role such as "attn_q") for a tensor name from mx.load."""
    # mx.load names the packed part of a quantized tensor without ".weight" in some
    # versions ("t", "t.scales", "t.biases"); treat a bare name as the weight.
    name = gguf_name if re.search(r"\.(weight|scales|biases|bias)$", gguf_name) else gguf_name + ".weight"
    m = _BLOCK_NAME.fullmatch(name)
    if m and m.group(2) in _LLAMA_BLOCK:
        return f"model.layers.{m.group(1)}.{_LLAMA_BLOCK[m.group(2)]}.{m.group(3)}", m.group(2)
    m = _GLOBAL_NAME.fullmatch(name)
    if m and m.group(1) in _LLAMA_GLOBAL:
        return f"{_LLAMA_GLOBAL[m.group(1)]}.{m.group(2)}", m.group(1)
    raise ModelImportError(f"unexpected tensor {gguf_name!r} for a llama model (not a plain dense Llama?)")


def _unpermute_rows(a, n_head: int):
    """Undo llama.cpp's Q/K permutation (convert_hf_to_gguf.py ``LlamaModel.permute``).

    llama.cpp rotates adjacent pairs (GPT-J style RoPE); Hugging Face Llama rotates the
    two halves of each head. The converter reorders each head's rows from
    [x0..x(h/2-1), y0..y(h/2-1)] to [x0, y0, x1, y1, ...]; this puts them back. It is a
    row permutation, so it applies to quantized weights, scales and biases alike.
    """
    rows = a.shape[0]
    if rows % (2 * n_head):
        raise ModelImportError(f"cannot undo the RoPE permutation: {rows} rows for {n_head} heads")
    rest = tuple(a.shape[1:])
    return a.reshape((n_head, rows // n_head // 2, 2) + rest).swapaxes(1, 2).reshape(a.shape)


def _convert_gguf(path: Path, header: GGUFHeader, out: Path, progress: ProgressFn | None) -> None:
    import mlx.core as mx

    if progress:
        progress("reading", 0, 1)
    try:
        weights, metadata = mx.load(str(path), return_metadata=True)
    except Exception as exc:  # noqa: BLE001 - MLX raises RuntimeError/ValueError for bad files
        raise ModelImportError(f"{path.name}: MLX cannot read this GGUF ({_brief(exc)})") from None
    if progress:
        progress("reading", 1, 1)

    by_name = {t.name: t for t in header.tensors}
    config = _llama_config(metadata, header, path)
    freqs = weights.pop("rope_freqs.weight", weights.pop("rope_freqs", None))
    if freqs is not None:
        if "rope_scaling" in config:
            raise ModelImportError(f"{path.name}: both rope_freqs and {config['rope_scaling']} scaling")
        config["rope_scaling"] = _llama3_scaling_from_freqs(freqs.astype(mx.float32), config, path)
    n_head, n_kv = config["num_attention_heads"], config["num_key_value_heads"]

    # Q4_K: MLX's decoder is wrong; repack from the file's bytes instead.
    for t in header.tensors:
        if t.type_name == "Q4_K":
            base = t.name[: -len(".weight")] if t.name.endswith(".weight") else t.name
            for key in (t.name, base, base + ".scales", base + ".biases"):
                weights.pop(key, None)
            w, s, b = q4_k_to_mlx(path, t)
            weights.update({t.name: w, base + ".scales": s, base + ".biases": b})
        elif t.type_name in MLX_QUANTIZED:
            _spot_check(path, t, weights)
        elif t.type_name == "BF16":
            arr = weights.get(t.name)
            if arr is not None and bool(mx.any(mx.isinf(arr)).item()):
                raise ModelImportError(f"{path.name}: BF16 tensor {t.name} overflows float16")

    converted: dict[str, Any] = {}
    total = len(weights)
    for i, (gguf_name, arr) in enumerate(sorted(weights.items())):
        mlx_name, role = _mlx_name(gguf_name)
        if role == "attn_q":
            arr = _unpermute_rows(arr, n_head)
        elif role == "attn_k":
            arr = _unpermute_rows(arr, n_kv)
        converted[mlx_name] = arr
        if progress:
            progress("converting", i + 1, total)

    _check_shapes(converted, config, path)
    config["tie_word_embeddings"] = "lm_head.weight" not in converted
    quantization = _quantization_entry(converted)
    if quantization:
        config["quantization"] = quantization
        config["quantization_config"] = quantization
    config["imported_from"] = {
        "format": "gguf",
        "file": path.name,
        "tensor_types": dict(sorted(Counter(t.type_name for t in by_name.values()).items())),
    }

    try:
        tokenizer, tokenizer_config, special_ids = build_tokenizer(metadata, config["max_position_embeddings"])
    except ModelImportError as exc:
        raise ModelImportError(f"{path.name}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - tokenizers rejects bad vocabularies with plain Exception
        raise ModelImportError(f"{path.name}: cannot build the tokenizer ({_brief(exc)})") from None
    config.update(special_ids)

    _write_json(out / "config.json", config)
    tokenizer.save(str(out / "tokenizer.json"))
    _write_json(out / "tokenizer_config.json", tokenizer_config)
    _save_weights(converted, out, progress)


def _md(metadata: dict, key: str, default: Any = None) -> Any:
    """A metadata value as plain Python (mx.load gives 0-d arrays for numbers)."""
    value = metadata.get(key, default)
    if hasattr(value, "tolist"):
        value = value.tolist()
    return value


def _md_float(metadata: dict, key: str, default: float | None = None) -> float | None:
    value = _md(metadata, key, default)
    if value is None:
        return None
    # float32 in the file: 1e-5 arrives as 9.999999747e-06; keep float32's 7 digits.
    return float(f"{float(value):.7g}")


def _llama_config(metadata: dict, header: GGUFHeader, path: Path) -> dict[str, Any]:
    arch = "llama"

    def need(key: str) -> Any:
        value = _md(metadata, f"{arch}.{key}")
        if value is None:
            raise ModelImportError(f"{path.name}: GGUF metadata has no {arch}.{key}")
        return value

    hidden = int(need("embedding_length"))
    n_head = int(need("attention.head_count"))
    n_kv = int(_md(metadata, f"{arch}.attention.head_count_kv", n_head))
    head_dim = int(_md(metadata, f"{arch}.attention.key_length", hidden // n_head))
    value_dim = int(_md(metadata, f"{arch}.attention.value_length", head_dim))
    rope_dims = int(_md(metadata, f"{arch}.rope.dimension_count", head_dim))
    if value_dim != head_dim or rope_dims != head_dim:
        raise ModelImportError(
            f"{path.name}: unusual attention shape (key {head_dim}, value {value_dim}, rope {rope_dims}) not supported"
        )
    embed = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
    if embed is None:
        raise ModelImportError(f"{path.name}: no token_embd.weight tensor")
    vocab_size = int(embed.shape[0])
    n_tokens = len(metadata.get("tokenizer.ggml.tokens") or ())
    if n_tokens > vocab_size:
        raise ModelImportError(f"{path.name}: {n_tokens} tokens but only {vocab_size} embedding rows")

    config: dict[str, Any] = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden,
        "num_hidden_layers": int(need("block_count")),
        "intermediate_size": int(need("feed_forward_length")),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "head_dim": head_dim,
        "vocab_size": vocab_size,
        "rms_norm_eps": _md_float(metadata, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
        "rope_theta": _md_float(metadata, f"{arch}.rope.freq_base", 10000.0),
        "max_position_embeddings": int(_md(metadata, f"{arch}.context_length", 2048)),
    }
    rope_scaling = _rope_scaling(metadata, config, path)
    if rope_scaling:
        config["rope_scaling"] = rope_scaling
    return config


def llama3_rope_factors(
    head_dim: int, base: float, factor: float, low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0, original_max_position_embeddings: int = 8192,
) -> list[float]:
    """The per-frequency factors llama.cpp stores as ``rope_freqs`` for Llama 3.1+ scaling."""
    import math

    old = original_max_position_embeddings
    low_wavelen, high_wavelen = old / low_freq_factor, old / high_freq_factor
    factors = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * base ** (i / head_dim)
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return factors


def _rope_scaling(metadata: dict, config: dict, path: Path) -> dict | None:
    """RoPE scaling named in the metadata (Llama 3's ``rope_freqs`` tensor is handled apart)."""
    kind = _md(metadata, "llama.rope.scaling.type")
    if kind in (None, "none", ""):
        return None
    if kind == "linear":
        return {"type": "linear", "factor": _md_float(metadata, "llama.rope.scaling.factor", 1.0)}
    raise ModelImportError(f"{path.name}: RoPE scaling {kind!r} is not supported")


def _llama3_scaling_from_freqs(freqs, config: dict, path: Path) -> dict:
    """The ``rope_scaling`` that reproduces a ``rope_freqs`` tensor, or an error."""
    import numpy as np

    values = np.array(freqs, dtype=np.float64).reshape(-1)
    if values.size != config["head_dim"] // 2:
        raise ModelImportError(f"{path.name}: rope_freqs has {values.size} values, expected {config['head_dim'] // 2}")
    factor = float(values.max())
    for low, high, old in ((1.0, 4.0, 8192), (1.0, 4.0, 4096), (1.0, 4.0, 16384)):
        expected = llama3_rope_factors(config["head_dim"], config["rope_theta"], factor, low, high, old)
        if np.allclose(values, expected, rtol=1e-4, atol=1e-6):
            return {
                "rope_type": "llama3", "factor": float(f"{factor:.7g}"), "low_freq_factor": low,
                "high_freq_factor": high, "original_max_position_embeddings": old,
            }
    raise ModelImportError(f"{path.name}: rope_freqs does not match Llama 3 RoPE scaling; not supported")


def _check_shapes(weights: dict, config: dict, path: Path) -> None:
    """Catch a GGUF whose tensors disagree with its metadata before writing anything."""
    hidden, head_dim = config["hidden_size"], config["head_dim"]
    expected_rows = {
        "model.embed_tokens": config["vocab_size"],
        "self_attn.q_proj": config["num_attention_heads"] * head_dim,
        "self_attn.k_proj": config["num_key_value_heads"] * head_dim,
        "self_attn.v_proj": config["num_key_value_heads"] * head_dim,
        "self_attn.o_proj": hidden,
        "mlp.gate_proj": config["intermediate_size"],
        "mlp.up_proj": config["intermediate_size"],
        "mlp.down_proj": hidden,
    }
    for name, arr in weights.items():
        if not name.endswith(".weight") or arr.ndim != 2:
            continue
        for part, rows in expected_rows.items():
            if f"{part}.weight" in name and arr.shape[0] != rows:
                raise ModelImportError(
                    f"{path.name}: tensor for {name} has {arr.shape[0]} rows, the metadata implies {rows}"
                )
    for i in range(config["num_hidden_layers"]):
        if f"model.layers.{i}.self_attn.q_proj.weight" not in weights:
            raise ModelImportError(f"{path.name}: layer {i} has no attention weights")


def _quantization_entry(weights: dict) -> dict | None:
    """config["quantization"]: the most common (bits, group) plus per-layer exceptions."""
    found: dict[str, tuple[int, int]] = {}
    for name, scales in weights.items():
        if not name.endswith(".scales"):
            continue
        layer = name[: -len(".scales")]
        packed = weights[layer + ".weight"]
        group = 32  # every GGUF type kept quantized here uses blocks of 32
        in_dims = scales.shape[-1] * group
        found[layer] = (packed.shape[-1] * 32 // in_dims, group)
    if not found:
        return None
    (bits, group), _ = Counter(found.values()).most_common(1)[0]
    entry: dict[str, Any] = {"group_size": group, "bits": bits, "mode": "affine"}
    for layer, (b, g) in sorted(found.items()):
        if (b, g) != (bits, group):
            entry[layer] = {"group_size": g, "bits": b, "mode": "affine"}
    return entry


def _save_weights(weights: dict, out: Path, progress: ProgressFn | None) -> None:
    import mlx.core as mx

    shards: list[dict] = []
    size = 0
    for name in sorted(weights):
        arr = weights[name]
        if not shards or (size + arr.nbytes > SHARD_BYTES and shards[-1]):
            shards.append({})
            size = 0
        shards[-1][name] = arr
        size += arr.nbytes
    total = sum(a.nbytes for a in weights.values())
    done = 0
    if progress:
        progress("writing", 0, total)
    index: dict[str, str] = {}
    for i, shard in enumerate(shards):
        file_name = "model.safetensors" if len(shards) == 1 else f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        mx.save_safetensors(str(out / file_name), shard, metadata={"format": "mlx"})
        index.update({k: file_name for k in shard})
        done += sum(a.nbytes for a in shard.values())
        if progress:
            progress("writing", done, total)
    if len(shards) > 1:
        _write_json(
            out / "model.safetensors.index.json",
            {"metadata": {"total_size": total}, "weight_map": dict(sorted(index.items()))},
        )


# --- quantized tensors from the file's bytes ----------------------------------------------


def _raw_rows(path: Path, t: GGUFTensor, rows: int | None = None):
    """The tensor's bytes as a (rows, bytes_per_row) uint8 memmap."""
    import numpy as np

    n_rows = 1
    for d in t.shape[:-1]:
        n_rows *= d
    row_bytes = t.nbytes // max(n_rows, 1)
    take = n_rows if rows is None else min(rows, n_rows)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=t.offset, shape=(take, row_bytes))


def _f16(blocks, start: int):
    import numpy as np

    return np.ascontiguousarray(blocks[..., start:start + 2]).view(np.float16).astype(np.float32)


def _pack_4bit(codes):
    """(rows, cols) uint8 values 0..15 -> MLX's packing: 8 per uint32, first in the low bits."""
    import numpy as np

    pairs = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return np.ascontiguousarray(pairs.astype(np.uint8)).view("<u4")


def q4_k_to_mlx(path: Path, t: GGUFTensor):
    """Repack a Q4_K tensor into MLX affine 4-bit, group size 32, without loss.

    A Q4_K block holds 256 weights: f16 d, f16 dmin, 12 bytes of 6-bit sub-block scales
    and mins, 128 bytes of 4-bit codes. Sub-block j (32 weights) decodes as
    ``d * sc[j] * q - dmin * m[j]``: exactly MLX's ``scale * q + bias`` with
    scale = d * sc[j], bias = -dmin * m[j]; the codes are reused as they are.
    Codes are stored in 32-byte chunks: low nibbles are sub-block 2c, high nibbles 2c + 1.
    """
    import mlx.core as mx
    import numpy as np

    if len(t.shape) != 2 or t.shape[1] % 256:
        raise ModelImportError(f"Q4_K tensor {t.name} has an unsupported shape {t.shape}")
    rows, cols = t.shape
    blocks = np.asarray(_raw_rows(path, t)).reshape(rows, cols // 256, 144)
    d, dmin = _f16(blocks, 0), _f16(blocks, 2)  # (rows, nb, 1)
    sc = blocks[..., 4:16].astype(np.uint8)
    scale6 = np.concatenate([sc[..., 0:4] & 63, (sc[..., 8:12] & 0x0F) | ((sc[..., 0:4] >> 6) << 4)], axis=-1)
    min6 = np.concatenate([sc[..., 4:8] & 63, (sc[..., 8:12] >> 4) | ((sc[..., 4:8] >> 6) << 4)], axis=-1)
    qs = blocks[..., 16:].reshape(rows, cols // 256, 4, 1, 32)
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=3).reshape(rows, cols)
    scales = (d * scale6).reshape(rows, cols // 32)
    biases = -(dmin * min6).reshape(rows, cols // 32)
    return (
        mx.array(_pack_4bit(codes)),
        mx.array(scales.astype(np.float16)),
        mx.array(biases.astype(np.float16)),
    )


def _dequant_row(raw, type_name: str):
    """Reference decoding of one row of Q4_0 / Q4_1 / Q8_0 (ggml-quants.c), as float32."""
    import numpy as np

    block_bytes = {"Q4_0": 18, "Q4_1": 20, "Q8_0": 34}[type_name]
    blocks = np.asarray(raw, dtype=np.uint8).reshape(-1, block_bytes)
    d = _f16(blocks, 0)
    if type_name == "Q8_0":
        return (d * blocks[:, 2:].view(np.int8).astype(np.float32)).reshape(-1)
    start = 2 if type_name == "Q4_0" else 4
    qs = blocks[:, start:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)
    if type_name == "Q4_0":
        return (d * (codes - 8)).reshape(-1)
    return (d * codes + _f16(blocks, 2)).reshape(-1)


def _spot_check(path: Path, t: GGUFTensor, weights: dict) -> None:
    """Compare MLX's decoding of the first row with the reference (old MLX broke Q4_1)."""
    import mlx.core as mx
    import numpy as np

    base = t.name[: -len(".weight")] if t.name.endswith(".weight") else t.name
    packed = weights.get(t.name, weights.get(base))
    scales, biases = weights.get(base + ".scales"), weights.get(base + ".biases")
    if packed is None or scales is None or biases is None:
        raise ModelImportError(f"{path.name}: MLX did not return {t.type_name} tensor {t.name} as quantized")
    bits = MLX_QUANTIZED[t.type_name]
    got = mx.dequantize(
        packed[:1], scales[:1].astype(mx.float32), biases[:1].astype(mx.float32), group_size=32, bits=bits
    )
    expected = _dequant_row(_raw_rows(path, t, rows=1)[0], t.type_name)
    got = np.array(got, dtype=np.float32).reshape(-1)
    tol = 1e-5 * max(1.0, float(np.abs(expected).max()))
    if got.shape != expected.shape or float(np.abs(got - expected).max()) > tol:
        raise ModelImportError(
            f"{path.name}: this MLX version decodes {t.type_name} tensors wrongly; upgrade mlx"
        )


# --- tokenizer ---------------------------------------------------------------------------

# Pre-tokenizer regexes, by tokenizer.ggml.pre (llama.cpp's llama-vocab.cpp names them).
_GPT2_FAMILY = {"default", "gpt-2", "gpt2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de",
                "jina-v2-es", "jina-v2-de", "jina-v1-en", "jina-v2-code", "roberta-bpe", "trillion",
                "granite-docling", "poro-chat", "viking", "gigachat"}
_DIGITS_THEN_GPT2 = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLIT_FAMILIES = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "smaug-bpe", "falcon3", "pixtral", "dbrx"), "llama3"),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"), "qwen2"),
}
# Pre-tokenizers whose BPE matches whole words in the vocabulary before merging.
_IGNORE_MERGES = {"llama3", "llama-v3", "llama-bpe", "smaug-bpe", "falcon3", "pixtral", "dbrx"}
SUPPORTED_PRE_TOKENIZERS = tuple(sorted(_GPT2_FAMILY | _DIGITS_THEN_GPT2 | set(_SPLIT_FAMILIES)))

TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNKNOWN = 3, 4, 2


def build_tokenizer(metadata: dict, model_max_length: int):
    """(tokenizers.Tokenizer, tokenizer_config dict, config special ids) from GGUF metadata."""
    from tokenizers import AddedToken

    kind = metadata.get("tokenizer.ggml.model")
    tokens = list(metadata.get("tokenizer.ggml.tokens") or [])
    if not tokens:
        raise ModelImportError("the GGUF has no tokenizer.ggml.tokens")
    types = _md(metadata, "tokenizer.ggml.token_type") or [1] * len(tokens)

    def token_of(key: str) -> str | None:
        idx = _md(metadata, f"tokenizer.ggml.{key}")
        return tokens[int(idx)] if idx is not None and 0 <= int(idx) < len(tokens) else None

    if kind == "gpt2":
        tokenizer = _byte_level_bpe(metadata, tokens)
        add_bos_default = metadata.get("tokenizer.ggml.pre") in _IGNORE_MERGES
    elif kind == "llama":
        tokenizer = _sentencepiece_bpe(metadata, tokens, types, token_of("unknown_token_id"))
        add_bos_default = True  # llama.cpp and transformers both default to BOS for SPM
    else:
        raise ModelImportError(f"tokenizer type {kind!r} is not supported")

    # Control tokens (<|im_start|>, <s>) are special; user-defined ones (<think>) are added
    # tokens that are matched whole but kept in decoded text.
    tokenizer.add_special_tokens([
        AddedToken(tok, special=True, normalized=False)
        for tok, typ in zip(tokens, types) if typ == TOKEN_CONTROL
    ])
    tokenizer.add_tokens([
        AddedToken(tok, special=False, normalized=False)
        for tok, typ in zip(tokens, types) if typ == TOKEN_USER_DEFINED
    ])

    bos, eos = token_of("bos_token_id"), token_of("eos_token_id")
    add_bos = bool(_md(metadata, "tokenizer.ggml.add_bos_token", add_bos_default)) and bos is not None
    add_eos = bool(_md(metadata, "tokenizer.ggml.add_eos_token", False)) and eos is not None
    _set_post_processor(tokenizer, kind, bos if add_bos else None, eos if add_eos else None)

    tokenizer_config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "unk_token": token_of("unknown_token_id"),
        "pad_token": token_of("padding_token_id"),
        "add_bos_token": add_bos,
        "add_eos_token": add_eos,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
    }
    templates = {
        key[len("tokenizer.chat_template"):].lstrip(".") or "default": value
        for key, value in metadata.items()
        if key.startswith("tokenizer.chat_template") and isinstance(value, str)
    }
    if set(templates) == {"default"}:
        tokenizer_config["chat_template"] = templates["default"]
    elif templates:
        tokenizer_config["chat_template"] = [{"name": k, "template": v} for k, v in sorted(templates.items())]

    # Generation stops at EOS and at llama.cpp's end-of-turn tokens (Llama 3's <|eot_id|>).
    stop_ids = []
    for key in ("eos_token_id", "eot_token_id", "eom_token_id"):
        idx = _md(metadata, f"tokenizer.ggml.{key}")
        if idx is not None and int(idx) not in stop_ids:
            stop_ids.append(int(idx))
    special_ids: dict[str, Any] = {
        "bos_token_id": _md(metadata, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": stop_ids[0] if len(stop_ids) == 1 else (stop_ids or None),
    }
    pad = _md(metadata, "tokenizer.ggml.padding_token_id")
    if pad is not None:
        special_ids["pad_token_id"] = pad
    return tokenizer, tokenizer_config, special_ids


def _merges(metadata: dict) -> list[tuple[str, str]]:
    merges = []
    for merge in metadata.get("tokenizer.ggml.merges") or []:
        left, sep, right = merge.partition(" ")
        if not sep:
            raise ModelImportError(f"malformed tokenizer merge {merge!r}")
        merges.append((left, right))
    return merges


def _vocab(tokens: list[str]) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        vocab.setdefault(tok, i)  # a duplicate keeps its first id
    return vocab


def _byte_level_bpe(metadata: dict, tokens: list[str]):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    pre = metadata.get("tokenizer.ggml.pre") or "default"
    merges = _merges(metadata)
    if not merges:
        raise ModelImportError("the GGUF's byte-level BPE tokenizer has no merges")
    model = models.BPE(vocab=_vocab(tokens), merges=merges, ignore_merges=pre in _IGNORE_MERGES)
    tokenizer = Tokenizer(model)
    if pre in _GPT2_FAMILY:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre in _DIGITS_THEN_GPT2:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    elif pre in _SPLIT_FAMILIES:
        family = _SPLIT_FAMILIES[pre]
        pattern = _LLAMA3_SPLIT if family == "llama3" else _QWEN2_SPLIT
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        if family == "qwen2":
            tokenizer.normalizer = normalizers.NFC()
    else:
        raise ModelImportError(
            f"pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported "
            f"(supported: {', '.join(SUPPORTED_PRE_TOKENIZERS)})"
        )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _sentencepiece_bpe(metadata: dict, tokens: list[str], types: list[int], unk: str | None):
    """SentencePiece BPE (Llama 2, Mistral, TinyLlama) as a tokenizers BPE with byte fallback.

    GGUF keeps SentencePiece's scores, not merges; the merges are recovered from the
    vocabulary: every split of a token into two tokens, ranked by the whole token's score
    (how SentencePiece's BPE chooses its next merge).
    """
    from tokenizers import Tokenizer, decoders, models, normalizers

    scores = _md(metadata, "tokenizer.ggml.scores")
    if scores is None or len(scores) != len(tokens):
        raise ModelImportError("the GGUF's SentencePiece tokenizer has no scores")
    vocab = _vocab(tokens)
    merges = _merges(metadata) or _merges_from_scores(tokens, scores, types, vocab)
    if unk is None and "<unk>" in vocab:
        unk = "<unk>"
    model = models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True, byte_fallback=True)
    tokenizer = Tokenizer(model)
    add_space = bool(_md(metadata, "tokenizer.ggml.add_space_prefix", True))
    # Like Llama 2's own tokenizer.json: always prefix "▁" (SentencePiece's dummy prefix;
    # llama.cpp adds it to every text fragment after a special token too). A Metaspace
    # pre-tokenizer would skip it for text that already starts with a space.
    replace = normalizers.Replace(" ", "\u2581")
    tokenizer.normalizer = (
        normalizers.Sequence([normalizers.Prepend("\u2581"), replace]) if add_space else replace
    )
    tokenizer.pre_tokenizer = None
    steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_space:
        steps.append(decoders.Strip(content=" ", left=1, right=0))
    tokenizer.decoder = decoders.Sequence(steps)
    return tokenizer


def _merges_from_scores(tokens, scores, types, vocab) -> list[tuple[str, str]]:
    ranked = []
    for tok, score, typ in zip(tokens, scores, types):
        if typ != 1 or len(tok) < 2:  # only normal tokens are made by merging
            continue
        for cut in range(1, len(tok)):
            left, right = tok[:cut], tok[cut:]
            if left in vocab and right in vocab:
                ranked.append((-float(score), vocab[left], vocab[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def _set_post_processor(tokenizer, kind: str, bos: str | None, eos: str | None) -> None:
    from tokenizers import processors

    steps = []
    if kind == "gpt2":
        steps.append(processors.ByteLevel(trim_offsets=False))
    if bos or eos:
        def ids(tok):
            return (tok, tokenizer.token_to_id(tok))

        prefix, suffix = (f"{bos} " if bos else ""), (f" {eos}" if eos else "")
        steps.append(processors.TemplateProcessing(
            single=f"{prefix}$A{suffix}",
            pair=f"{prefix}$A{suffix} {prefix}$B{suffix}",
            special_tokens=[ids(t) for t in dict.fromkeys(x for x in (bos, eos) if x)],
        ))
    if len(steps) == 1:
        tokenizer.post_processor = steps[0]
    elif steps:
        tokenizer.post_processor = processors.Sequence(steps)


# --- helpers -----------------------------------------------------------------------------


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _brief(exc: BaseException) -> str:
    """An exception as one short line."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


# --- command line ------------------------------------------------------------------------


def add_import_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``import PATH [--name NAME]`` to the ``models`` command's sub-parsers."""
    parser = subparsers.add_parser(
        "import",
        help="import a local MLX model folder or a GGUF file into the models folder",
        description=(
            "Import a local model. An MLX folder (config.json, model*.safetensors, tokenizer) "
            "is checked and hard-linked or copied; a GGUF file (llama architecture; F32, F16, "
            "BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q2_K, Q6_K tensors) is converted to an MLX folder."
        ),
    )
    parser.add_argument("path", type=Path, metavar="PATH", help="an MLX model folder or a .gguf file")
    parser.add_argument("--name", help="name in the models folder (default: the folder or file name)")
    parser.set_defaults(run=run_import)
    return parser


def run_import(args: argparse.Namespace) -> int:
    progress = _TerminalProgress(sys.stderr) if sys.stderr.isatty() else None
    try:
        dest = import_model(args.path, args.name, progress=progress)
    except ModelImportError as exc:
        if progress:
            progress.close()
        print(f"hermes-tui: {exc}", file=sys.stderr)
        return 2
    if progress:
        progress.close()
    print(f"imported {dest.name}: {dest}")
    return 0


class _TerminalProgress:
    """One self-overwriting status line on a terminal."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage in ("copying", "writing"):
            text = f"{stage} {done / 1e6:,.0f}/{total / 1e6:,.0f} MB"
        elif stage == "converting":
            text = f"converting tensor {done}/{total}"
        else:
            text = f"{stage}..." if done < total else f"{stage} done"
        self.stream.write("\r\033[K" + text)
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False
