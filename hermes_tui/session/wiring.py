"""Build the engine's parts from a validated config: counter, summarizer, window, compactor;
open a session, or store a transcript file as a new one; the agent's tools, with the
configured MCP servers started in the background."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from hermes_tui.compaction.engine import Compactor
from hermes_tui.compaction.micro import PRESSURE_SHARE, PassContext
from hermes_tui.compaction.policy import WATERMARK
from hermes_tui.compaction.summarizer import Summarizer
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import CompressionConfig, Config, ConfigError, ConfigProblem
from hermes_tui.core.tokens import (
    EstimateCounter,
    TokenCounter,
    TokenizerCounter,
    find_tokenizer_file,
)
from hermes_tui.providers.selection import make_summarizer

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_tui.chat.client import ChatClient
    from hermes_tui.session.agent import Tools
    from hermes_tui.session.session import Session
    from hermes_tui.store import SessionInfo, Store
    from hermes_tui.tools.mcp import McpManager, ServerState


class _Timeout(TypedDict, total=False):
    """``PassContext``'s timeout, given only when the caller names one (else its default)."""

    timeout_s: float


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


def build_compactor(
    compression: CompressionConfig,
    *,
    summarizer: Summarizer,
    counter: TokenCounter,
    context_limit: int | None,
    max_tokens_cap: int | None = None,
    timeout_s: float | None = None,
    pressure_share: float | None = PRESSURE_SHARE,
    session_id: str = "",
    main_model: str | None = None,
) -> Compactor:
    """A compactor reading one ``compression`` section: the section itself is its window's
    settings, which the passes and the policy read, so no value is copied on the way."""
    timeout: _Timeout = {} if timeout_s is None else {"timeout_s": timeout_s}
    ctx = PassContext(
        summarizer=summarizer,
        counter=counter,
        window=ContextWindow(limit=context_limit, settings=compression),
        max_tokens_cap=max_tokens_cap,
        **timeout,
        # The watermark policy folds a backlog with passes back to back, one exchange each: a
        # defrag of the whole middle in one call is what a small model cannot finish in time.
        pressure_share=None if compression.policy == WATERMARK else pressure_share,
    )
    return Compactor(ctx, session_id=session_id, main_model=main_model)


def make_compactor(
    config: Config,
    *,
    counter: TokenCounter,
    summarizer: Summarizer | None = None,
    context_limit: int | None = None,
    session_id: str = "",
) -> Compactor:
    return build_compactor(
        config.compression,
        summarizer=summarizer or make_summarizer(config.auxiliary.compression),
        counter=counter,
        context_limit=context_limit or config.model.context_length,
        max_tokens_cap=config.auxiliary.compression.max_tokens,
        timeout_s=config.auxiliary.compression.timeout,
        session_id=session_id,
        main_model=config.model.model or None,
    )


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
    from hermes_tui.compaction.state import recover_state
    from hermes_tui.compaction.window import head_end
    from hermes_tui.core.conversation import Conversation
    from hermes_tui.providers.selection import make_chat_client
    from hermes_tui.session.session import Session
    from hermes_tui.session.speeds import KeptSpeed
    from hermes_tui.store.counters import load_counters

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
    # Before the first pass: its defrag or batch is sized to the model as last measured here.
    kept_speed = KeptSpeed.open(store, summarizer, compactor.ctx.speed)
    if messages:
        # Now rather than at the first pass, so /usage and the status bar show the resumed
        # session's summary, passes and tokens saved from the start.
        compactor.state = recover_state(messages, head_end(messages, compactor.settings.protect_first_n), compactor.state)
    stored = load_counters(store, info.id) if session_id else None
    if stored is not None and stored[0] >= compactor.state.passes_total:
        # Passes after the newest marker (failed ones write none) are counted here only.
        compactor.state = compactor.state.evolve(passes_total=stored[0], tokens_saved_total=stored[1])
    conv = Conversation(messages, counter=counter)
    session = Session(config=config, store=store, info=info, chat=chat, compactor=compactor, conv=conv,
                      kept_speed=kept_speed)
    if messages:
        session.answer_unanswered()  # a crash mid-turn: its open calls get "interrupted" results
    return session


def import_transcript(store: Store, config: Config, path: Path, *, session: str | None = None) -> SessionInfo:
    """Store a transcript file (a message list, or a Hermes session file; ``session`` picks one
    of several) as a new session, all or nothing; its title: the session's own, else the file
    name. Raises TranscriptError for a bad file, StoreError for the database."""
    from hermes_tui.hermes_agent.sessions import read_transcript_file

    loaded = read_transcript_file(path, session=session)
    info = store.create_session(
        loaded.title or Path(path).stem, model=config.model.model or None,
        aux_model=config.auxiliary.compression.model or None,
        messages=loaded.messages, archived=loaded.archived,
    )
    store.release_lease(info.id)  # the opener takes it again
    return info


def start_mcp(config: Config, *, on_change: Callable[[ServerState], None] | None = None) -> McpManager | None:
    """The configured MCP servers, starting in the background (returns at once); None when
    there are none. A server that fails to start is a state of the manager, never an error
    here. The caller closes it (its children are stopped and reaped)."""
    if not config.mcp_servers:
        return None
    from hermes_tui.tools.mcp import McpManager

    manager = McpManager(config.mcp_servers, on_change=on_change)
    manager.start()
    return manager


def make_tools(config: Config, store: Store, *, mcp: McpManager | None = None, workspace: str | Path | None = None,
               mode: str | None = None) -> Tools:
    """The built-in tools and ``mcp``'s, under the configured approval mode; "always" rules
    kept in ``store``, per workspace."""
    from hermes_tui.session.agent import Tools
    from hermes_tui.store.rules import StoredRules
    from hermes_tui.tools.builtin import builtin_registry

    return Tools.from_config(config.agent, builtin_registry(), rules=StoredRules(store), workspace=workspace,
                             mode=mode, mcp=mcp)
