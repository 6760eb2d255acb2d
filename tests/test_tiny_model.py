"""The tiny test model recipe (models/build_tiny.py): reproducible, loadable, usable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BUILD_TINY = Path(__file__).resolve().parents[1] / "models" / "build_tiny.py"

pytestmark = pytest.mark.integration

CHAT = [
    {"role": "system", "content": "Summarize the exchange in one sentence."},
    {"role": "user", "content": "Please read the file and fix the failing test."},
]


def test_two_builds_are_byte_identical(tiny_model, tmp_path):
    # The second build runs the script's command line in a fresh process, so this also
    # checks that nothing depends on process state (hash seeds, thread timing).
    subprocess.run([sys.executable, str(BUILD_TINY), str(tmp_path)], check=True, timeout=120)
    for variant in ("fp32", "q4"):
        first_dir = getattr(tiny_model, variant)
        second_dir = tmp_path / variant
        names = sorted(p.name for p in first_dir.iterdir())
        assert names == sorted(p.name for p in second_dir.iterdir())
        assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(names)
        for name in names:
            assert (first_dir / name).read_bytes() == (second_dir / name).read_bytes(), (variant, name)


def test_config_and_tokenizer_files(tiny_model):
    for variant in ("fp32", "q4"):
        folder = getattr(tiny_model, variant)
        config = json.loads((folder / "config.json").read_text())
        tok_config = json.loads((folder / "tokenizer_config.json").read_text())
        tokenizer = json.loads((folder / "tokenizer.json").read_text())
        assert config["model_type"] == "llama"
        assert config["vocab_size"] == 1024
        assert config["tie_word_embeddings"] is True
        special = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
        assert config["eos_token_id"] == special["<|im_end|>"]
        assert tok_config["eos_token"] == "<|im_end|>"
        assert "<|im_start|>" in tok_config["chat_template"]
    q4_config = json.loads((tiny_model.q4 / "config.json").read_text())
    assert q4_config["quantization"]["bits"] == 4
    assert "quantization" not in json.loads((tiny_model.fp32 / "config.json").read_text())


@pytest.mark.parametrize("variant", ["fp32", "q4"])
def test_load_template_and_generate(tiny_model, hf_offline_env, variant):
    import mlx.core as mx
    import mlx_lm
    from mlx.utils import tree_flatten
    from mlx_lm.utils import get_total_parameters

    model, tokenizer = mlx_lm.load(str(getattr(tiny_model, variant)))

    # ~2.6M parameters (quantized layers count their unpacked weights)
    assert get_total_parameters(model) == pytest.approx(2.6e6, rel=0.05)
    # everything that is not a packed 4-bit weight is float32 (fp16 is slow on CPU)
    for name, array in tree_flatten(model.parameters()):
        if array.dtype != mx.uint32:
            assert array.dtype == mx.float32, name
        else:
            assert variant == "q4", name

    prompt = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True)
    text = tokenizer.decode(prompt)
    assert text.startswith("<|im_start|>system\nSummarize")
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.eos_token_id == 2

    last = None
    for last in mlx_lm.stream_generate(model, tokenizer, prompt, max_tokens=8):  # noqa: B007 - the last one is checked
        pass
    assert last is not None
    assert last.prompt_tokens == len(prompt)
    assert last.generation_tokens == 8
    assert last.finish_reason == "length"  # random weights never emit <|im_end|>


def test_hf_offline_env_is_set_for_the_session(hf_offline_env):
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["HF_HOME"] == hf_offline_env["HF_HOME"]
    assert (Path(hf_offline_env["HF_HOME"]) / "hub").is_dir()
