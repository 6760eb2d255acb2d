"""Known model families and their native windows: the last source asked before the fallback."""

from __future__ import annotations

import os
import re

from hermes_tui.providers.context_limit import ContextLimit, looks_like_repo_id

# Native (unextended) windows as documented in each model card / vendor page.
# Matching is case-insensitive on the model name or repo id, whole tokens only, and
# the longest matching pattern wins ("llama-3.1" beats "llama-3", "gemma-3-1b" beats
# "gemma-3"). Names are normalized first (see _normalize): "Llama-3.1", "llama3.1"
# and "llama_3.1" all read "llama-3.1".
_TABLE: dict[str, int] = {
    # Qwen2 / Qwen2.5: 32,768 (Qwen/Qwen2.5-7B-Instruct card; 128K only with YaRN).
    "qwen2": 32_768,
    "qwen2.5": 32_768,
    # Qwen3: "natively supports 32,768 tokens" (Qwen/Qwen3-8B card; its config.json
    # says 40960 = 32768 + 8192 reserved for output); 131,072 only with YaRN.
    "qwen3": 32_768,
    # Qwen3 2507 updates and Qwen3-Coder: 262,144 native (Qwen3-4B-Instruct-2507 and
    # Qwen3-Coder-30B-A3B-Instruct cards).
    "instruct-2507": 262_144,
    "thinking-2507": 262_144,
    "qwen3-coder": 262_144,
    # Llama 3.1 / 3.2 / 3.3: 128K (meta-llama cards); Llama 3 (3.0): 8K; Llama 2: 4K.
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama-3": 8_192,
    "llama-2": 4_096,
    # Mistral 7B Instruct: v0.1 8K; v0.2 and v0.3 32K (mistralai cards). Nemo: 128K.
    "mistral-7b-instruct-v0.1": 8_192,
    "mistral-7b-instruct-v0.2": 32_768,
    "mistral-7b-instruct-v0.3": 32_768,
    "mistral-nemo": 131_072,
    # Gemma 2: 8K. Gemma 3: 128K, but 32K for the 1B and 270M models (Gemma 3 cards).
    "gemma-2": 8_192,
    "gemma-3": 131_072,
    "gemma-3-1b": 32_768,
    "gemma-3-270m": 32_768,
    # Phi-3 mini 4K / 128K; Phi-3.5 and Phi-4-mini 128K; Phi-4 (14B) 16K (microsoft cards).
    "phi-3-mini-4k": 4_096,
    "phi-3-mini-128k": 131_072,
    "phi-3.5": 131_072,
    "phi-4": 16_384,
    "phi-4-mini": 131_072,
    # SmolLM2: 8K (HuggingFaceTB/SmolLM2-1.7B-Instruct card).
    "smollm2": 8_192,
    # DeepSeek-R1 distills (Qwen and Llama based): 128K (deepseek-ai/DeepSeek-R1 card).
    "deepseek-r1-distill": 131_072,
    # Hosted models (OpenAI and Anthropic model pages).
    "gpt-3.5-turbo": 16_385,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
}

_SEPARATORS = re.compile(r"[\s_\-:/]+")
_LETTER_DIGIT = re.compile(r"(?<=[a-z])(?=\d)")


def _normalize(name: str) -> str:
    """Lower case, one "-" between tokens, letters split from the digits after them."""
    text = _SEPARATORS.sub("-", name.lower()).strip("-")
    return _LETTER_DIGIT.sub("-", text)


_NORMALIZED_TABLE = {_normalize(pattern): tokens for pattern, tokens in _TABLE.items()}


def _matches(pattern: str, name: str) -> bool:
    """``pattern`` occurs in ``name`` as whole tokens ("qwen-2" does not match "qwen-2.5")."""
    start = name.find(pattern)
    while start != -1:
        end = start + len(pattern)
        if (start == 0 or name[start - 1] == "-") and (end == len(name) or name[end] == "-"):
            return True
        start = name.find(pattern, start + 1)
    return False


def from_table(model_name: str) -> ContextLimit | None:
    """The documented window of a known model family; the most specific match wins."""
    if not model_name:
        return None
    name = model_name.rstrip("/\\")
    if os.sep in name and not looks_like_repo_id(name):
        name = os.path.basename(name)  # a local folder: its name names the model
    name = _normalize(name)
    best = max((p for p in _NORMALIZED_TABLE if _matches(p, name)), key=len, default=None)
    return ContextLimit(_NORMALIZED_TABLE[best], "table") if best else None
