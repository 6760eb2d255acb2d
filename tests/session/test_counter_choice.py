"""Which tokenizer counts the chat context: the chat model's, never the compression model's.

The window's occupancy is a share of the chat model's context, so swapping the compression
model must leave every count as it was.
"""

from __future__ import annotations

from pathlib import Path

from hermes_tui.config import Config
from hermes_tui.core.tokens import EstimateCounter, TokenizerCounter
from hermes_tui.session.wiring import make_counter

TEXT = "Read hermes_tui/session/wiring.py and count_text() the 3 files under tests/session/ again, please."


def word_level_tokenizer(folder: Path) -> Path:
    """A model folder whose tokenizer.json splits on whitespace only: a very different vocabulary."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    tokenizer = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = WhitespaceSplit()
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def config(chat: str, compression: str) -> Config:
    return Config().with_overrides({"model.model": chat, "auxiliary.compression.model": compression})


def test_the_compression_model_never_changes_the_chat_count(tiny_model, tmp_path):
    other = word_level_tokenizer(tmp_path / "other-model")
    chat_tokenizer = TokenizerCounter(tiny_model.fp32 / "tokenizer.json").count_text(TEXT)
    assert TokenizerCounter(other / "tokenizer.json").count_text(TEXT) != chat_tokenizer  # the two really differ

    counts = {compression: make_counter(config(str(tiny_model.fp32), compression)).count_text(TEXT)
              for compression in ("", str(other), str(tiny_model.q4))}
    assert counts == dict.fromkeys(counts, chat_tokenizer)


def test_a_served_chat_model_is_estimated_whatever_the_compression_model(tiny_model):
    # The chat model is a name an endpoint serves: no tokenizer of it here, so the estimate.
    estimate = EstimateCounter().count_text(TEXT)
    assert TokenizerCounter(tiny_model.fp32 / "tokenizer.json").count_text(TEXT) != estimate
    for compression in ("", str(tiny_model.fp32)):
        assert make_counter(config("qwen2.5-coder:7b", compression)).count_text(TEXT) == estimate
