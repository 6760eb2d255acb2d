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
from support.gguf_files import gguf_tensor_name, llama_cpp_permute, quantize_q4_k, write_gguf  # noqa: E402

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


def dequantized_reference(gguf_path: Path, model_dir: Path, out_dir: Path) -> Path:
    """An fp32 MLX folder holding exactly what the GGUF's quantized tensors decode to
    (gguf's reference dequantization), un-permuted by the test's own code."""
    cfg = json.loads((model_dir / "config.json").read_text())
    reader = gguf.GGUFReader(str(gguf_path))
    inverse = {gguf_tensor_name(k): k for k in mx.load(str(model_dir / "model.safetensors"))}
    weights = {}
    for t in reader.tensors:
        data = gguf.quants.dequantize(np.array(t.data), t.tensor_type).astype(np.float32)
        data = data.reshape([int(d) for d in reversed(t.shape)])
        name = inverse[t.name]
        n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        if name.endswith(("q_proj.weight", "k_proj.weight")):
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

    orig_cfg = json.loads((tiny_model.fp32 / "config.json").read_text())
    cfg = json.loads((dest / "config.json").read_text())
    for key in ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps", "rope_theta",
                "max_position_embeddings", "tie_word_embeddings", "eos_token_id", "pad_token_id"):
        assert cfg[key] == orig_cfg[key], key
    assert "quantization" not in cfg and "rope_scaling" not in cfg

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


@pytest.mark.parametrize("qtype, scale_offsets", [(Q.Q6_K, (208,)), (Q.Q2_K, (80, 82))], ids=["Q6_K", "Q2_K"])
def test_mlx_decodes_the_k_quants_it_dequantizes(tmp_path, qtype, scale_offsets):
    """Q6_K and Q2_K are imported as MLX decodes them (float16): guard that decoding
    against the gguf package's reference (random codes, sane block scales)."""
    block, block_bytes = gguf.constants.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(8, 512 // block, block_bytes), dtype=np.uint8)
    for offset in scale_offsets:
        raw[..., offset:offset + 2] = np.array([0.01], dtype=np.float16).view(np.uint8)
    raw = raw.reshape(8, -1)
    w = gguf.GGUFWriter(str(tmp_path / "k.gguf"), "llama")
    w.add_tensor("blk.0.ffn_down.weight", raw, raw_shape=raw.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got = np.array(mx.load(str(tmp_path / "k.gguf"))["blk.0.ffn_down.weight"].astype(mx.float32))
    want = gguf.quants.dequantize(raw, qtype)
    assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max()


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
    from hermes_tui import paths

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

    from hermes_tui import paths

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
