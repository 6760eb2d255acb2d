"""Build the engine's parts from a validated config: counter, summarizer, window, compactor;
open a session, or store a transcript file as a new one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hermes_tui.compaction.engine import CompactionSettings, Compactor
from hermes_tui.compaction.micro import PassContext
from hermes_tui.compaction.summarizer import Summarizer
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import Config, ConfigError, ConfigProblem
from hermes_tui.hermes_sessions import read_transcript_file
from hermes_tui.summarizers.select import make_summarizer
from hermes_tui.tokens import EstimateCounter, TokenCounter, TokenizerCounter, find_tokenizer_file

if TYPE_CHECKING:
    from hermes_tui.chat.client import ChatClient
    from hermes_tui.session.session import Session
    from hermes_tui.store import SessionInfo, Store


def make_counter(config: Config) -> TokenCounter:
    """The configured tokenizer (an error if it cannot be read), else the chat model's when it is
    a local folder, else the estimate.

    It counts the chat context against the chat model's window, so the compression model's
    tokenizer (another vocabulary) is never used: changing that model must not move occupancy.
    """
    explicit = config.compression.tokenizer
    if explicit:
        found = find_tokenizer_file(explicit)
        if found is None:
            raise ConfigError([ConfigProblem(
                origin=None, key="compression.tokenizer", line=None,
                message=f"no tokenizer.json at {explicit}",
            )])
        try:
            return TokenizerCounter(found)
        except Exception as exc:  # noqa: BLE001 - the tokenizers library raises plain Exception
            raise ConfigError([ConfigProblem(
                origin=None, key="compression.tokenizer", line=None,
                message=f"cannot read tokenizer {found}: {exc}",
            )]) from None
    model = config.model.model
    found = find_tokenizer_file(model) if model and Path(model).expanduser().exists() else None
    if found is not None:
        try:
            return TokenizerCounter(found)
        except Exception:  # noqa: BLE001 - an unreadable model tokenizer falls back to the estimate
            pass
    return EstimateCounter()


def compaction_settings(config: Config) -> CompactionSettings:
    c = config.compression
    return CompactionSettings(
        enabled=c.enabled,
        threshold=c.threshold,
        target_ratio=c.target_ratio,
        protect_first_n=c.protect_first_n,
        micro_compact=c.micro_compact,
        micro_compact_every_n_turns=c.micro_compact_every_n_turns,
        policy=c.policy,
        high_water=c.high_water,
        low_water=c.low_water,
        micro_compact_defrag_threshold_tokens=c.micro_compact_defrag_threshold_tokens,
        micro_compact_mode=c.micro_compact_mode,
        fact_guard=c.fact_guard,
    )


def make_compactor(
    config: Config,
    *,
    counter: TokenCounter,
    summarizer: Summarizer | None = None,
    context_limit: int | None = None,
    session_id: str = "",
) -> Compactor:
    settings = compaction_settings(config)
    window = ContextWindow(
        limit=context_limit or config.model.context_length,
        threshold=settings.threshold,
        target_ratio=settings.target_ratio,
    )
    ctx = PassContext(
        summarizer=summarizer or make_summarizer(config.auxiliary.compression),
        counter=counter,
        window=window,
        protect_first_n=settings.protect_first_n,
        defrag_threshold_tokens=settings.micro_compact_defrag_threshold_tokens,
        max_tokens_cap=config.auxiliary.compression.max_tokens,
        mode=settings.micro_compact_mode,
        fact_guard=settings.fact_guard,
    )
    return Compactor(ctx, settings, session_id=session_id, main_model=config.model.model or None)


def open_session(
    config: Config,
    store: Store,
    *,
    session_id: str | None = None,
    title: str = "",
    chat: ChatClient | None = None,
    summarizer: Summarizer | None = None,
) -> Session:
    """A new session, or a stored one resumed: its active rows, compaction state from its marker.

    The context window starts unresolved (occupancy null); call
    ``Session.resolve_context_window`` to resolve it in the background. Resuming needs
    the session's lease (``Store.acquire_lease``): calls a crash left unanswered are
    given their "interrupted" results, stored.
    """
    from hermes_tui.chat.select import make_chat_client
    from hermes_tui.compaction.state import recover_state
    from hermes_tui.compaction.window import head_end
    from hermes_tui.conversation import Conversation
    from hermes_tui.session.session import Session

    counter = make_counter(config)
    chat = chat or make_chat_client(config.model)
    summarizer = summarizer or make_summarizer(config.auxiliary.compression)
    if session_id:
        info = store.get_session(session_id)
        messages = store.load_active(info.id)
    else:
        info = store.create_session(
            title, model=config.model.model or None, aux_model=config.auxiliary.compression.model or None
        )
        messages = []
    compactor = make_compactor(config, counter=counter, summarizer=summarizer, session_id=info.id)
    if messages:
        # Now rather than at the first pass, so /usage and the status bar show the resumed
        # session's summary, passes and tokens saved from the start.
        compactor.state = recover_state(messages, head_end(messages, compactor.ctx.protect_first_n), compactor.state)
    conv = Conversation(messages, counter=counter)
    session = Session(config=config, store=store, info=info, chat=chat, compactor=compactor, conv=conv)
    if messages:
        session.answer_unanswered()  # a crash mid-turn: its open calls get "interrupted" results
    return session


def import_transcript(store: Store, config: Config, path: Path) -> SessionInfo:
    """Store a transcript file (a message list, or a Hermes session file) as a new session, all
    or nothing; its title: the session's own, else the file name. Raises TranscriptError for a
    bad file, StoreError for the database."""
    loaded = read_transcript_file(path)
    info = store.create_session(
        loaded.title or Path(path).stem, model=config.model.model or None,
        aux_model=config.auxiliary.compression.model or None,
        messages=loaded.messages, archived=loaded.archived,
    )
    store.release_lease(info.id)  # the opener takes it again
    return info
