"""Quantized tensors read from the file's bytes: Q4_K repacked into MLX 4-bit without loss,
and a spot check of what MLX decodes."""

from __future__ import annotations

from pathlib import Path

from hermes_tui.hub.gguf.header import MLX_QUANTIZED, GGUFTensor
from hermes_tui.hub.import_common import ModelImportError


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


def spot_check(path: Path, t: GGUFTensor, weights: dict) -> None:
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
