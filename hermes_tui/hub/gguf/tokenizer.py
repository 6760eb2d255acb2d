"""The tokenizer rebuilt from GGUF metadata as a ``tokenizer.json``: byte-level BPE (``gpt2``)
or SentencePiece BPE with byte fallback (``llama``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_tui.hub.gguf.header import md_value
from hermes_tui.hub.import_common import ModelImportError

if TYPE_CHECKING:  # tokenizers is imported where used: importing this module does not load it
    from tokenizers import Tokenizer

# Pre-tokenizer regexes, by tokenizer.ggml.pre (llama.cpp's llama-vocab.cpp names them).
_GPT2_FAMILY = {"default", "gpt-2", "gpt2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de",
                "jina-v2-es", "jina-v2-de", "jina-v1-en", "jina-v2-code", "roberta-bpe", "trillion",
                "granite-docling", "poro-chat", "viking", "gigachat"}
_DIGITS_THEN_GPT2 = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLIT_FAMILIES = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "smaug-bpe", "falcon3", "pixtral", "dbrx"), "llama3"),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"), "qwen2"),
}
# Pre-tokenizers whose BPE matches whole words in the vocabulary before merging.
_IGNORE_MERGES = {"llama3", "llama-v3", "llama-bpe", "smaug-bpe", "falcon3", "pixtral", "dbrx"}
SUPPORTED_PRE_TOKENIZERS = tuple(sorted(_GPT2_FAMILY | _DIGITS_THEN_GPT2 | set(_SPLIT_FAMILIES)))

TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNKNOWN = 3, 4, 2


def build_tokenizer(
    metadata: dict[str, Any], model_max_length: int
) -> tuple[Tokenizer, dict[str, Any], dict[str, Any]]:
    """(tokenizers.Tokenizer, tokenizer_config dict, config special ids) from GGUF metadata."""
    from tokenizers import AddedToken

    kind = metadata.get("tokenizer.ggml.model")
    tokens = list(metadata.get("tokenizer.ggml.tokens") or [])
    if not tokens:
        raise ModelImportError("the GGUF has no tokenizer.ggml.tokens")
    types = md_value(metadata, "tokenizer.ggml.token_type") or [1] * len(tokens)

    def token_of(key: str) -> str | None:
        idx = md_value(metadata, f"tokenizer.ggml.{key}")
        return tokens[int(idx)] if idx is not None and 0 <= int(idx) < len(tokens) else None

    if kind == "gpt2":
        tokenizer = _byte_level_bpe(metadata, tokens)
        add_bos_default = metadata.get("tokenizer.ggml.pre") in _IGNORE_MERGES
    elif kind == "llama":
        tokenizer = _sentencepiece_bpe(metadata, tokens, types, token_of("unknown_token_id"))
        add_bos_default = True  # llama.cpp and transformers both default to BOS for SPM
    else:
        raise ModelImportError(f"tokenizer type {kind!r} is not supported")

    # Control tokens (<|im_start|>, <s>) are special; user-defined ones (<think>) are added
    # tokens that are matched whole but kept in decoded text.
    tokenizer.add_special_tokens([
        AddedToken(tok, special=True, normalized=False)
        for tok, typ in zip(tokens, types) if typ == TOKEN_CONTROL
    ])
    tokenizer.add_tokens([
        AddedToken(tok, special=False, normalized=False)
        for tok, typ in zip(tokens, types) if typ == TOKEN_USER_DEFINED
    ])

    bos, eos = token_of("bos_token_id"), token_of("eos_token_id")
    add_bos = bool(md_value(metadata, "tokenizer.ggml.add_bos_token", add_bos_default)) and bos is not None
    add_eos = bool(md_value(metadata, "tokenizer.ggml.add_eos_token", False)) and eos is not None
    _set_post_processor(tokenizer, kind, bos if add_bos else None, eos if add_eos else None)

    tokenizer_config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "unk_token": token_of("unknown_token_id"),
        "pad_token": token_of("padding_token_id"),
        "add_bos_token": add_bos,
        "add_eos_token": add_eos,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
    }
    templates = {
        key[len("tokenizer.chat_template"):].lstrip(".") or "default": value
        for key, value in metadata.items()
        if key.startswith("tokenizer.chat_template") and isinstance(value, str)
    }
    if set(templates) == {"default"}:
        tokenizer_config["chat_template"] = templates["default"]
    elif templates:
        tokenizer_config["chat_template"] = [{"name": k, "template": v} for k, v in sorted(templates.items())]

    # Generation stops at EOS and at llama.cpp's end-of-turn tokens (Llama 3's <|eot_id|>).
    stop_ids: list[int] = []
    for key in ("eos_token_id", "eot_token_id", "eom_token_id"):
        idx = md_value(metadata, f"tokenizer.ggml.{key}")
        if idx is not None and int(idx) not in stop_ids:
            stop_ids.append(int(idx))
    special_ids: dict[str, Any] = {
        "bos_token_id": md_value(metadata, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": stop_ids[0] if len(stop_ids) == 1 else (stop_ids or None),
    }
    pad = md_value(metadata, "tokenizer.ggml.padding_token_id")
    if pad is not None:
        special_ids["pad_token_id"] = pad
    return tokenizer, tokenizer_config, special_ids


def _merges(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    merges = []
    for merge in metadata.get("tokenizer.ggml.merges") or []:
        left, sep, right = merge.partition(" ")
        if not sep:
            raise ModelImportError(f"malformed tokenizer merge {merge!r}")
        merges.append((left, right))
    return merges


def _vocab(tokens: list[str]) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        vocab.setdefault(tok, i)  # a duplicate keeps its first id
    return vocab


def _byte_level_bpe(metadata: dict[str, Any], tokens: list[str]) -> Tokenizer:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    pre = metadata.get("tokenizer.ggml.pre") or "default"
    merges = _merges(metadata)
    if not merges:
        raise ModelImportError("the GGUF's byte-level BPE tokenizer has no merges")
    model = models.BPE(vocab=_vocab(tokens), merges=merges, ignore_merges=pre in _IGNORE_MERGES)
    tokenizer = Tokenizer(model)
    if pre in _GPT2_FAMILY:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre in _DIGITS_THEN_GPT2:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    elif pre in _SPLIT_FAMILIES:
        family = _SPLIT_FAMILIES[pre]
        pattern = _LLAMA3_SPLIT if family == "llama3" else _QWEN2_SPLIT
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        if family == "qwen2":
            tokenizer.normalizer = normalizers.NFC()
    else:
        raise ModelImportError(
            f"pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported "
            f"(supported: {', '.join(SUPPORTED_PRE_TOKENIZERS)})"
        )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _sentencepiece_bpe(metadata: dict[str, Any], tokens: list[str], types: list[int], unk: str | None) -> Tokenizer:
    """SentencePiece BPE (Llama 2, Mistral, TinyLlama) as a tokenizers BPE with byte fallback.

    GGUF keeps SentencePiece's scores, not merges; the merges are recovered from the
    vocabulary: every split of a token into two tokens, ranked by the whole token's score
    (how SentencePiece's BPE chooses its next merge).
    """
    from tokenizers import Tokenizer, decoders, models, normalizers

    scores = md_value(metadata, "tokenizer.ggml.scores")
    if scores is None or len(scores) != len(tokens):
        raise ModelImportError("the GGUF's SentencePiece tokenizer has no scores")
    vocab = _vocab(tokens)
    merges = _merges(metadata) or _merges_from_scores(tokens, scores, types, vocab)
    if unk is None and "<unk>" in vocab:
        unk = "<unk>"
    model = models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True, byte_fallback=True)
    tokenizer = Tokenizer(model)
    add_space = bool(md_value(metadata, "tokenizer.ggml.add_space_prefix", True))
    # Like Llama 2's own tokenizer.json: always prefix "▁" (SentencePiece's dummy prefix;
    # llama.cpp adds it to every text fragment after a special token too). A Metaspace
    # pre-tokenizer would skip it for text that already starts with a space.
    replace = normalizers.Replace(" ", "\u2581")
    tokenizer.normalizer = (
        normalizers.Sequence([normalizers.Prepend("\u2581"), replace]) if add_space else replace
    )
    tokenizer.pre_tokenizer = None
    steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_space:
        steps.append(decoders.Strip(content=" ", left=1, right=0))
    tokenizer.decoder = decoders.Sequence(steps)
    return tokenizer


def _merges_from_scores(
    tokens: list[str], scores: list[float], types: list[int], vocab: dict[str, int]
) -> list[tuple[str, str]]:
    ranked = []
    for tok, score, typ in zip(tokens, scores, types):
        if typ != 1 or len(tok) < 2:  # only normal tokens are made by merging
            continue
        for cut in range(1, len(tok)):
            left, right = tok[:cut], tok[cut:]
            if left in vocab and right in vocab:
                ranked.append((-float(score), vocab[left], vocab[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def _set_post_processor(tokenizer: Tokenizer, kind: str, bos: str | None, eos: str | None) -> None:
    from tokenizers import processors

    steps: list[processors.PostProcessor] = []
    if kind == "gpt2":
        steps.append(processors.ByteLevel(trim_offsets=False))
    if bos or eos:
        def ids(tok: str) -> tuple[str, int | None]:
            return (tok, tokenizer.token_to_id(tok))

        prefix, suffix = (f"{bos} " if bos else ""), (f" {eos}" if eos else "")
        steps.append(processors.TemplateProcessing(
            single=f"{prefix}$A{suffix}",
            pair=f"{prefix}$A{suffix} {prefix}$B{suffix}",
            special_tokens=[ids(t) for t in dict.fromkeys(x for x in (bos, eos) if x)],
        ))
    if len(steps) == 1:
        tokenizer.post_processor = steps[0]
    elif steps:
        tokenizer.post_processor = processors.Sequence(steps)
