"""A GGUF file's header: the metadata and the tensor table, read and checked before any conversion."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from hermes_tui.hub.import_common import (
    SUPPORTED_ARCHITECTURES,
    SUPPORTED_TOKENIZERS,
    ModelImportError,
    brief,
)

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
# What this importer converts (quants.py decodes each from the file's bytes): the 32-weight
# block types and Q4_K become MLX affine weights without loss, Q2_K and Q6_K float16.
READABLE_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q4_K", "Q6_K")

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


def has_gguf_magic(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def read_gguf_header(path: Path, *, arrays: bool = False) -> GGUFHeader:
    """Parse the header and tensor table of a GGUF file (not the tensor data).

    Array values (token lists, merges) are skipped and recorded by length unless
    ``arrays`` is true: then they are decoded into lists (what the tokenizer needs).
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            return _parse_gguf_header(f, size, arrays)
    except (struct.error, EOFError, UnicodeDecodeError, ValueError, OverflowError) as exc:
        raise ModelImportError(f"{path}: truncated or corrupt GGUF file ({brief(exc)})") from None
    except OSError as exc:
        raise ModelImportError(f"{path}: cannot read ({brief(exc)})") from None


def _parse_gguf_header(f: BinaryIO, size: int, arrays: bool = False) -> GGUFHeader:
    def read(n: int) -> bytes:
        data = f.read(n)
        if len(data) != n:
            raise EOFError("unexpected end of file")
        return data

    def unpack(fmt: str) -> Any:
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
            if arrays and item_type in _GGUF_SCALARS:
                import numpy as np

                fmt = _GGUF_SCALARS[item_type]
                return np.frombuffer(read(count * struct.calcsize(fmt)), dtype=np.dtype(fmt)).tolist()
            if arrays and item_type == 8:
                return [string() for _ in range(count)]
            if item_type in _GGUF_SCALARS:
                f.seek(count * struct.calcsize(_GGUF_SCALARS[item_type]), 1)
            elif item_type == 8:
                for _ in range(count):
                    n = unpack("<Q")
                    if n > size:
                        raise ValueError("string length out of range")
                    f.seek(n, 1)
            else:  # nested arrays: not used by llama.cpp's writers
                values = [skip_value(item_type) for _ in range(count)]
                if arrays:
                    return values
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


def check_gguf_header(path: Path, header: GGUFHeader) -> None:
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


def md_value(metadata: dict[str, Any], key: str, default: Any = None) -> Any:
    """A metadata value as plain Python (0-d arrays, as mx.load gives numbers, unwrapped)."""
    value = metadata.get(key, default)
    if hasattr(value, "tolist"):
        value = value.tolist()
    return value
