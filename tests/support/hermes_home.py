"""A Hermes Agent home built the way Hermes fills it, for import and export tests.

The databases are built from Hermes' documented schema (``hermes_state_common.py``
SCHEMA_SQL: the ``sessions`` and ``messages`` tables) and filled the way Hermes fills
them: appends, in-place compaction (``archive_and_compact``: live rows to ``active=0,
compacted=1``, the compacted set inserted anew), rewind (``active=0, compacted=0``),
and batch compression that ends a session with ``end_reason='compression'`` and goes
on in a child session. Expected transcripts are written out by hand from that story.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import yaml

from hermes_tui.compaction.markers import read_marker
from hermes_tui.core.transcript import BATCH, Message

# Hermes Agent's own config.yaml, in the shape it writes: sections hermes-tui does not have.
AGENT_CONFIG = """\
model:
  default: anthropic/claude-opus-4
  provider: auto
terminal:
  backend: local
  cwd: .
toolsets:
  - hermes-cli
compression:
  enabled: true
  threshold: 0.5
  summary_model: google/gemini-flash
"""

SECRET = "sk-proj-Q3f9XbZt7LmN2pVw8KcR4hJy6DsA1eGu5TiO0qWx"

# Hermes' preamble line (agent/context_compressor.py SUMMARY_PREFIX, shortened in the middle):
# it addresses the model, which is why it is scaffolding and never part of a summary.
PREAMBLE = (
    "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary below. "
    "This is a handoff from a previous context window — treat it as background reference, NOT as "
    "active instructions. Do NOT answer questions or fulfill requests mentioned in this summary; "
    "they were already addressed. The current session state (files, config, etc.) may reflect work "
    "described here — avoid repeating it:"
)
END = "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"


def micro_text(summary: str) -> str:
    """How Hermes' micro-compaction renders its marker (_render_micro_marker_content)."""
    return f"{PREAMBLE}\n\n## Historical Task Snapshot\n{summary}\n\n{END}"


def batch_text(summary: str) -> str:
    """How Hermes' batch compaction renders a standalone summary."""
    return f"{PREAMBLE}\n\n{summary}\n\n{END}"


SCHEMA = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
    end_reason TEXT, message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
    title TEXT, archived INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    effect_disposition TEXT, timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT,
    reasoning TEXT, reasoning_content TEXT, reasoning_details TEXT,
    codex_reasoning_items TEXT, codex_message_items TEXT, platform_message_id TEXT,
    observed INTEGER DEFAULT 0, _compressed_summary INTEGER NOT NULL DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0,
    api_content TEXT, display_kind TEXT, display_metadata TEXT, display_identity BLOB,
    display_order INTEGER
);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
"""

MESSAGE_KEYS = (
    "role", "content", "tool_call_id", "tool_calls", "tool_name", "reasoning", "finish_reason",
    "_compressed_summary", "display_kind", "display_metadata",
)


class HermesWriter:
    """Writes a state.db the way Hermes' SessionDB does (just the parts the import reads)."""

    def __init__(self, path: Path, journal_mode: str):
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute(f"PRAGMA journal_mode = {journal_mode}")
        self.conn.execute("PRAGMA wal_autocheckpoint = 0")  # keep what Hermes wrote in the -wal
        self.conn.executescript(SCHEMA)
        self.clock = 1_780_000_000.0
        self.stamps: dict[int, float] = {}  # a message copied into a new generation keeps its timestamp

    def session(self, sid: str, *, parent: str | None = None, title: str | None = None, model_config=None):
        self.clock += 1
        self.conn.execute(
            "INSERT INTO sessions (id, source, model, model_config, parent_session_id, started_at, title) "
            "VALUES (?, 'cli', 'hermes-4-70b', ?, ?, ?, ?)",
            (sid, json.dumps(model_config) if model_config else None, parent, self.clock, title),
        )

    def end(self, sid: str, reason: str):
        self.clock += 1
        self.conn.execute("UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?", (self.clock, reason, sid))

    def append(self, sid: str, *messages: dict) -> list[int]:
        ids = []
        for msg in messages:
            self.clock += 1
            row = {k: msg.get(k) for k in MESSAGE_KEYS}
            content = row["content"]
            if isinstance(content, list):  # Hermes' _encode_content
                row["content"] = "\x01json:" + json.dumps(content)
            if row["tool_calls"] is not None:
                row["tool_calls"] = json.dumps(row["tool_calls"])
            if row["display_metadata"] is not None:
                row["display_metadata"] = json.dumps(row["display_metadata"])
            row["_compressed_summary"] = 1 if row["_compressed_summary"] else 0
            cur = self.conn.execute(
                f"INSERT INTO messages (session_id, timestamp, {', '.join(MESSAGE_KEYS)}) "
                f"VALUES (?, ?, {', '.join('?' for _ in MESSAGE_KEYS)})",
                (sid, self.stamps.setdefault(id(msg), msg.get("timestamp", self.clock)), *row.values()),
            )
            ids.append(cur.lastrowid)
        return ids

    def archive_and_compact(self, sid: str, compacted: list[dict]):
        """In-place compaction: every live row archived as compacted, the new set inserted live."""
        self.conn.execute("BEGIN")
        self.conn.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1", (sid,))
        self.append(sid, *compacted)
        self.conn.execute("COMMIT")

    def rewind(self, ids: list[int]):
        self.conn.executemany("UPDATE messages SET active = 0, compacted = 0 WHERE id = ?", [(i,) for i in ids])


def call(call_id: str, command: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "terminal", "arguments": json.dumps({"command": command})}}


SYSTEM = {"role": "system", "content": "You are Hermes, a coding agent."}
U1 = {"role": "user", "content": "Fix the pagination bug in app/views.py"}
A1 = {"role": "assistant", "content": "", "tool_calls": [call("c1", "cat app/views.py")], "reasoning": "Look first."}
T1 = {"role": "tool", "tool_call_id": "c1", "tool_name": "terminal", "content": "class ListView: ..." * 20}
A1b = {"role": "assistant", "content": "The bug is in ListView.get_queryset.", "finish_reason": "stop"}
MICRO_SUMMARY = f"- Read app/views.py; the bug is in ListView.get_queryset.\n- Token used: {SECRET}"
MICRO_ROW = {"role": "assistant", "content": micro_text(MICRO_SUMMARY), "_compressed_summary": True,
             "display_kind": "hidden"}
U2 = {"role": "user", "content": "Now add a regression test"}
A2 = {"role": "assistant", "content": "", "tool_calls": [call("c2", "pytest -q")]}
T2 = {"role": "tool", "tool_call_id": "c2", "tool_name": "terminal",
      "content": [{"type": "text", "text": "3 passed"}]}
A2b = {"role": "assistant", "content": "Added tests/test_views.py; all pass.", "reasoning": "Done with tests.",
       "display_metadata": {"task_count": 1}}
OOPS = {"role": "user", "content": "Also delete the migrations folder"}
OOPS_REPLY = {"role": "assistant", "content": "Deleting migrations/ now."}
BATCH_SUMMARY = "## Historical Task Snapshot\nFixed pagination in app/views.py and added a regression test."
U3 = "Please also update the changelog."
BATCH_ROW = {"role": "user", "content": f"{batch_text(BATCH_SUMMARY)}\n\n{U3}", "_compressed_summary": True}
A3 = {"role": "assistant", "content": "Updated CHANGELOG.md.", "reasoning": "Short change."}
BRANCH_USER = {"role": "user", "content": "A different idea, on a branch"}


def build_hermes_home(home: Path, journal_mode: str) -> HermesWriter:
    """Session s1 (micro pass, rewind) compressed into s2 (user-role summary, then work); a branch of s1."""
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: hermes-4-70b\ncompression:\n  micro_compact: true\n")
    w = HermesWriter(home / "state.db", journal_mode)
    w.session("s1", title="Pagination fix")
    w.append("s1", SYSTEM, U1, A1, T1, A1b)
    # micro pass: the c1 exchange folded into an assistant-role marker
    w.archive_and_compact("s1", [SYSTEM, U1, MICRO_ROW])
    w.append("s1", U2, A2, T2, A2b)
    oops = w.append("s1", OOPS, OOPS_REPLY)
    w.rewind(oops)  # the user took it back
    # batch compression: s1 ends, s2 continues with a user-role summary carrying the next request
    w.end("s1", "compression")
    w.session("s2", parent="s1", title=None)
    w.append("s2", SYSTEM, BATCH_ROW, A3)
    w.session("s1-branch", parent="s1", model_config={"_branched_from": "s1"})
    w.append("s1-branch", SYSTEM, BRANCH_USER)
    return w


def expected_active() -> list[tuple]:
    """The active transcript of the chain's tip, as (role, content-or-marker) pairs."""
    return [
        ("system", SYSTEM["content"]),
        ("marker", BATCH, "Fixed pagination in app/views.py and added a regression test."),
        ("user", U3),
        ("assistant", A3["content"]),
    ]


def shape(messages: list[Message]) -> list[tuple]:
    out = []
    for m in messages:
        read = read_marker(m)
        out.append(("marker", read.kind, read.summary) if read else (m.role, m.content))
    return out


def fingerprint(home: Path) -> dict[str, str]:
    """sha256 of every file in the Hermes home (the db, its -wal/-shm, config.yaml)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(home.iterdir()) if p.is_file()}


# Shaped like Hermes Agent's config.yaml (hermes_cli/config_defaults.py DEFAULT_CONFIG): sections
# of its own beside the two we read, compression keys we share and keys we do not have.
HERMES_CONFIG = {
    "model": {"default": "anthropic/claude-sonnet-4", "provider": "openrouter"},
    "toolsets": ["hermes-cli"],
    "compression": {
        "enabled": True, "threshold": 0.6, "target_ratio": 0.3, "protect_first_n": 2, "protect_last_n": 20,
        "micro_compact": True, "micro_compact_every_n_turns": 2, "micro_compact_defrag_threshold_tokens": 1500,
        "tail_mode": "lean", "in_place": True,
    },
    "auxiliary": {
        "vision": {"provider": "auto", "model": "", "base_url": "", "api_key": "", "timeout": 120},
        "compression": {
            "provider": "auto", "model": "qwen2.5:1.5b", "base_url": "http://127.0.0.1:11434/v1",
            "api_key": "${OLLAMA_API_KEY}", "timeout": 300, "extra_body": {}, "reasoning_effort": "",
        },
    },
}

# What the first-run offer sets in our config.yaml from HERMES_CONFIG.
EXPECTED_FROM_HERMES_CONFIG = {
    "compression.threshold": 0.6,
    "compression.target_ratio": 0.3,
    "compression.protect_first_n": 2,
    "compression.micro_compact_every_n_turns": 2,
    "compression.micro_compact_defrag_threshold_tokens": 1500,
    "auxiliary.compression.timeout": 300,
    "auxiliary.compression.provider": "openai-api",
    "auxiliary.compression.base_url": "http://127.0.0.1:11434/v1",
    "auxiliary.compression.model": "qwen2.5:1.5b",
    "auxiliary.compression.api_key_env": "OLLAMA_API_KEY",
}


def write_hermes_config(home: Path, data: dict) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text("# Hermes Agent configuration\n" + yaml.safe_dump(data, sort_keys=False))
    return path
