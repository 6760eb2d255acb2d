"""``hermes-tui models import``: MLX folders and GGUF files into the models folder.

The GGUF files are made here from the tiny test model with the ``gguf`` package, the way
llama.cpp's ``convert_hf_to_gguf.py`` writes a Llama: llama.* metadata, the tokenizer
(tokens, merges, token types, special ids, chat template) and the tensors under llama.cpp
names with the Q/K rows permuted for its RoPE. The import must give back the original
model: same weights, same greedy tokens, same tokenizer ids, same chat prompt.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
mx = pytest.importorskip("mlx.core")

from gguf import GGMLQuantizationType as Q  # noqa: E402
from support.gguf_files import (  # noqa: E402
    add_hyperparameters,
    gguf_tensor_name,
    llama_cpp_permute,
    quantize_q4_k,
    write_gguf,
)

from hermes_tui.cli.models import add_import_parser  # noqa: E402
from hermes_tui.hub.gguf import convert as gguf_convert  # noqa: E402
from hermes_tui.hub.gguf import header as gguf_header  # noqa: E402
from hermes_tui.hub.gguf import quants as gguf_quants  # noqa: E402
from hermes_tui.hub.gguf import tokenizer as gguf_tokenizer  # noqa: E402
from hermes_tui.hub.import_common import ModelImportError  # noqa: E402
from hermes_tui.hub.model_import import import_model  # noqa: E402

PROMPT_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Please read the file, fix the failing test, and run the test suite again."},
]
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "def fibonacci(n: int) -> int:\n    a, b = 0, 1\n    return a\n",
    "  multiple   spaces\tand\ttabs\n\n\nnewlines  ",
    "Numbers 0 1 42 3.14 1000000 and symbols -> => && || {\"role\": \"user\"}",
    "Unicode: café, naïve, 日本語, emoji 🦙🚀",
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
]
GEN_TOKENS = 24


# --- writing a GGUF the way llama.cpp does ------------------------------------------------


def dequantized_reference(gguf_path: Path, model_dir: Path, out_dir: Path, permuted: bool = True) -> Path:
    """An fp32 MLX folder holding exactly what the GGUF's quantized tensors decode to
    (gguf's reference dequantization), un-permuted by the test's own code (llama only)."""
    cfg = json.loads((model_dir / "config.json").read_text())
    reader = gguf.GGUFReader(str(gguf_path))
    inverse = {gguf_tensor_name(k): k for k in mx.load(str(model_dir / "model.safetensors"))}
    weights = {}
    for t in reader.tensors:
        data = gguf.quants.dequantize(np.array(t.data), t.tensor_type).astype(np.float32)
        data = data.reshape([int(d) for d in reversed(t.shape)])
        name = inverse[t.name]
        n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        if permuted and name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = n_head if "q_proj" in name else n_kv
            data = data.reshape(heads, -1, 2, data.shape[1]).swapaxes(1, 2).reshape(data.shape)
        weights[name] = mx.array(data)
    shutil.copytree(model_dir, out_dir)
    mx.save_safetensors(str(out_dir / "model.safetensors"), weights)
    return out_dir


# --- running models -----------------------------------------------------------------------


def load(folder: Path):
    from mlx_lm import load as mlx_load

    model, tokenizer = mlx_load(str(folder))
    model.set_dtype(mx.float32)  # as MlxRuntime does on CPU
    return model, tokenizer


def prompt_ids(tokenizer) -> list[int]:
    text = tokenizer.apply_chat_template(PROMPT_MESSAGES, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(text, add_special_tokens=False))


def greedy_tokens(model, tokenizer, ids: list[int], n: int = GEN_TOKENS) -> list[int]:
    from mlx_lm import stream_generate

    return [r.token for r in stream_generate(model, tokenizer, mx.array(ids), max_tokens=n)]


def logits(model, ids: list[int]) -> np.ndarray:
    return np.array(model(mx.array([ids])).astype(mx.float32))[0]


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gguf")


@pytest.fixture(scope="module")
def f32_gguf(tiny_model, gguf_dir) -> Path:
    return write_gguf(tiny_model.fp32, gguf_dir / "tiny-f32.gguf")


@pytest.fixture(scope="module")
def original(tiny_model, hf_offline_env):
    model, tokenizer = load(tiny_model.fp32)
    ids = prompt_ids(tokenizer)
    return model, tokenizer, ids


def assert_no_leftovers(root: Path, allowed: set[str] = frozenset()) -> None:
    left = {p.name for p in root.iterdir()} - set(allowed) if root.exists() else set()
    assert not left, f"left behind in {root}: {left}"


# --- GGUF: F32 is exact ---------------------------------------------------------------------


def test_f32_gguf_imports_to_the_original_model(tiny_model, f32_gguf, original, tmp_path):
    stages = []
    dest = import_model(f32_gguf, dest_root=tmp_path, progress=lambda s, d, t: stages.append((s, d, t)))
    assert dest == tmp_path / "tiny-f32"  # default name: the file stem
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        p.name for p in dest.iterdir()
    }
    assert_no_leftovers(tmp_path, {"tiny-f32"})
    assert {s for s, _, _ in stages} == {"reading", "converting", "writing"}
    assert stages[-1][1] == stages[-1][2]  # finished

    assert_same_config(dest, tiny_model.fp32, "head_dim")

    # Bit-identical weights: names mapped back, Q/K permutation undone.
    want = mx.load(str(tiny_model.fp32 / "model.safetensors"))
    got = mx.load(str(dest / "model.safetensors"))
    assert set(got) == set(want)
    for name in want:
        assert mx.array_equal(got[name], want[name]).item(), name

    model, tokenizer, ids = original
    imported, imported_tok = load(dest)
    assert prompt_ids(imported_tok) == ids
    assert np.allclose(logits(imported, ids), logits(model, ids), atol=1e-5)
    assert greedy_tokens(imported, imported_tok, ids) == greedy_tokens(model, tokenizer, ids)


def test_the_rope_permutation_matters(tiny_model, f32_gguf, original, tmp_path):
    """Why the permutation is undone, and that the test above would catch it if not:
    the GGUF's raw (permuted) Q/K weights give the original model only with llama.cpp's
    interleaved RoPE (``rope_traditional: true``); with the HF layout's RoPE they differ."""
    model, _, ids = original
    dest = import_model(f32_gguf, "unpermuted", dest_root=tmp_path)
    cfg = json.loads((dest / "config.json").read_text())
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    weights = mx.load(str(dest / "model.safetensors"))
    permuted = {
        k: mx.array(llama_cpp_permute(np.array(v), n_head, n_head if "q_proj" in k else n_kv))
        if k.endswith(("q_proj.weight", "k_proj.weight")) else v
        for k, v in weights.items()
    }
    mx.save_safetensors(str(dest / "model.safetensors"), permuted)
    wrong, _ = load(dest)
    assert not np.allclose(logits(wrong, ids), logits(model, ids), atol=1e-3)
    cfg["rope_traditional"] = True
    (dest / "config.json").write_text(json.dumps(cfg))
    traditional, _ = load(dest)
    assert np.allclose(logits(traditional, ids), logits(model, ids), atol=1e-4)


def test_gguf_tokenizer_and_chat_template_match_the_original(tiny_model, f32_gguf, tmp_path, hf_offline_env):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    dest = import_model(f32_gguf, "tok", dest_root=tmp_path)
    want = Tokenizer.from_file(str(tiny_model.fp32 / "tokenizer.json"))
    got = Tokenizer.from_file(str(dest / "tokenizer.json"))
    for text in TEXTS:
        ids = want.encode(text).ids
        assert got.encode(text).ids == ids, text
        assert got.decode(ids, skip_special_tokens=False) == want.decode(ids, skip_special_tokens=False)
    assert got.encode("<|im_end|>").ids == [2]

    want_hf = AutoTokenizer.from_pretrained(str(tiny_model.fp32))
    got_hf = AutoTokenizer.from_pretrained(str(dest))
    rendered = got_hf.apply_chat_template(PROMPT_MESSAGES, add_generation_prompt=True, tokenize=False)
    assert rendered == want_hf.apply_chat_template(PROMPT_MESSAGES, add_generation_prompt=True, tokenize=False)
    assert got_hf.encode(rendered, add_special_tokens=False) == want_hf.encode(rendered, add_special_tokens=False)
    for text in TEXTS:
        assert got_hf.encode(text) == want_hf.encode(text), text  # no BOS added to either
    assert got_hf.eos_token == "<|im_end|>" and got_hf.pad_token == "<|endoftext|>"


# --- GGUF: quantized ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "qtype, bits, tolerance",
    [(Q.Q8_0, 8, 1e-3), (Q.Q4_0, 4, 1e-3), (Q.Q4_1, 4, 1e-3), (Q.Q4_K, 4, 2e-3)],
    ids=["Q8_0", "Q4_0", "Q4_1", "Q4_K"],
)
def test_quantized_gguf_stays_quantized_and_decodes_like_llama_cpp(
    tiny_model, gguf_dir, original, tmp_path, qtype, bits, tolerance
):
    path = write_gguf(tiny_model.fp32, gguf_dir / f"tiny-{qtype.name}.gguf", qtype)
    dest = import_model(path, dest_root=tmp_path / "models")
    cfg = json.loads((dest / "config.json").read_text())
    assert cfg["quantization"] == {"group_size": 32, "bits": bits, "mode": "affine"}
    assert cfg["imported_from"]["tensor_types"] == {"F32": 9, qtype.name: 29}
    weights = mx.load(str(dest / "model.safetensors"))
    assert weights["model.layers.0.self_attn.q_proj.weight"].dtype == mx.uint32
    assert "model.embed_tokens.scales" in weights

    import mlx.nn as nn

    model, tokenizer, ids = original
    imported, imported_tok = load(dest)
    assert isinstance(imported.model.layers[0].self_attn.q_proj, nn.QuantizedLinear)
    # Reference: llama.cpp's decoding of the same bytes (gguf.quants.dequantize), as fp32.
    reference, _ = load(dequantized_reference(path, tiny_model.fp32, tmp_path / "reference"))
    got, want = logits(imported, ids), logits(reference, ids)
    assert np.abs(got - want).max() <= tolerance * np.abs(want).max()
    # ...and still close to the unquantized original.
    assert np.corrcoef(got.ravel(), logits(model, ids).ravel())[0, 1] > (0.999 if bits == 8 else 0.95)
    tokens = greedy_tokens(imported, imported_tok, ids)
    assert len(tokens) == GEN_TOKENS
    assert imported_tok.decode(tokens) is not None


def test_mixed_quantization_like_q4_k_m(tiny_model, gguf_dir, original, tmp_path):
    """Real files mix types (Q4_K_M: Q4_K plus Q6_K for attn_v/ffn_down): the most common
    (bits, group) is the default and the others get per-layer entries; F16 stays dense."""
    def type_of(name):
        if name.endswith(("attn_v.weight", "ffn_down.weight")):
            return Q.Q8_0
        if name == "blk.0.attn_output.weight":
            return Q.F16
        return Q.Q4_K

    path = write_gguf(tiny_model.fp32, gguf_dir / "tiny-mixed.gguf", type_of=type_of)
    dest = import_model(path, dest_root=tmp_path / "models")
    quant = json.loads((dest / "config.json").read_text())["quantization"]
    assert quant["bits"] == 4 and quant["group_size"] == 32
    eight = {"group_size": 32, "bits": 8, "mode": "affine"}
    assert quant["model.layers.3.mlp.down_proj"] == eight
    assert quant["model.layers.0.self_attn.v_proj"] == eight
    assert "model.layers.0.self_attn.o_proj" not in quant
    model, _, ids = original
    imported, _ = load(dest)
    reference, _ = load(dequantized_reference(path, tiny_model.fp32, tmp_path / "reference"))
    got, want = logits(imported, ids), logits(reference, ids)
    assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max()


# Reference decoders, one block at a time, written from ggml-quants.c's dequantize_row_*
# (float32 arithmetic in ggml's order of operations).


def _h(block, at: int) -> np.float32:
    return np.float32(np.frombuffer(bytes(block[at:at + 2]), dtype=np.float16)[0])


def _k4_scale_min(j: int, q) -> tuple[int, int]:
    """get_scale_min_k4 of ggml-quants.c."""
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def reference_block(block, kind: str) -> np.ndarray:
    b = [int(x) for x in block]
    y = np.zeros(256 if kind.endswith("_K") else 32, dtype=np.float32)
    f32 = np.float32
    if kind in ("Q4_0", "Q4_1"):
        d = _h(block, 0)
        m, qs = (_h(block, 2), b[4:20]) if kind == "Q4_1" else (None, b[2:18])
        for j in range(16):
            lo, hi = qs[j] & 0x0F, qs[j] >> 4
            if m is None:
                y[j], y[j + 16] = f32(lo - 8) * d, f32(hi - 8) * d
            else:
                y[j], y[j + 16] = f32(lo) * d + m, f32(hi) * d + m
    elif kind in ("Q5_0", "Q5_1"):
        d = _h(block, 0)
        m, qh, qs = (_h(block, 2), b[4:8], b[8:24]) if kind == "Q5_1" else (None, b[2:6], b[6:22])
        qh = int.from_bytes(bytes(qh), "little")
        for j in range(16):
            x0 = (qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)
            x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)
            if m is None:
                y[j], y[j + 16] = f32(x0 - 16) * d, f32(x1 - 16) * d
            else:
                y[j], y[j + 16] = f32(x0) * d + m, f32(x1) * d + m
    elif kind == "Q8_0":
        d = _h(block, 0)
        for j in range(32):
            y[j] = f32(b[2 + j] - 256 if b[2 + j] > 127 else b[2 + j]) * d
    elif kind == "Q4_K":
        d, dmin, scales, q = _h(block, 0), _h(block, 2), b[4:16], b[16:144]
        out, is_ = 0, 0
        for _ in range(4):  # 64 weights at a time
            sc, mn = _k4_scale_min(is_, scales)
            d1, m1 = d * f32(sc), dmin * f32(mn)
            sc, mn = _k4_scale_min(is_ + 1, scales)
            d2, m2 = d * f32(sc), dmin * f32(mn)
            for i in range(32):
                y[out + i] = d1 * f32(q[i] & 0x0F) - m1
            for i in range(32):
                y[out + 32 + i] = d2 * f32(q[i] >> 4) - m2
            out, is_, q = out + 64, is_ + 2, q[32:]
    elif kind == "Q6_K":
        ql, qh, d = b[0:128], b[128:192], _h(block, 208)
        sc = [x - 256 if x > 127 else x for x in b[192:208]]
        for n in range(2):
            for i in range(32):
                is_ = i // 16
                q1 = ((ql[i] & 0x0F) | (((qh[i] >> 0) & 3) << 4)) - 32
                q2 = ((ql[i + 32] & 0x0F) | (((qh[i] >> 2) & 3) << 4)) - 32
                q3 = ((ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4)) - 32
                q4 = ((ql[i + 32] >> 4) | (((qh[i] >> 6) & 3) << 4)) - 32
                for k, q in enumerate((q1, q2, q3, q4)):
                    y[128 * n + i + 32 * k] = d * f32(sc[is_ + 2 * k]) * f32(q)
            ql, qh, sc = ql[64:], qh[32:], sc[8:]
    elif kind == "Q2_K":
        scales, q, d, dmin = b[0:16], b[16:80], _h(block, 80), _h(block, 82)
        out, is_ = 0, 0
        for _ in range(2):
            for shift in (0, 2, 4, 6):
                for half in (0, 16):
                    sc = scales[is_]
                    is_ += 1
                    dl, ml = d * f32(sc & 0x0F), dmin * f32(sc >> 4)
                    for i in range(16):
                        y[out] = dl * f32((q[i + half] >> shift) & 3) - ml
                        out += 1
            q = q[32:]
    else:
        raise AssertionError(kind)
    return y


# Where each type keeps its f16 scale (and minimum): set to sane values in random blocks.
SCALE_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
                "Q4_K": (0, 2), "Q6_K": (208,), "Q2_K": (80, 82)}
MLX_BITS = {"Q4_0": 4, "Q4_1": 4, "Q5_0": 5, "Q5_1": 5, "Q8_0": 8, "Q4_K": 4, "Q6_K": None, "Q2_K": None}


def random_blocks(kind: str, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Random bytes in ``kind``'s block layout (every code pattern occurs), sane f16 scales."""
    qtype = Q[kind]
    block, block_bytes = gguf.constants.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(rows, cols // block, block_bytes), dtype=np.uint8)
    for at in SCALE_FIELDS[kind]:
        values = rng.uniform(-0.05, 0.05, size=(rows, cols // block, 1)).astype(np.float16)
        raw[..., at:at + 2] = values.view(np.uint8)
    return raw.reshape(rows, -1)


def write_one_tensor(path: Path, name: str, raw: np.ndarray, kind: str) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=Q[kind])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("kind", list(MLX_BITS))
def test_block_types_decode_like_ggml(tmp_path, kind):
    """Each type read from the file's bytes matches ggml's decoding of those bytes: the
    32-weight block types exactly, as MLX affine codes; Q4_K but for its scales rounded
    to float16; Q6_K and Q2_K as float16 (one rounding per weight)."""
    rows, cols = 8, 512
    raw = random_blocks(kind, rows, cols)
    block_bytes = gguf.constants.GGML_QUANT_SIZES[Q[kind]][1]
    want = np.stack([
        np.concatenate([reference_block(blk, kind) for blk in row.reshape(-1, block_bytes)]) for row in raw
    ])
    # The reference agrees with the gguf package's (vectorised) decoder.
    assert np.allclose(gguf.quants.dequantize(raw, Q[kind]), want, rtol=1e-6, atol=1e-9)

    path = write_one_tensor(tmp_path / f"{kind}.gguf", "blk.0.ffn_up.weight", raw, kind)
    (tensor,) = gguf_header.read_gguf_header(path).tensors
    assert (tensor.type_name, tensor.shape) == (kind, (rows, cols))
    out = gguf_quants.tensor_to_mlx(path, tensor)
    bits = MLX_BITS[kind]
    if bits is None:
        assert set(out) == {"weight"} and out["weight"].dtype == mx.float16
        got = np.array(out["weight"].astype(mx.float32))
        assert np.allclose(got, want, rtol=2.0**-11, atol=1e-7)
        return
    assert set(out) == {"weight", "scales", "biases"}
    assert out["weight"].dtype == mx.uint32 and out["weight"].shape == (rows, cols * bits // 32)
    assert out["scales"].shape == out["biases"].shape == (rows, cols // 32)
    got = np.array(mx.dequantize(out["weight"], out["scales"].astype(mx.float32),
                                 out["biases"].astype(mx.float32), group_size=32, bits=bits))
    if kind == "Q4_K":
        scale = np.repeat(np.array(out["scales"].astype(mx.float32)), 32, axis=1)
        assert np.all(np.abs(got - want) <= 2.0**-11 * (15 * np.abs(scale) + np.abs(want)) + 1e-7)
    else:
        assert np.allclose(got, want, rtol=1e-6, atol=1e-9)
        if kind in ("Q4_0", "Q5_0", "Q8_0"):
            assert np.array_equal(got, want)  # d * (q - offset): exact in float32


def test_q6_k_overflowing_float16_is_refused(tmp_path):
    raw = random_blocks("Q6_K", 2, 256)
    raw[0, 208:210] = np.array([60000.0], dtype=np.float16).view(np.uint8)
    path = write_one_tensor(tmp_path / "big.gguf", "blk.0.ffn_down.weight", raw, "Q6_K")
    (tensor,) = gguf_header.read_gguf_header(path).tensors
    with pytest.raises(ModelImportError, match=r"big.gguf: Q6_K tensor blk.0.ffn_down.weight overflows float16"):
        gguf_quants.tensor_to_mlx(path, tensor)


def test_pre_tokenizer_regexes_match_transformers():
    """The split regexes are llama.cpp's/Hugging Face's; cross-check with transformers' copies."""
    mapping = pytest.importorskip("transformers.integrations.gguf.gguf_tokenizer_mapping")
    splits = getattr(mapping, "GGUF_PRE_TOKENIZER_SPLITS", None)
    if splits is None:
        pytest.skip("this transformers has no GGUF pre-tokenizer table")
    assert splits["llama-bpe"] == gguf_tokenizer._LLAMA3_SPLIT
    assert splits["qwen2"] == gguf_tokenizer._QWEN2_SPLIT
    for name, family in gguf_tokenizer._SPLIT_FAMILIES.items():
        if name in splits:
            want = gguf_tokenizer._LLAMA3_SPLIT if family == "llama3" else gguf_tokenizer._QWEN2_SPLIT
            assert splits[name] == want, name


def test_q4_k_repacking_is_lossless_against_the_reference_decoder(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 512)).astype(np.float32)
    raw = quantize_q4_k(x)
    w = gguf.GGUFWriter(str(tmp_path / "t.gguf"), "llama")
    w.add_tensor("blk.0.attn_q.weight", raw, raw_shape=raw.shape, raw_dtype=Q.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    header = gguf_header.read_gguf_header(tmp_path / "t.gguf")
    (tensor,) = header.tensors
    assert (tensor.type_name, tensor.shape) == ("Q4_K", (16, 512))
    packed, scales, biases = gguf_quants.q4_k_to_mlx(tmp_path / "t.gguf", tensor)
    got = np.array(mx.dequantize(packed, scales.astype(mx.float32), biases.astype(mx.float32), group_size=32, bits=4))
    want = gguf.quants.dequantize(raw, Q.Q4_K)
    # Exact but for float16 scales/biases.
    assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max()


def test_ggml_type_table_matches_the_gguf_package():
    for type_id, (name, block, block_bytes) in gguf_header.GGML_TYPES.items():
        qtype = Q[name]
        assert qtype.value == type_id
        assert gguf.constants.GGML_QUANT_SIZES[qtype] == (block, block_bytes)


# --- GGUF: qwen2 (Qwen2.5) --------------------------------------------------------------------


def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    """A simple Q6_K quantizer (the gguf package has none): ggml's block_q6_K layout.

    Per 256 weights: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8
    scales (one per 16 weights), f16 d. Within each 128-weight half, byte l of the low
    nibbles holds weights l (low) and l + 64 (high), byte l + 32 weights l + 32 and l + 96;
    high byte l holds the top bits of l, l + 32, l + 64, l + 96. Accuracy does not matter.
    """
    rows, cols = x.shape
    sub = x.reshape(rows, cols // 256, 16, 16).astype(np.float32)
    s = np.abs(sub).max(axis=-1) / 31
    d = (s.max(axis=-1, keepdims=True) / 127).astype(np.float16)
    safe = lambda v: np.where(v == 0, 1, v)  # noqa: E731
    sc = np.clip(np.round(s / safe(d.astype(np.float32))), -128, 127).astype(np.int8)
    eff = d.astype(np.float32) * sc
    q = (np.clip(np.round(sub / safe(eff)[..., None]), -32, 31) + 32).astype(np.uint8).reshape(rows, -1, 2, 128)
    ql = np.concatenate([(q[..., 0:32] & 15) | ((q[..., 64:96] & 15) << 4),
                         (q[..., 32:64] & 15) | ((q[..., 96:128] & 15) << 4)], axis=-1)
    qh = (q[..., 0:32] >> 4) | ((q[..., 32:64] >> 4) << 2) | ((q[..., 64:96] >> 4) << 4) | ((q[..., 96:128] >> 4) << 6)
    blocks = np.concatenate([
        ql.reshape(rows, -1, 128), qh.reshape(rows, -1, 64), sc.view(np.uint8), d.view(np.uint8).reshape(rows, -1, 2),
    ], axis=-1)
    return blocks.reshape(rows, -1)


def like_qwen25_05b_q4_k_m(name: str) -> Q:
    """The types of the real Qwen2.5-Coder-0.5B Q4_K_M file: Q5_0 where rows are not a
    multiple of 256, Q8_0 for output and half the attn_v, Q6_K / Q4_K for ffn_down."""
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    if name == "output.weight":
        return Q.Q8_0
    if name.endswith("attn_v.weight"):
        return Q.Q8_0 if layer % 2 == 0 else Q.Q5_0
    if name.endswith("ffn_down.weight"):
        return Q.Q6_K if layer % 2 == 0 else Q.Q4_K
    return Q.Q5_0


SHAPE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
              "num_key_value_heads", "vocab_size", "rms_norm_eps", "rope_theta", "max_position_embeddings",
              "tie_word_embeddings", "eos_token_id", "pad_token_id")


def assert_same_config(imported: Path, original: Path, *more_keys: str) -> None:
    """The imported folder's config.json says what the original's does, unquantized, no rope scaling."""
    want = json.loads((original / "config.json").read_text())
    cfg = json.loads((imported / "config.json").read_text())
    for key in (*SHAPE_KEYS, *more_keys):
        assert cfg[key] == want[key], key
    assert "quantization" not in cfg and "rope_scaling" not in cfg


def write_qwen2_gguf(model_dir: Path, out: Path, type_of=None) -> Path:
    """A qwen2 model folder as llama.cpp's Qwen2Model writes it: qwen2.* metadata, the
    ``qwen2`` pre-tokenizer, tensors under llama.cpp names with Q/K *not* permuted and the
    Q/K/V biases as F32; ``output.weight`` only when the embeddings are untied."""
    from tokenizers import Tokenizer

    cfg = json.loads((model_dir / "config.json").read_text())
    tok_cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    w = gguf.GGUFWriter(str(out), "qwen2")
    w.add_name("tiny qwen2")
    add_hyperparameters(w, cfg)
    w.add_file_type(15 if type_of else 0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    reverse = {i: t for t, i in tokenizer.get_vocab(with_added_tokens=True).items()}
    added = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    w.add_token_list([reverse.get(i, f"[PAD{i}]") for i in range(cfg["vocab_size"])])
    w.add_token_types([gguf.TokenType.CONTROL if i in added else gguf.TokenType.NORMAL if i in reverse
                       else gguf.TokenType.UNUSED for i in range(cfg["vocab_size"])])
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_pad_token_id(cfg["pad_token_id"])
    w.add_bos_token_id(cfg["pad_token_id"])  # Qwen2.5 files: bos = <|endoftext|>, not added
    w.add_add_bos_token(False)
    w.add_chat_template(tok_cfg["chat_template"])
    for name, arr in sorted(mx.load(str(model_dir / "model.safetensors")).items()):
        data = np.array(arr.astype(mx.float32))
        kind = type_of(gguf_tensor_name(name)) if type_of and data.ndim == 2 else Q.F32
        if kind == Q.F32:
            w.add_tensor(gguf_tensor_name(name), data)
            continue
        if kind in (Q.Q4_K, Q.Q6_K):
            raw = quantize_q4_k(data) if kind == Q.Q4_K else quantize_q6_k(data)
        else:
            raw = gguf.quants.quantize(data, kind)
        w.add_tensor(gguf_tensor_name(name), raw, raw_shape=raw.shape, raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


@pytest.fixture(scope="module", params=["tied", "untied"])
def qwen2_model(request, tiny_model, tmp_path_factory) -> Path:
    """The tiny model as an mlx_lm qwen2 folder: random Q/K/V biases (large enough to
    matter) and, untied, an lm_head of its own."""
    out = tmp_path_factory.mktemp("qwen2") / f"qwen2-{request.param}"
    shutil.copytree(tiny_model.fp32, out)
    cfg = json.loads((out / "config.json").read_text())
    tied = request.param == "tied"
    cfg.update(model_type="qwen2", architectures=["Qwen2ForCausalLM"], tie_word_embeddings=tied,
               rope_theta=1000000.0)  # Qwen2.5's (not the 10000 default)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    weights = dict(mx.load(str(out / "model.safetensors")))
    rng = np.random.default_rng(1)
    for i in range(cfg["num_hidden_layers"]):
        for proj in ("q_proj", "k_proj", "v_proj"):
            rows = weights[f"model.layers.{i}.self_attn.{proj}.weight"].shape[0]
            weights[f"model.layers.{i}.self_attn.{proj}.bias"] = mx.array(rng.normal(0, 0.5, rows).astype(np.float32))
    if not tied:
        embed = weights["model.embed_tokens.weight"]
        std = float(np.array(embed).std())
        weights["lm_head.weight"] = mx.array(rng.normal(0, std, embed.shape).astype(np.float32))
    mx.save_safetensors(str(out / "model.safetensors"), weights)
    return out


def test_qwen2_f32_gguf_imports_to_the_original_model(qwen2_model, gguf_dir, tmp_path, hf_offline_env):
    path = write_qwen2_gguf(qwen2_model, gguf_dir / f"{qwen2_model.name}-f32.gguf")
    dest = import_model(path, dest_root=tmp_path)
    assert_same_config(dest, qwen2_model, "architectures")

    # Bit-identical weights, biases included, Q/K as they were (no permutation for qwen2).
    want = mx.load(str(qwen2_model / "model.safetensors"))
    got = mx.load(str(dest / "model.safetensors"))
    assert set(got) == set(want)
    for name in want:
        assert mx.array_equal(got[name], want[name]).item(), name

    model, tokenizer = load(qwen2_model)
    imported, imported_tok = load(dest)
    ids = prompt_ids(tokenizer)
    assert np.allclose(logits(imported, ids), logits(model, ids), atol=1e-5)
    assert greedy_tokens(imported, imported_tok, ids) == greedy_tokens(model, tokenizer, ids)

    # The chat template is carried over; the qwen2 pre-tokenizer splits digits one by one.
    tok_cfg = json.loads((dest / "tokenizer_config.json").read_text())
    assert tok_cfg["chat_template"] == json.loads((qwen2_model / "tokenizer_config.json").read_text())["chat_template"]
    assert tok_cfg["add_bos_token"] is False
    assert prompt_ids(imported_tok) == ids
    from tokenizers import Tokenizer

    pre = Tokenizer.from_file(str(dest / "tokenizer.json")).pre_tokenizer
    pieces = [piece for piece, _ in pre.pre_tokenize_str("x 12345 it's")]
    assert pieces == ["x", "Ġ", "1", "2", "3", "4", "5", "Ġit", "'s"]  # Llama 3 would give "123", "45"


def test_qwen2_q4_k_m_mix_decodes_like_llama_cpp(qwen2_model, gguf_dir, tmp_path, hf_offline_env):
    """The types of a real Qwen2.5 Q4_K_M file: Q5_0 and Q8_0 stay quantized (5 and 8 bits,
    exact), Q4_K is repacked to 4 bits, Q6_K becomes float16, biases and norms stay F32."""
    import mlx.nn as nn

    path = write_qwen2_gguf(qwen2_model, gguf_dir / f"{qwen2_model.name}-q4_k_m.gguf", like_qwen25_05b_q4_k_m)
    dest = import_model(path, dest_root=tmp_path / "models")
    cfg = json.loads((dest / "config.json").read_text())
    tied = cfg["tie_word_embeddings"]
    assert tied == (qwen2_model.name == "qwen2-tied")
    quant = cfg["quantization"]
    assert (quant["bits"], quant["group_size"]) == (5, 32)
    eight, four = ({"group_size": 32, "bits": b, "mode": "affine"} for b in (8, 4))
    assert quant["model.layers.0.self_attn.v_proj"] == eight and "model.layers.1.self_attn.v_proj" not in quant
    assert quant["model.layers.1.mlp.down_proj"] == four and "model.layers.0.mlp.down_proj" not in quant
    assert ("lm_head" in quant) == (not tied) and (quant.get("lm_head") in (None, eight))
    assert cfg["imported_from"]["tensor_types"] == {
        "F32": 9 + 12, "Q5_0": 1 + 4 * 5 + 2, "Q8_0": 2 + (0 if tied else 1), "Q4_K": 2, "Q6_K": 2,
    }
    weights = mx.load(str(dest / "model.safetensors"))
    assert weights["model.layers.0.mlp.down_proj.weight"].dtype == mx.float16  # Q6_K
    assert weights["model.layers.0.self_attn.q_proj.bias"].dtype == mx.float32

    original, tokenizer = load(qwen2_model)
    imported, imported_tok = load(dest)
    assert isinstance(imported.model.embed_tokens, nn.QuantizedEmbedding)
    assert imported.model.embed_tokens.bits == 5
    assert isinstance(imported.model.layers[0].self_attn.q_proj, nn.QuantizedLinear)
    reference, _ = load(dequantized_reference(path, qwen2_model, tmp_path / "reference", permuted=False))
    ids = prompt_ids(tokenizer)
    got, want = logits(imported, ids), logits(reference, ids)
    assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max()
    assert np.corrcoef(got.ravel(), logits(original, ids).ravel())[0, 1] > 0.95
    assert len(greedy_tokens(imported, imported_tok, ids)) == GEN_TOKENS


def test_qwen2_without_biases_is_refused(qwen2_model, tmp_path):
    src = tmp_path / "nobias"
    shutil.copytree(qwen2_model, src)
    weights = {k: v for k, v in mx.load(str(src / "model.safetensors")).items() if "layers.2.self_attn.k_proj.bias" not in k}
    mx.save_safetensors(str(src / "model.safetensors"), weights)
    path = write_qwen2_gguf(src, tmp_path / "nobias.gguf")
    expect_error(path, "nobias.gguf: layer 2 has no attn_k.bias", root=tmp_path / "models")


# --- the real files of ../shared/realmodels (`pytest -m realmodels`) --------------------------

REALMODELS = Path(os.environ.get("REALMODELS_DIR", Path.home() / ".cache" / "hermes-realmodels")) / "models"


def real_file(name: str) -> Path:
    path = REALMODELS / name
    if not path.is_file():
        message = f"{path} is missing: run ../shared/realmodels/setup first"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def ask(folder: Path, question: str, max_tokens: int = 20) -> str:
    from mlx_lm import generate

    model, tokenizer = load(folder)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                           tokenize=False)
    return generate(model, tokenizer, prompt, max_tokens=max_tokens)


@pytest.mark.realmodels
def test_real_qwen25_coder_05b_q4_k_m(tmp_path, hf_offline_env):
    """The real Qwen2.5-Coder-0.5B-Instruct Q4_K_M file (Q5_0, Q8_0, Q4_K, Q6_K, F32):
    every type decodes like the gguf package's reference, the tokenizer gives Qwen2.5's
    ids, and the model answers through MLX (greedy, ~1 minute on a 2-core CPU)."""
    path = real_file("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    dest = import_model(path, dest_root=tmp_path)
    cfg = json.loads((dest / "config.json").read_text())
    assert (cfg["model_type"], cfg["tie_word_embeddings"], cfg["rope_theta"]) == ("qwen2", False, 1000000.0)
    assert cfg["imported_from"]["tensor_types"] == {"F32": 121, "Q4_K": 12, "Q5_0": 133, "Q6_K": 12, "Q8_0": 13}
    assert (cfg["quantization"]["bits"], cfg["eos_token_id"]) == (5, 151645)

    reader = gguf.GGUFReader(str(path))
    by_name = {t.name: t for t in reader.tensors}
    weights = mx.load(str(dest / "model.safetensors"))
    for gguf_name, mlx_name, bits in [
        ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj", 5),  # Q5_0
        ("blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj", 8),  # Q8_0
        ("blk.2.ffn_down.weight", "model.layers.2.mlp.down_proj", 4),  # Q4_K
        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj", None),  # Q6_K
        ("blk.0.attn_q.bias", "model.layers.0.self_attn.q_proj", None),  # F32
    ]:
        t = by_name[gguf_name]
        want = gguf.quants.dequantize(np.array(t.data), t.tensor_type).reshape([int(d) for d in reversed(t.shape)])
        if bits is None:
            got = np.array(weights[mlx_name + "." + gguf_name.rpartition(".")[2]].astype(mx.float32))
            assert np.allclose(got, want, rtol=2.0**-11, atol=1e-7), gguf_name
        else:
            got = np.array(mx.dequantize(*(weights[f"{mlx_name}.{k}"] for k in ("weight", "scales", "biases")),
                                         group_size=32, bits=bits).astype(mx.float32))
            assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max(), gguf_name

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(dest / "tokenizer.json"))
    assert tokenizer.encode("Hello, world!").ids == [9707, 11, 1879, 0]
    assert tokenizer.encode("12345").ids == [16, 17, 18, 19, 20]
    assert tokenizer.encode("<|im_start|>user\nhi<|im_end|>").ids == [151644, 872, 198, 6023, 151645]
    assert json.loads((dest / "tokenizer_config.json").read_text())["chat_template"] == str(
        reader.fields["tokenizer.chat_template"].contents()
    )
    answer = ask(dest, "What is the capital of France?")
    assert "Paris" in answer, answer


@pytest.mark.realmodels
def test_real_smollm2_135m_q4_1(tmp_path, hf_offline_env):
    """The real SmolLM2-135M-Instruct Q4_1 file (llama): still answers after import."""
    dest = import_model(real_file("smollm2-135m-instruct-q4_1.gguf"), dest_root=tmp_path)
    assert json.loads((dest / "config.json").read_text())["model_type"] == "llama"
    answer = ask(dest, "What is the capital of France?")
    assert "Paris" in answer, answer


# --- GGUF: Llama 3 RoPE scaling and a SentencePiece tokenizer -------------------------------


def test_llama3_rope_freqs_become_rope_scaling(tiny_model, gguf_dir, tmp_path, hf_offline_env):
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    scaled = tmp_path / "scaled"
    shutil.copytree(tiny_model.fp32, scaled)
    cfg = json.loads((scaled / "config.json").read_text())
    (scaled / "config.json").write_text(json.dumps({**cfg, "rope_scaling": scaling}))
    freqs = gguf_convert.llama3_rope_factors(cfg["head_dim"], cfg["rope_theta"], 8.0)
    assert 1.0 in freqs and 8.0 in freqs and any(1 < f < 8 for f in freqs)  # all three regions
    path = write_gguf(tiny_model.fp32, gguf_dir / "tiny-llama3.gguf", rope_freqs=freqs)

    dest = import_model(path, dest_root=tmp_path / "models")
    assert json.loads((dest / "config.json").read_text())["rope_scaling"] == scaling
    want, tok = load(scaled)
    plain, _ = load(tiny_model.fp32)
    got, _ = load(dest)
    ids = prompt_ids(tok)
    assert not np.allclose(logits(plain, ids), logits(want, ids), atol=1e-4)  # scaling matters here
    assert np.allclose(logits(got, ids), logits(want, ids), atol=1e-5)


def train_sentencepiece() -> object:
    import io

    sentencepiece = pytest.importorskip("sentencepiece")
    from support.tiny_model import load_build_tiny

    text = load_build_tiny().TRAINING_TEXT
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(text.splitlines()), model_writer=model, vocab_size=700,
        model_type="bpe", byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, character_coverage=1.0,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2,
        allow_whitespace_only_pieces=True, split_digits=True,
    )
    return sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())


def test_sentencepiece_gguf_tokenizer_matches_sentencepiece(tiny_model, gguf_dir, tmp_path, hf_offline_env):
    from transformers import AutoTokenizer

    sp = train_sentencepiece()
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
                     else 5 if sp.is_unused(i) else 1)
    for i in range(len(tokens), 1024):  # pad to the embedding size, as llama.cpp does
        tokens.append(f"[PAD{i}]")
        scores.append(-1000.0)
        types.append(5)
    spm = {"tokens": tokens, "scores": scores, "types": types}
    path = write_gguf(tiny_model.fp32, gguf_dir / "tiny-spm.gguf", spm=spm)
    dest = import_model(path, dest_root=tmp_path)

    hf = AutoTokenizer.from_pretrained(str(dest))
    assert (hf.bos_token, hf.eos_token, hf.unk_token) == ("<s>", "</s>", "<unk>")
    for text in TEXTS[:-1] + ["Hello world", " leading space", "x"]:
        want = sp.encode(text)
        assert hf.encode(text, add_special_tokens=False) == want, text
        assert hf.encode(text) == [1] + want, text  # BOS added once
        assert hf.decode(want) == sp.decode(want), text
    model, tok = load(dest)
    assert len(greedy_tokens(model, tok, tok.encode("Hello world"), n=4)) == 4


# --- MLX folders ----------------------------------------------------------------------------


def test_mlx_folder_import_links_files_and_loads(tiny_model, tmp_path, hf_offline_env):
    stages = []
    dest = import_model(tiny_model.q4, dest_root=tmp_path, progress=lambda s, d, t: stages.append((s, d, t)))
    assert dest == tmp_path / "q4"
    src_files = sorted(p.name for p in tiny_model.q4.iterdir())
    assert sorted(p.name for p in dest.iterdir()) == src_files
    for name in src_files:
        assert (dest / name).read_bytes() == (tiny_model.q4 / name).read_bytes()
    if os.stat(tiny_model.q4).st_dev == os.stat(tmp_path).st_dev:
        assert os.stat(dest / "model.safetensors").st_ino == os.stat(tiny_model.q4 / "model.safetensors").st_ino
    assert stages[-1][0] == "copying" and stages[-1][1] == stages[-1][2] > 0
    model, tok = load(dest)
    assert len(greedy_tokens(model, tok, prompt_ids(tok), n=8)) == 8
    assert_no_leftovers(tmp_path, {"q4"})


def test_import_uses_models_dir_by_default(tiny_model, hermes_home):
    from hermes_tui.util import paths

    dest = import_model(tiny_model.fp32, "tiny")
    assert dest == paths.models_dir() / "tiny"
    assert (dest / "config.json").is_file()


# --- errors: one line each, nothing left behind --------------------------------------------


def expect_error(path, *fragments, name=None, root=None) -> str:
    with pytest.raises(ModelImportError) as info:
        import_model(path, name, dest_root=root)
    message = str(info.value)
    assert "\n" not in message and len(message) < 300, message
    for fragment in fragments:
        assert fragment in message, message
    if root is not None:
        assert_no_leftovers(root, {"taken"})
    return message


def test_error_missing_path(tmp_path):
    expect_error(tmp_path / "nope.gguf", "no such file or folder", root=tmp_path / "models")


def test_error_not_a_model_folder(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "README.md").write_text("hi")
    expect_error(tmp_path / "src", "not an MLX model folder", root=tmp_path / "models")


def test_error_folder_without_weights_or_with_truncated_weights(tiny_model, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(tiny_model.q4, src)
    weights = (src / "model.safetensors").read_bytes()
    (src / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    expect_error(src, "truncated or corrupt", root=tmp_path / "models")
    (src / "model.safetensors").unlink()
    expect_error(src, "no model*.safetensors", root=tmp_path / "models")


def test_error_folder_without_tokenizer_or_unknown_model_type(tiny_model, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(tiny_model.q4, src)
    (src / "tokenizer.json").unlink()
    expect_error(src, "no tokenizer", root=tmp_path / "models")
    shutil.copy(tiny_model.q4 / "tokenizer.json", src)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "model_type": "no_such_arch"}))
    expect_error(src, "'no_such_arch' is not supported", root=tmp_path / "models")


def test_error_not_a_gguf_file(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    expect_error(tmp_path / "notes.txt", "not a GGUF file", root=tmp_path / "models")


def test_error_truncated_gguf(f32_gguf, tmp_path):
    data = f32_gguf.read_bytes()
    for cut in (40, len(data) // 2):
        (tmp_path / "cut.gguf").write_bytes(data[:cut])
        expect_error(tmp_path / "cut.gguf", "truncated or corrupt GGUF", root=tmp_path / "models")


def test_error_unsupported_architecture_tokenizer_and_tensor_type(tiny_model, gguf_dir, tmp_path):
    root = tmp_path / "models"
    path = write_gguf(tiny_model.fp32, tmp_path / "qwen.gguf", arch="qwen3")
    expect_error(path, "qwen.gguf: GGUF architecture 'qwen3' is not supported", "llama, qwen2", root=root)
    path = write_gguf(tiny_model.fp32, tmp_path / "bert.gguf", tokenizer_model="bert")
    expect_error(path, "tokenizer type 'bert' is not supported", root=root)
    path = write_gguf(tiny_model.fp32, tmp_path / "tq2.gguf", Q.TQ2_0)
    expect_error(path, "tq2.gguf: tensor type TQ2_0 cannot be converted", "Q5_0", "Q6_K", root=root)


def test_error_destination_exists_and_bad_name(tiny_model, f32_gguf, tmp_path):
    root = tmp_path / "models"
    (root / "taken").mkdir(parents=True)
    (root / "taken" / "keep.txt").write_text("mine")
    expect_error(f32_gguf, "a model named 'taken' already exists", name="taken", root=root)
    expect_error(tiny_model.q4, "already exists", name="taken", root=root)
    assert (root / "taken" / "keep.txt").read_text() == "mine"
    for bad in ("../escape", "a/b", ".hidden", ""):
        expect_error(f32_gguf, "--name", name=bad, root=root)


# --- command line ---------------------------------------------------------------------------


def test_import_subcommand(f32_gguf, hermes_home, tmp_path, capsys):
    import argparse

    from hermes_tui.util import paths

    parser = argparse.ArgumentParser(prog="hermes-tui models")
    add_import_parser(parser.add_subparsers(dest="action"))
    args = parser.parse_args(["import", str(f32_gguf), "--name", "x"])
    assert args.run(args) == 0
    assert (paths.models_dir() / "x" / "config.json").is_file()
    assert "imported x" in capsys.readouterr().out
    args = parser.parse_args(["import", str(f32_gguf), "--name", "x"])
    assert args.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("hermes-tui: a model named 'x' already exists") and err.count("\n") == 1


def test_cli_models_import(f32_gguf, tmp_path, hf_offline_env):
    """Through the real command, once the models command group is wired to add_import_parser."""
    exe = Path(sys.executable).with_name("hermes-tui")
    env = {**os.environ, **hf_offline_env, "HERMES_TUI_HOME": str(tmp_path / "home")}
    probe = subprocess.run([str(exe), "models", "import", "--help"], capture_output=True, text=True, env=env)
    if probe.returncode != 0:
        pytest.skip("`hermes-tui models import` is not wired into the CLI yet")
    done = subprocess.run([str(exe), "models", "import", str(f32_gguf), "--name", "x"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "home" / "models" / "x" / "config.json").is_file()
    again = subprocess.run([str(exe), "models", "import", str(f32_gguf), "--name", "x"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert again.stderr.strip().count("\n") == 0, again.stderr
