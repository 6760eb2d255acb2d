"""Re-warming the in-process chat model's prefix cache after a compaction splice.

The tiny model on the real MLX runtime: after a splice the chat's cache reuses only the
head; ``MlxChatClient.warm`` reads the spliced context on the MLX thread, and the next
turn then prefills only what is new. ``Session.publish_pass`` calls it after a splice
(``compression.rewarm``), and not when it is off."""

from __future__ import annotations

import pytest

from hermes_tui.config import Config
from hermes_tui.core.transcript import MICRO, Message, make_marker, wire_view
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.mlx.chat import CACHE_KEY, MlxChatClient
from hermes_tui.providers.mlx.runtime import MlxRuntime
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store

WAIT_S = 300  # bounds a hang only


def chat(turns: int) -> list[Message]:
    out = []
    for n in range(turns):
        out.append(Message("user", f"Question {n} about the parser?"))
        out.append(Message("assistant", f"Answer {n}: " + " ".join(f"token{k} branch{n}" for k in range(30))))
    return out


def spliced(messages: list[Message]) -> list[Message]:
    middle = messages[3:-2]
    marker = make_marker(MICRO, "- the parser answers so far", covers=[m.id for m in middle])
    return messages[:3] + [marker] + messages[-2:]


@pytest.fixture
def runtime():
    runtime = MlxRuntime()
    yield runtime
    runtime.release()


def test_the_turn_after_a_warm_prefills_only_the_new_message(tiny_model, runtime):
    model = str(tiny_model.fp32)
    client = MlxChatClient(model, runtime=runtime, timeout=WAIT_S)
    loaded = runtime.load(model)
    before = chat(6)
    after = spliced(before)
    request = wire_view(after + [Message("user", "And next?")])
    head_tokens = len(runtime.prompt_tokens(loaded, wire_view(before[:3])))
    new_tokens = len(runtime.prompt_tokens(loaded, request)) - len(runtime.prompt_tokens(loaded, wire_view(after)))

    runtime.generate(loaded, wire_view(before), max_tokens=2, cache_key=CACHE_KEY)
    cold = runtime.generate(loaded, request, max_tokens=2, cache_key=CACHE_KEY)
    assert cold.cached_tokens <= head_tokens + 8  # the splice left only the head reusable

    runtime.generate(loaded, wire_view(before), max_tokens=2, cache_key=CACHE_KEY)
    client.warm(wire_view(after))
    reused, read = client.last_warm.result()
    assert reused <= head_tokens + 8 and read > 0
    warm = runtime.generate(loaded, request, max_tokens=2, cache_key=CACHE_KEY)
    assert warm.prompt_tokens == cold.prompt_tokens
    # Only the new user message (the template around it, the token the warm leaves) is left to read.
    assert warm.prompt_tokens - warm.cached_tokens <= new_tokens + 8, (warm, new_tokens)
    assert warm.cached_tokens > cold.cached_tokens + 100


def test_a_warm_for_a_model_not_loaded_does_nothing(tiny_model, runtime):
    client = MlxChatClient(str(tiny_model.fp32), runtime=runtime)
    client.warm([{"role": "user", "content": "hi"}])
    assert client.last_warm is None and runtime.loaded(str(tiny_model.fp32)) is None


@pytest.mark.parametrize("rewarm", [True, False])
def test_a_published_splice_warms_the_chat_cache_when_configured(tiny_model, runtime, tmp_path, rewarm):
    model = str(tiny_model.fp32)
    config = Config().with_overrides({
        "model.provider": "mlx", "model.model": model, "model.context_length": 4096,
        "auxiliary.compression.provider": "extractive", "compression.policy": "per_exchange",
        "compression.protect_first_n": 1, "compression.target_ratio": 0.05, "compression.rewarm": rewarm,
    })
    client = MlxChatClient(model, runtime=runtime, timeout=WAIT_S)
    runtime.load(model)
    with Store(tmp_path / "state.db") as store:
        session = open_session(config, store, title="warm", chat=client, summarizer=ExtractiveSummarizer())
        session.resolve_context_window()
        for message in chat(6):
            session.append(message)
        report = session.publish_pass(session.plan_pass())
        assert report is not None and report.outcome == "absorbed"
        if rewarm:
            assert client.last_warm is not None
            client.last_warm.result()
            cache = runtime.loaded(model).prefixes[CACHE_KEY]
            expected = runtime.prompt_tokens(runtime.loaded(model), wire_view(session.conv.messages))
            assert cache.tokens == expected[:len(cache.tokens)] and len(cache.tokens) >= len(expected) - 8
        else:
            assert client.last_warm is None
        session.close()
