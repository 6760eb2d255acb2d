"""A GGUF llama or qwen2 model as an MLX model folder: tensor names, llama's RoPE
permutation undone, config.json and rope scaling from the metadata, the weights saved in shards."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tui.hub.gguf.header import GGUFHeader, md_value, read_gguf_header
from hermes_tui.hub.gguf.quants import tensor_to_mlx
from hermes_tui.hub.gguf.tokenizer import build_tokenizer
from hermes_tui.hub.import_common import (
    SHARD_BYTES,
    ModelImportError,
    ProgressFn,
    brief,
    write_json,
)

if TYPE_CHECKING:  # mlx is imported where used: importing this module does not load it
    import mlx.core as mx

# llama.cpp tensor names -> mlx_lm llama / qwen2 names (the two share them).
_GLOBAL = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
_BLOCK = {
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
# Tensors with a ".bias": Qwen2's Q/K/V projections (convert_hf_to_gguf.py keeps them).
_BIASED = {"llama": (), "qwen2": ("attn_q", "attn_k", "attn_v")}
_MODEL_TYPES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
_BLOCK_NAME = re.compile(r"blk\.(\d+)\.([a-z_]+)\.(weight|bias)")
_GLOBAL_NAME = re.compile(r"([a-z_]+)\.(weight)")


def _mlx_name(gguf_name: str, arch: str) -> tuple[str, str, str]:
    """(MLX module name, llama.cpp role such as "attn_q", "weight" or "bias") of a GGUF tensor."""
    m = _BLOCK_NAME.fullmatch(gguf_name)
    if m and m.group(2) in _BLOCK and (m.group(3) == "weight" or m.group(2) in _BIASED[arch]):
        return f"model.layers.{m.group(1)}.{_BLOCK[m.group(2)]}", m.group(2), m.group(3)
    m = _GLOBAL_NAME.fullmatch(gguf_name)
    if m and m.group(1) in _GLOBAL:
        return _GLOBAL[m.group(1)], m.group(1), m.group(2)
    raise ModelImportError(f"unexpected tensor {gguf_name!r} for a {arch} model (not a plain dense {arch}?)")


def _unpermute_rows(a: mx.array, n_head: int) -> mx.array:
    """Undo llama.cpp's Q/K permutation (convert_hf_to_gguf.py ``LlamaModel.permute``).

    llama.cpp rotates adjacent pairs (GPT-J style RoPE); Hugging Face Llama rotates the
    two halves of each head. The converter reorders each head's rows from
    [x0..x(h/2-1), y0..y(h/2-1)] to [x0, y0, x1, y1, ...]; this puts them back. It is a
    row permutation, so it applies to quantized weights, scales and biases alike.
    Only llama is permuted: ``Qwen2Model`` in convert_hf_to_gguf.py writes Q/K as they are
    (llama.cpp runs qwen2 with NEOX-style RoPE, the Hugging Face layout).
    """
    rows = a.shape[0]
    if rows % (2 * n_head):
        raise ModelImportError(f"cannot undo the RoPE permutation: {rows} rows for {n_head} heads")
    rest = tuple(a.shape[1:])
    return a.reshape((n_head, rows // n_head // 2, 2) + rest).swapaxes(1, 2).reshape(a.shape)


def convert_gguf(path: Path, header: GGUFHeader, out: Path, progress: ProgressFn | None) -> None:
    import mlx.core as mx

    if progress:
        progress("reading", 0, 1)
    full = read_gguf_header(path, arrays=True)  # the metadata with its arrays (tokenizer)
    metadata = full.metadata
    if progress:
        progress("reading", 1, 1)

    arch = full.architecture
    config = _model_config(arch, metadata, full, path)
    tensors = [t for t in full.tensors if t.name != "rope_freqs.weight"]
    freqs = next((t for t in full.tensors if t.name == "rope_freqs.weight"), None)
    if freqs is not None:
        if arch != "llama":
            raise ModelImportError(f"{path.name}: a rope_freqs tensor in a {arch} model is not supported")
        if "rope_scaling" in config:
            raise ModelImportError(f"{path.name}: both rope_freqs and {config['rope_scaling']} scaling")
        values = tensor_to_mlx(path, freqs)["weight"].astype(mx.float32)
        config["rope_scaling"] = _llama3_scaling_from_freqs(values, config, path)
    n_head, n_kv = config["num_attention_heads"], config["num_key_value_heads"]

    converted: dict[str, mx.array] = {}
    for i, t in enumerate(tensors):
        try:
            module, role, suffix = _mlx_name(t.name, arch)
        except ModelImportError as exc:
            raise ModelImportError(f"{path.name}: {exc}") from None
        parts = tensor_to_mlx(path, t)
        if suffix == "bias" and set(parts) != {"weight"}:
            raise ModelImportError(f"{path.name}: quantized bias {t.name} ({t.type_name}) is not supported")
        for kind, arr in parts.items():
            if arch == "llama" and role in ("attn_q", "attn_k"):
                arr = _unpermute_rows(arr, n_head if role == "attn_q" else n_kv)
            converted[f"{module}.{'bias' if suffix == 'bias' else kind}"] = arr
        if progress:
            progress("converting", i + 1, len(tensors))

    _check_shapes(converted, config, arch, path)
    config["tie_word_embeddings"] = "lm_head.weight" not in converted
    quantization = _quantization_entry(converted)
    if quantization:
        config["quantization"] = quantization
        config["quantization_config"] = quantization
    config["imported_from"] = {
        "format": "gguf",
        "file": path.name,
        "tensor_types": dict(sorted(Counter(t.type_name for t in full.tensors).items())),
    }

    try:
        tokenizer, tokenizer_config, special_ids = build_tokenizer(metadata, config["max_position_embeddings"])
    except ModelImportError as exc:
        raise ModelImportError(f"{path.name}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - tokenizers rejects bad vocabularies with plain Exception
        raise ModelImportError(f"{path.name}: cannot build the tokenizer ({brief(exc)})") from None
    config.update(special_ids)

    write_json(out / "config.json", config)
    tokenizer.save(str(out / "tokenizer.json"))
    write_json(out / "tokenizer_config.json", tokenizer_config)
    _save_weights(converted, out, progress)


def _md_float(metadata: dict[str, Any], key: str, default: float | None = None) -> float | None:
    value = md_value(metadata, key, default)
    if value is None:
        return None
    # float32 in the file: 1e-5 arrives as 9.999999747e-06; keep float32's 7 digits.
    return float(f"{float(value):.7g}")


def _model_config(arch: str, metadata: dict[str, Any], header: GGUFHeader, path: Path) -> dict[str, Any]:
    """config.json for mlx_lm's llama or qwen2 model from the ``{arch}.*`` metadata."""
    def need(key: str) -> Any:
        value = md_value(metadata, f"{arch}.{key}")
        if value is None:
            raise ModelImportError(f"{path.name}: GGUF metadata has no {arch}.{key}")
        return value

    hidden = int(need("embedding_length"))
    n_head = int(need("attention.head_count"))
    n_kv = int(md_value(metadata, f"{arch}.attention.head_count_kv", n_head))
    head_dim = int(md_value(metadata, f"{arch}.attention.key_length", hidden // n_head))
    value_dim = int(md_value(metadata, f"{arch}.attention.value_length", head_dim))
    rope_dims = int(md_value(metadata, f"{arch}.rope.dimension_count", head_dim))
    if value_dim != head_dim or rope_dims != head_dim:
        raise ModelImportError(
            f"{path.name}: unusual attention shape (key {head_dim}, value {value_dim}, rope {rope_dims}) not supported"
        )
    if arch == "qwen2" and head_dim * n_head != hidden:  # mlx_lm's qwen2 derives head_dim
        raise ModelImportError(f"{path.name}: qwen2 head size {head_dim} x {n_head} heads is not {hidden}")
    embed = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
    if embed is None:
        raise ModelImportError(f"{path.name}: no token_embd.weight tensor")
    vocab_size = int(embed.shape[0])
    n_tokens = len(metadata.get("tokenizer.ggml.tokens") or ())
    if n_tokens > vocab_size:
        raise ModelImportError(f"{path.name}: {n_tokens} tokens but only {vocab_size} embedding rows")

    config: dict[str, Any] = {
        "model_type": arch,
        "architectures": [_MODEL_TYPES[arch]],
        "hidden_size": hidden,
        "num_hidden_layers": int(need("block_count")),
        "intermediate_size": int(need("feed_forward_length")),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "head_dim": head_dim,
        "vocab_size": vocab_size,
        "rms_norm_eps": _md_float(metadata, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
        "rope_theta": _md_float(metadata, f"{arch}.rope.freq_base", 10000.0),
        "max_position_embeddings": int(md_value(metadata, f"{arch}.context_length", 2048)),
    }
    rope_scaling = _rope_scaling(arch, metadata, path)
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


def _rope_scaling(arch: str, metadata: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """RoPE scaling named in the metadata (Llama 3's ``rope_freqs`` tensor is handled apart)."""
    kind = md_value(metadata, f"{arch}.rope.scaling.type")
    if kind in (None, "none", ""):
        return None
    if kind == "linear":
        return {"type": "linear", "factor": _md_float(metadata, f"{arch}.rope.scaling.factor", 1.0)}
    raise ModelImportError(f"{path.name}: RoPE scaling {kind!r} is not supported")


def _llama3_scaling_from_freqs(freqs: mx.array, config: dict[str, Any], path: Path) -> dict[str, Any]:
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


def _check_shapes(weights: dict[str, mx.array], config: dict[str, Any], arch: str, path: Path) -> None:
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
        kind = name.rpartition(".")[2]
        if (kind, arr.ndim) not in (("weight", 2), ("bias", 1)):
            continue
        for part, rows in expected_rows.items():
            if f"{part}.{kind}" in name and arr.shape[0] != rows:
                raise ModelImportError(
                    f"{path.name}: tensor for {name} has {arr.shape[0]} rows, the metadata implies {rows}"
                )
    for i in range(config["num_hidden_layers"]):
        if f"model.layers.{i}.self_attn.q_proj.weight" not in weights:
            raise ModelImportError(f"{path.name}: layer {i} has no attention weights")
        for role in _BIASED[arch]:
            if f"model.layers.{i}.{_BLOCK[role]}.bias" not in weights:
                raise ModelImportError(f"{path.name}: layer {i} has no {role}.bias ({arch} has Q/K/V biases)")


def _quantization_entry(weights: dict[str, mx.array]) -> dict[str, Any] | None:
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


def _save_weights(weights: dict[str, mx.array], out: Path, progress: ProgressFn | None) -> None:
    import mlx.core as mx

    shards: list[dict[str, mx.array]] = []
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
        write_json(
            out / "model.safetensors.index.json",
            {"metadata": {"total_size": total}, "weight_map": dict(sorted(index.items()))},
        )
