"""What each server says when a request does not fit its window, recognised with its figures;
other 400s are left alone. The texts are the servers' own (llama.cpp, vLLM, OpenAI, LM Studio,
Ollama), as their sources and issue threads quote them."""

from __future__ import annotations

import pytest

from hermes_tui.providers.openai.overflow import recognise


@pytest.mark.parametrize(
    "text, body, prompt, window",
    [
        ("request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
         {"type": "exceed_context_size_error", "n_prompt_tokens": 4476, "n_ctx": 4096}, 4476, 4096),
        ("the request exceeds the available context size, try increasing it", None, None, None),
        ("input (5000 tokens) is larger than the max context size (4096 tokens). skipping", None, 5000, 4096),
        ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the "
         "messages, 1000 in the completion). Please reduce the length of the messages or completion.",
         None, 4000, 4096),
        ("'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is "
         "4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).", None, 2778, 4096),
        ("The decoder prompt (length 12324) is longer than the maximum model length of 8192. Make sure that "
         "`max_model_len` is no smaller than the number of text tokens.", None, 12324, 8192),
        ("This model's maximum context length is 16385 tokens. However, your messages resulted in 31228 tokens. "
         "Please reduce the length of the messages.", {"code": "context_length_exceeded"}, 31228, 16385),
        ("Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with "
         "context length of only 7866 tokens, which is not enough.", None, 10136, 7866),
        ("Reached context length of 4096 tokens with model (arch: qwen3vlmoe) that does not currently support "
         "mid-generation context overflow.", None, None, 4096),
        ("Input length 6491 exceeds context length 1500", None, 6491, 1500),
        ("the input length exceeds the context length", None, None, None),
    ],
    ids=["llama.cpp", "llama.cpp-old", "llama.cpp-older", "vllm", "vllm-new", "vllm-decoder", "openai",
         "lm-studio", "lm-studio-mid-generation", "lm-studio-old", "ollama"],
)
def test_each_servers_wording_is_recognised_with_its_figures(text, body, prompt, window):
    overflow = recognise(text, body)
    assert overflow is not None and overflow.text == text
    assert (overflow.prompt_tokens, overflow.context_limit) == (prompt, window)


@pytest.mark.parametrize("text", [
    "model 'm' not found", "max_tokens is too large", "Invalid 'messages' type: expected array",
    "tools param requires --jinja flag", "Rate limit reached", "",
])
def test_other_errors_are_not_overflows(text):
    assert recognise(text, {"type": "invalid_request_error"}) is None


def test_the_error_type_alone_is_enough():
    overflow = recognise("context too large", {"type": "exceed_context_size_error", "n_prompt_tokens": 9, "n_ctx": 8})
    assert overflow is not None and overflow.figures() == "9 tokens > 8"
