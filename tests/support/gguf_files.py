"""Writing GGUF files as llama.cpp does (the ``gguf`` package), from the tiny model's weights."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import mlx.core as mx
import numpy as np
from gguf import GGMLQuantizationType as Q


def llama_cpp_permute(weights: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """convert_hf_to_gguf.py ``LlamaModel.permute``: HF half-split RoPE rows -> interleaved."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


GGUF_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_tensor_name(mlx_name: str) -> str:
    if mlx_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if mlx_name == "model.norm.weight":
        return "output_norm.weight"
    if mlx_name == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = mlx_name.split(".", 3)
    module, _, suffix = rest.rpartition(".")
    return f"blk.{layer}.{GGUF_NAMES[module]}.{suffix}"


def gguf_tensors(model_dir: Path) -> dict[str, np.ndarray]:
    """The fp32 weights under llama.cpp names, Q/K permuted (what the converter writes)."""
    cfg = json.loads((model_dir / "config.json").read_text())
    weights = mx.load(str(model_dir / "model.safetensors"))
    out = {}
    for name, arr in weights.items():
        data = np.array(arr.astype(mx.float32))
        if name.endswith("q_proj.weight"):
            data = llama_cpp_permute(data, cfg["num_attention_heads"], cfg["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            data = llama_cpp_permute(data, cfg["num_attention_heads"], cfg["num_key_value_heads"])
        out[gguf_tensor_name(name)] = data
    return out


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    """A simple Q4_K quantizer (the gguf package has none): ggml's block_q4_K layout.

    Per 256-weight block: f16 d, f16 dmin, 12 bytes of packed 6-bit scales/mins for the
    eight 32-weight sub-blocks, 128 bytes of 4-bit codes (low nibbles: sub-block 2c,
    high nibbles: 2c + 1, for each 32-byte chunk c). Accuracy does not matter: the
    reference is gguf's own decoding of these bytes.
    """
    rows, cols = x.shape
    sub = x.reshape(rows, cols // 256, 8, 32).astype(np.float32)
    lo = np.minimum(sub.min(axis=-1), 0)
    hi = sub.max(axis=-1)
    scale, mins = (hi - lo) / 15, -lo
    d = (scale.max(axis=-1, keepdims=True) / 63).astype(np.float16)
    dmin = (mins.max(axis=-1, keepdims=True) / 63).astype(np.float16)
    safe = lambda v: np.where(v == 0, 1, v)  # noqa: E731
    ls = np.clip(np.round(scale / safe(d.astype(np.float32))), 0, 63).astype(np.uint8)
    lm = np.clip(np.round(mins / safe(dmin.astype(np.float32))), 0, 63).astype(np.uint8)
    eff_scale = d.astype(np.float32) * ls
    eff_min = dmin.astype(np.float32) * lm
    q = np.clip(np.round((sub + eff_min[..., None]) / safe(eff_scale)[..., None]), 0, 15).astype(np.uint8)
    packed_scales = np.zeros((rows, cols // 256, 12), dtype=np.uint8)
    for j in range(8):
        if j < 4:
            packed_scales[..., j] = ls[..., j]
            packed_scales[..., j + 4] = lm[..., j]
        else:
            packed_scales[..., j + 4] = (ls[..., j] & 0xF) | ((lm[..., j] & 0xF) << 4)
            packed_scales[..., j - 4] |= (ls[..., j] >> 4) << 6
            packed_scales[..., j] |= (lm[..., j] >> 4) << 6
    qs = (q[..., 0::2, :] | (q[..., 1::2, :] << 4)).reshape(rows, cols // 256, 128)
    blocks = np.concatenate(
        [d.view(np.uint8).reshape(rows, -1, 2), dmin.view(np.uint8).reshape(rows, -1, 2), packed_scales, qs],
        axis=-1,
    )
    return blocks.reshape(rows, -1)


def add_hyperparameters(w: gguf.GGUFWriter, cfg: dict) -> None:
    """The model's shape from its config.json, as llama.cpp's converters write it."""
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])


def write_gguf(
    model_dir: Path,
    out: Path,
    qtype: Q = Q.F32,
    *,
    arch: str = "llama",
    tokenizer_model: str = "gpt2",
    rope_freqs: list[float] | None = None,
    type_of: callable | None = None,
    spm: dict | None = None,
) -> Path:
    """The tiny model as a llama.cpp-style GGUF; returns the path.

    ``qtype`` is the type of the 2-D tensors (norms stay F32, as llama.cpp keeps them);
    ``type_of(name)`` overrides it per tensor, for mixed files like Q4_K_M.
    """
    from tokenizers import Tokenizer

    cfg = json.loads((model_dir / "config.json").read_text())
    tok_cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    vocab_size = cfg["vocab_size"]

    w = gguf.GGUFWriter(str(out), arch)
    w.add_name("tiny")
    add_hyperparameters(w, cfg)
    w.add_rope_dimension_count(cfg["head_dim"])
    w.add_vocab_size(vocab_size)
    w.add_file_type({Q.F32: 0, Q.F16: 1, Q.Q4_0: 2, Q.Q4_1: 3, Q.Q8_0: 7, Q.Q4_K: 15}.get(qtype, 0))

    if spm is not None:
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(spm["tokens"])
        w.add_token_scores(spm["scores"])
        w.add_token_types(spm["types"])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(True)
    else:
        # get_vocab_base + SpecialVocab, as for a GPT-2-style BPE tokenizer.
        w.add_tokenizer_model(tokenizer_model)
        w.add_tokenizer_pre("gpt-2")
        reverse = {i: t for t, i in tokenizer.get_vocab(with_added_tokens=True).items()}
        added = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
        tokens, types = [], []
        for i in range(vocab_size):
            if i not in reverse:
                tokens.append(f"[PAD{i}]")
                types.append(gguf.TokenType.UNUSED)
            else:
                tokens.append(reverse[i])
                types.append(gguf.TokenType.CONTROL if i in added else gguf.TokenType.NORMAL)
        w.add_token_list(tokens)
        w.add_token_types(types)
        merges = json.loads(tokenizer.to_str())["model"]["merges"]
        w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
        w.add_eos_token_id(cfg["eos_token_id"])
        w.add_pad_token_id(cfg["pad_token_id"])
        w.add_add_bos_token(False)
    w.add_chat_template(tok_cfg["chat_template"])

    for name, arr in sorted(gguf_tensors(model_dir).items()):
        kind = (type_of(name) if type_of else None) or qtype
        if arr.ndim == 1 or kind == Q.F32:
            w.add_tensor(name, arr.astype(np.float32))
        elif kind == Q.F16:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            raw = quantize_q4_k(arr) if kind == Q.Q4_K else gguf.quants.quantize(arr, kind)
            w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=kind)
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", np.array(rope_freqs, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
