"""GGUF tensors decoded from the file's bytes (block layouts of ggml-quants.c) into MLX arrays.

* Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (blocks of 32 weights, one f16 scale, an offset or an
  f16 minimum) become MLX affine weights of 4, 5 or 8 bits, group size 32, without loss:
  every block decodes as ``d * code + m`` with m = -8d, -16d, -128d (exact in float16)
  or the block's own f16 minimum, which is MLX's ``scale * code + bias``.
* Q4_K becomes MLX 4-bit, group size 32: each 32-weight sub-block's scale ``d * sc`` and
  minimum ``dmin * m`` are rounded once to float16, the codes are reused as they are.
* Q6_K and Q2_K have 16-weight sub-blocks with a scale each; MLX's smallest group is 32,
  so no MLX quantized layout holds them exactly: they are decoded to float16 (each weight
  rounded once, a relative error of at most 2**-11, far below their quantization step).
* F32 and F16 are kept; BF16 becomes float16 (refused if a value overflows it).

MLX packs codes as one little-endian bit stream in uint32 words (``mx.quantize``'s layout).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tui.hub.gguf.header import GGML_TYPES, GGUFTensor
from hermes_tui.hub.import_common import ModelImportError

if TYPE_CHECKING:  # numpy and mlx are imported where used: importing this module loads neither
    import mlx.core as mx
    from numpy.typing import NDArray

    Array = NDArray[Any]

# type -> (bits of the MLX codes, offset of the f16 minimum or None, offset of the high
# bits or None, offset of the codes, the code offset folded into the bias).
_AFFINE_32 = {
    "Q4_0": (4, None, None, 2, 8),
    "Q4_1": (4, 2, None, 4, 0),
    "Q5_0": (5, None, 2, 6, 16),
    "Q5_1": (5, 2, 4, 8, 0),
    "Q8_0": (8, None, None, 2, 128),
}
AFFINE_TYPES = (*_AFFINE_32, "Q4_K")  # kept quantized (MLX affine, group size 32)
FLOAT16_TYPES = ("Q2_K", "Q6_K")  # decoded to float16
_CHUNK_WEIGHTS = 1 << 23  # decode this many weights at a time (bounded scratch memory)
_BLOCKS = {name: (block, nbytes) for name, block, nbytes in GGML_TYPES.values()}  # name -> (weights, bytes)


def _raw_rows(path: Path, t: GGUFTensor, rows: int | None = None) -> Array:
    """The tensor's bytes as a (rows, bytes_per_row) uint8 memmap."""
    import numpy as np

    n_rows = 1
    for d in t.shape[:-1]:
        n_rows *= d
    row_bytes = t.nbytes // max(n_rows, 1)
    take = n_rows if rows is None else min(rows, n_rows)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=t.offset, shape=(take, row_bytes))


def _f16(blocks: Array, start: int) -> Array:
    import numpy as np

    return np.ascontiguousarray(blocks[..., start:start + 2]).view(np.float16).astype(np.float32)


def _pack(codes: Array, bits: int) -> Array:
    """(rows, cols) uint8 codes < 2**bits -> MLX's packing: a little-endian bit stream of
    ``bits`` per code in uint32 words (eight codes fill ``bits`` bytes)."""
    import numpy as np

    rows, cols = codes.shape
    if bits == 8:
        return np.ascontiguousarray(codes.astype(np.uint8)).view("<u4")
    if bits == 4:
        pairs = codes[:, 0::2] | (codes[:, 1::2] << 4)
        return np.ascontiguousarray(pairs.astype(np.uint8)).view("<u4")
    eights = codes.reshape(rows, cols // 8, 8).astype("<u8")
    stream = np.zeros((rows, cols // 8), dtype="<u8")
    for i in range(8):
        stream |= eights[..., i] << np.uint64(bits * i)
    packed = stream.view(np.uint8).reshape(rows, cols // 8, 8)[..., :bits]
    return np.ascontiguousarray(packed).reshape(rows, cols * bits // 8).view("<u4")


def _blocks(raw: Array, t: GGUFTensor) -> Array:
    """(rows, blocks per row, bytes per block) view of a chunk of rows."""
    return raw.reshape(raw.shape[0], -1, _BLOCKS[t.type_name][1])


def _affine_32(blocks: Array, type_name: str) -> tuple[Array, Array, Array]:
    """Codes (rows, cols) and per-block scales and biases (rows, cols/32) of a 32-block type."""
    import numpy as np

    bits, min_at, high_at, codes_at, offset = _AFFINE_32[type_name]
    rows, nb, _ = blocks.shape
    d = _f16(blocks, 0)
    qs = blocks[..., codes_at:]
    if bits == 8:
        codes = (qs.view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    else:  # 16 bytes: low nibbles are weights 0-15, high nibbles 16-31
        codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)
    if high_at is not None:  # bit j of the u32 is the fifth bit of weight j
        qh = np.ascontiguousarray(blocks[..., high_at:high_at + 4]).view("<u4")
        codes = codes | (((qh >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.uint8)
    bias = _f16(blocks, min_at) if min_at is not None else -float(offset) * d
    return codes.reshape(rows, nb * 32), d.reshape(rows, nb), bias.reshape(rows, nb)


def _q4_k(blocks: Array) -> tuple[Array, Array, Array]:
    """Q4_K: per 256 weights f16 d, f16 dmin, 12 bytes of 6-bit sub-block scales and mins,
    128 bytes of codes in 32-byte chunks (low nibbles: sub-block 2c, high: 2c + 1).
    Sub-block j decodes as ``d * sc[j] * q - dmin * m[j]``."""
    import numpy as np

    rows, nb, _ = blocks.shape
    d, dmin = _f16(blocks, 0), _f16(blocks, 2)  # (rows, nb, 1)
    sc = blocks[..., 4:16].astype(np.uint8)
    scale6 = np.concatenate([sc[..., 0:4] & 63, (sc[..., 8:12] & 0x0F) | ((sc[..., 0:4] >> 6) << 4)], axis=-1)
    min6 = np.concatenate([sc[..., 4:8] & 63, (sc[..., 8:12] >> 4) | ((sc[..., 4:8] >> 6) << 4)], axis=-1)
    qs = blocks[..., 16:].reshape(rows, nb, 4, 1, 32)
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=3).reshape(rows, nb * 256)
    return codes, (d * scale6).reshape(rows, nb * 8), -(dmin * min6).reshape(rows, nb * 8)


def _q6_k(blocks: Array) -> Array:
    """Q6_K: per 256 weights 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8
    sub-block scales, f16 d. Weight = d * sc[i // 16] * (q - 32), ggml's order of operations."""
    import numpy as np

    rows, nb, _ = blocks.shape
    ql, qh = blocks[..., 0:128], blocks[..., 128:192]
    sc = np.ascontiguousarray(blocks[..., 192:208]).view(np.int8).astype(np.float32)
    d = _f16(blocks, 208)
    halves = []
    for n in range(2):
        lo, hi = ql[..., 64 * n:64 * n + 64], qh[..., 32 * n:32 * n + 32]
        halves += [
            (lo[..., 0:32] & 0x0F) | ((hi & 3) << 4),
            (lo[..., 32:64] & 0x0F) | (((hi >> 2) & 3) << 4),
            (lo[..., 0:32] >> 4) | (((hi >> 4) & 3) << 4),
            (lo[..., 32:64] >> 4) | (((hi >> 6) & 3) << 4),
        ]
    q = np.concatenate(halves, axis=-1).astype(np.float32) - 32  # (rows, nb, 256)
    scale = np.repeat(d * sc, 16, axis=-1)
    return (scale * q).reshape(rows, nb * 256)


def _q2_k(blocks: Array) -> Array:
    """Q2_K: per 256 weights 16 bytes of 4-bit scale / 4-bit min pairs, 64 bytes of 2-bit
    codes, f16 d and dmin. Each 32-byte half holds 128 weights, 32 per shift 0, 2, 4, 6;
    weight i = d * (sc[i // 16] & 15) * q - dmin * (sc[i // 16] >> 4)."""
    import numpy as np

    rows, nb, _ = blocks.shape
    sc, qs = blocks[..., 0:16], blocks[..., 16:80]
    d, dmin = _f16(blocks, 80), _f16(blocks, 82)
    parts = [(qs[..., 32 * n:32 * n + 32] >> shift) & 3 for n in range(2) for shift in (0, 2, 4, 6)]
    q = np.concatenate(parts, axis=-1).astype(np.float32)
    dl = np.repeat(d * (sc & 0x0F).astype(np.float32), 16, axis=-1)
    ml = np.repeat(dmin * (sc >> 4).astype(np.float32), 16, axis=-1)
    weights: Array = dl * q - ml
    return weights.reshape(rows, nb * 256)


def _to_f16(values: Array, t: GGUFTensor, path: Path) -> Array:
    import numpy as np

    with np.errstate(over="ignore"):
        out = values.astype(np.float16)
    if not np.isfinite(out).all():
        raise ModelImportError(f"{path.name}: {t.type_name} tensor {t.name} overflows float16")
    return out


def _row_chunks(raw: Array, cols: int) -> Iterator[Array]:
    step = max(1, _CHUNK_WEIGHTS // max(cols, 1))
    for start in range(0, raw.shape[0], step):
        yield raw[start:start + step]


def tensor_to_mlx(path: Path, t: GGUFTensor) -> dict[str, mx.array]:
    """The tensor as MLX arrays: {"weight": w} for dense ones, plus "scales" and "biases"
    for the quantized ones (``w`` then holds the packed uint32 codes)."""
    import mlx.core as mx
    import numpy as np

    kind = t.type_name
    cols = t.shape[-1] if t.shape else 1
    raw = _raw_rows(path, t)
    if kind == "F32":
        return {"weight": mx.array(np.asarray(raw).view("<f4").reshape(t.shape))}
    if kind == "F16":
        return {"weight": mx.array(np.asarray(raw).view("<f2").reshape(t.shape))}
    if kind == "BF16":
        wide = np.asarray(raw).view("<u2").astype("<u4") << np.uint32(16)
        return {"weight": mx.array(_to_f16(wide.view("<f4"), t, path).reshape(t.shape))}
    if kind not in AFFINE_TYPES + FLOAT16_TYPES or cols % _BLOCKS[kind][0]:
        raise ModelImportError(f"{path.name}: cannot convert {kind} tensor {t.name} of shape {t.shape}")
    if kind in FLOAT16_TYPES:
        decode = _q6_k if kind == "Q6_K" else _q2_k
        parts = [_to_f16(decode(_blocks(chunk, t)), t, path) for chunk in _row_chunks(raw, cols)]
        return {"weight": mx.array(np.concatenate(parts).reshape(t.shape))}
    if len(t.shape) != 2:
        raise ModelImportError(f"{path.name}: {kind} tensor {t.name} has an unsupported shape {t.shape}")
    bits = 4 if kind == "Q4_K" else _AFFINE_32[kind][0]
    packed, scales, biases = [], [], []
    for chunk in _row_chunks(raw, cols):
        blocks = _blocks(chunk, t)
        codes, scale, bias = _q4_k(blocks) if kind == "Q4_K" else _affine_32(blocks, kind)
        packed.append(_pack(codes, bits))
        scales.append(_to_f16(scale, t, path))
        biases.append(_to_f16(bias, t, path))
    return {
        "weight": mx.array(np.concatenate(packed)),
        "scales": mx.array(np.concatenate(scales)),
        "biases": mx.array(np.concatenate(biases)),
    }


def q4_k_to_mlx(path: Path, t: GGUFTensor) -> tuple[mx.array, mx.array, mx.array]:
    """A Q4_K tensor as MLX affine 4-bit, group size 32: (packed, scales, biases)."""
    if t.type_name != "Q4_K" or len(t.shape) != 2 or t.shape[1] % 256:
        raise ModelImportError(f"Q4_K tensor {t.name} has an unsupported shape {t.shape}")
    out = tensor_to_mlx(path, t)
    return out["weight"], out["scales"], out["biases"]


def mlx_bits(type_name: str) -> int | None:
    """Bits of the MLX affine codes a GGUF type becomes, None if it becomes a dense array."""
    if type_name == "Q4_K":
        return 4
    return _AFFINE_32[type_name][0] if type_name in _AFFINE_32 else None
