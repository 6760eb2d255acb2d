"""Build the tiny test model: a random-weight Llama that MLX can load and serve.

    uv run python models/build_tiny.py OUT_DIR

writes two complete MLX model folders, each loadable by ``mlx_lm.load`` and servable by
``python -m mlx_lm server --model DIR``:

    OUT_DIR/fp32   float32 weights (~10.5 MB)
    OUT_DIR/q4     4-bit affine-quantized copy (group size 64); scales, biases and the
                   norms stay float32

Why a tiny random model: real models are for Macs (this project's CPU test machines
prefill a 135M model at ~6 tokens/s) and the Hugging Face hub is unreachable from tests
and CI. A 2.6M-parameter model exercises the real loading, chat-template, tokenizer,
generation and server code in well under a second per call. Its output is noise, and it
never emits the end token, so callers must always pass ``max_tokens``.

Everything is seeded and built from the text embedded below, so two builds are
byte-identical (tests check this). The tests import ``build`` from this file by path.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# Keep the tokenizer trainer single-threaded: its merge order must not depend on
# thread scheduling, or two builds could differ.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SEED = 0

# Special tokens get the first ids, in this order: <|endoftext|>=0, <|im_start|>=1,
# <|im_end|>=2. <|im_end|> closes every ChatML turn, so it is the end-of-sequence token.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"

# ChatML, as used by Qwen and SmolLM instruct models. ``content`` may be None on an
# assistant message that only carries tool calls: render it as empty.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# The architecture: ~2.6M parameters. Every matrix dimension (256, 512, 128 for the
# two 64-wide KV heads) is a multiple of 64, so the 4-bit copy can quantize every
# Linear and the embedding with group size 64.
MODEL_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 1024,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
    "bos_token_id": None,  # ChatML models start without a BOS token
    "eos_token_id": SPECIAL_TOKENS.index(EOS_TOKEN),
    "pad_token_id": SPECIAL_TOKENS.index(PAD_TOKEN),
    "torch_dtype": "float32",
}

Q4_GROUP_SIZE = 64
Q4_BITS = 4

# The tokenizer's training text: English prose about what this app does, plus Python
# code and chat-shaped snippets, so common words and code fragments become single
# tokens and a test prompt tokenizes to a realistic number of tokens.
TRAINING_TEXT = '''
The assistant keeps a long conversation inside a small context window. After every
turn, a small model folds the oldest exchange into one rolling summary, so the user
can keep working without losing what happened earlier. User messages are never
summarized, edited or dropped. A tool call and its results always stay together.
When the summary grows too large, it is rewritten shorter; that rewrite must shrink
the text, or it counts as a failure and the old summary is kept.

The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins
with a single step. Time flies like an arrow; fruit flies like a banana. It was the
best of times, it was the worst of times, it was the age of wisdom, it was the age of
foolishness. Call me Ishmael. Some years ago, never mind how long precisely, having
little or no money in my purse, and nothing particular to interest me on shore, I
thought I would sail about a little and see the watery part of the world.

Please read the file, fix the failing test, and run the test suite again. The build
failed because a dependency was missing. I updated the configuration and restarted
the server; the endpoint now answers on port 8080. What does this error mean?
Connection refused: is the server running? The request timed out after 120 seconds.
The model was not found. Summarize the exchange in two short sentences. Keep names,
numbers, file paths and decisions. Do not address the assistant.

Questions and answers: How many tokens does the prompt use? About three hundred.
Which model performs the compression? A small instruct model with four-bit weights.
Where are sessions stored? In a SQLite database in the user's data directory.
Where is the log? In logs/agent.log under the home directory.

def fibonacci(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


class Session:
    def __init__(self, session_id: str, messages: list[dict]) -> None:
        self.session_id = session_id
        self.messages = list(messages)

    def append(self, role: str, content: str) -> None:
        self.messages.append({"role": role, "content": content})

    def __len__(self) -> int:
        return len(self.messages)


import json
import os
from pathlib import Path

def load_config(path: Path) -> dict:
    with open(path, "r", encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"expected a mapping in {path}")
    return data

for i, line in enumerate(lines):
    if line.startswith("#") or not line.strip():
        continue
    key, _, value = line.partition("=")
    result[key.strip()] = value.strip()

try:
    response = client.chat.completions.create(model=model, messages=messages)
except TimeoutError as exc:
    print("error:", exc)
else:
    print(response.choices[0].message.content)

{"role": "system", "content": "You are a helpful assistant."}
{"role": "user", "content": "Hello! Can you help me with my code?"}
{"role": "assistant", "content": "Of course. Please share the code and the error."}
{"role": "tool", "tool_call_id": "call_1", "content": "OK: 3 files changed"}

$ git status
$ uv run pytest -q tests/
12 passed, 0 failed in 3.45s
SELECT id, role, content FROM messages WHERE session_id = ? ORDER BY id;
https://example.com/api/v1/chat/completions
0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14 2.71 42 -1 +1 == != <= >= -> => && || ++ --
'''


def train_tokenizer():
    """A byte-level BPE tokenizer (like GPT-2/Qwen) trained on TRAINING_TEXT.

    Byte-level means every input string is encodable (no unknown token); the price is
    that random weights can emit byte sequences that are not valid UTF-8, which the
    decoder renders as replacement characters.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=MODEL_CONFIG["vocab_size"],
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TRAINING_TEXT.splitlines(keepends=True), trainer=trainer)

    # The special tokens must have the ids the config names.
    for i, token in enumerate(SPECIAL_TOKENS):
        assert tokenizer.token_to_id(token) == i, token
    assert tokenizer.get_vocab_size() <= MODEL_CONFIG["vocab_size"]
    return tokenizer


def tokenizer_config() -> dict:
    """tokenizer_config.json: what transformers' PreTrainedTokenizerFast needs."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MODEL_CONFIG["max_position_embeddings"],
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "chat_template": CHAT_TEMPLATE,
    }


def write_json(path: Path, data: dict) -> None:
    # sort_keys + fixed indent: the file depends only on the data (byte-identical builds)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def write_model_folder(folder: Path, model, config: dict, tokenizer) -> None:
    """One complete MLX model folder: config, weights, tokenizer files."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", config)
    # Sorted names so the safetensors header is laid out the same way every time.
    weights = dict(sorted(tree_flatten(model.parameters())))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    tokenizer.save(str(folder / "tokenizer.json"))
    write_json(folder / "tokenizer_config.json", tokenizer_config())


def build(out_dir: Path) -> dict[str, Path]:
    """Write ``out_dir/fp32`` and ``out_dir/q4``; return {"fp32": path, "q4": path}."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx_lm.models.llama import Model, ModelArgs

    out_dir = Path(out_dir)
    tokenizer = train_tokenizer()

    # Random weights from a fixed seed. mlx draws random numbers from a global key
    # that the seed resets, so constructing the model right after seeding always
    # gives the same parameters. float32: fp16 is ~45x slower on the CPU backend.
    mx.random.seed(SEED)
    model = Model(ModelArgs.from_dict(MODEL_CONFIG))
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())

    fp32_dir = out_dir / "fp32"
    write_model_folder(fp32_dir, model, dict(MODEL_CONFIG), tokenizer)

    # The 4-bit copy: quantize every Linear and the (tied) embedding in place. Norms are
    # not quantizable and stay float32; scales and biases take the weights' float32.
    quantization = {"group_size": Q4_GROUP_SIZE, "bits": Q4_BITS, "mode": "affine"}
    nn.quantize(model, group_size=Q4_GROUP_SIZE, bits=Q4_BITS, mode="affine")
    mx.eval(model.parameters())
    q4_config = dict(MODEL_CONFIG)
    # mlx_lm reads "quantization"; "quantization_config" is the Hugging Face spelling.
    q4_config["quantization"] = quantization
    q4_config["quantization_config"] = quantization
    q4_dir = out_dir / "q4"
    write_model_folder(q4_dir, model, q4_config, tokenizer)

    return {"fp32": fp32_dir, "q4": q4_dir}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python models/build_tiny.py OUT_DIR", file=sys.stderr)
        return 2
    for name, path in build(Path(argv[0])).items():
        size = sum(f.stat().st_size for f in path.iterdir())
        print(f"{name}: {path} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
