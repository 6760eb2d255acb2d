"""What the session store writes per pass, and what a pass's commit costs as a session grows.

    uv run python benchmarks/bench_store.py [--passes 1000] [--timed 50] [--user-every 4]
                                            [--limit 32768] [--keep DIR] [--json]

(a) Rows written per pass and database size, against the anchor's strategy.
    A session grows by one exchange per turn (a user message every few turns); after
    each turn the new messages are flushed and a micro pass runs. Two stores are fed
    the very same turns, in the same run:

    * ``store``   : this app's ``Store.archive_and_compact``: the absorbed rows and the
                    superseded marker change state, one marker row is inserted.
    * ``rewrite`` : what the anchor did: in one transaction per pass, delete every
                    active row of the session and insert the new active transcript
                    again (the absorbed rows are archived too, so both databases end up
                    holding the same content).

    Rows written = SQLite's ``total_changes`` over the pass's transaction (rows, the
    FTS index's shadow rows, the session's timestamp). The flush of each turn is
    the same append for both and is reported separately. Database size is the main
    file after a WAL checkpoint.

(b) The commit time of a pass at 100 and at 10,000 stored messages.
    Two sessions are prefilled (through the store: flushed, then one batch compaction
    archives the middle) to ~100 and ~10,000 stored messages; then the same kind of
    micro pass is repeated on each, alternating in blocks, and only
    ``Store.archive_and_compact`` (BEGIN ... COMMIT) is timed. The ratio of the
    medians should be near 1: a pass's write does not depend on the session's size.
    The store runs with ``synchronous = NORMAL`` in WAL mode (no fsync per commit).

The summarizer is an **instant scripted stub, not a model**: a summary is a few
note lines (bounded, so no defrag), returned at once. Exchanges are real ones,
copied with fresh ids from the bundled demo session (hermes_tui/assets/demo_session.json).
Exit status 1 when the commit-time ratio is above 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.compaction.engine import Compactor
from hermes_tui.compaction.state import PassResult
from hermes_tui.compaction.summarizer import Completion
from hermes_tui.compaction.summary_request import SummaryRequest
from hermes_tui.config import CompressionConfig
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.core.transcript import Message, parse_transcript
from hermes_tui.session.wiring import build_compactor
from hermes_tui.store import Store

REPO = Path(__file__).resolve().parents[1]
DEMO_SESSION = REPO / "hermes_tui" / "assets" / "demo_session.json"
MAX_COMMIT_RATIO = 2.0
SUMMARY_LINES = 12
# Merge mode: the stub returns the whole running summary (capped at SUMMARY_LINES), so it
# stays small and every pass is an ordinary absorb; storage growth is what is measured.
MEASURED = CompressionConfig(micro_compact_mode="merge", fact_guard=False)


class InstantScriptedSummarizer:
    """NOT A MODEL: returns the running summary plus one note line (at most 12 lines), instantly."""

    model_name = "instant-scripted (benchmark stub, not a model)"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: SummaryRequest, *, max_tokens: int) -> Completion:
        self.calls += 1
        if request.kind != "absorb":
            return Completion("- condensed earlier work (benchmark stub).", "stop", None, None, 0.0)
        lines = [line for line in request.summary.splitlines() if line.strip()]
        lines.append(f"- step {self.calls}: ran a tool and read its output (benchmark stub).")
        return Completion("\n".join(lines[-SUMMARY_LINES:]), "stop", None, None, 0.0)

    def complete(self, messages, *, max_tokens):  # pragma: no cover - summarize() is used
        raise NotImplementedError


# --- turns from real exchanges --------------------------------------------------------------


class Turns:
    """An endless stream of turns: one real exchange (fresh ids), a user message every few turns."""

    def __init__(self, user_every: int):
        messages = parse_transcript(DEMO_SESSION.read_text(encoding="utf-8"), source=str(DEMO_SESSION))
        self.system = next(m for m in messages if m.role == "system")
        self.exchanges: list[list[Message]] = []
        n = 0
        while n < len(messages):
            end = n + 1
            if messages[n].role == "assistant":
                while end < len(messages) and messages[end].role == "tool":
                    end += 1
                self.exchanges.append(messages[n:end])
            n = end
        self.user_every = user_every
        self.turns = 0
        self.ids = count()

    def opening(self) -> list[Message]:
        return [Message(role="system", content=self.system.content), self._user()]

    def _user(self) -> Message:
        return Message(role="user", content=f"Request {self.turns}: carry on with the next step, and keep the "
                                            "public API of the module unchanged.")

    def next(self) -> list[Message]:
        out = [self._user()] if self.turns and self.turns % self.user_every == 0 else []
        template = self.exchanges[self.turns % len(self.exchanges)]
        self.turns += 1
        renamed: dict[str, str] = {}
        for msg in template:
            if msg.role == "assistant":
                calls = []
                for call in msg.tool_calls or []:
                    renamed[call["id"]] = f"call_{next(self.ids)}"
                    calls.append({**call, "id": renamed[call["id"]]})
                out.append(Message(role="assistant", content=msg.content, tool_calls=calls or None))
            else:
                out.append(Message(role="tool", content=msg.content, tool_call_id=renamed[msg.tool_call_id],
                                   name=msg.name))
        return out


def make_compactor(limit: int) -> Compactor:
    return build_compactor(
        MEASURED, summarizer=InstantScriptedSummarizer(), counter=EstimateCounter(), context_limit=limit,
        session_id="bench",
    )


# --- (a) rows written per pass ---------------------------------------------------------------


class Lane:
    """One store, one session, one compactor; ``persist`` is the strategy under test."""

    def __init__(self, path: Path, limit: int, strategy: str):
        self.store = Store(path)
        self.session = self.store.create_session(f"bench {strategy}").id
        self.compactor = make_compactor(limit)
        self.conv = Conversation(counter=self.compactor.ctx.counter)
        self.strategy = strategy
        self.pass_rows: list[int] = []
        self.message_rows: list[int] = []
        self.flush_rows = 0
        self.pass_seconds = 0.0
        self.pass_pages: list[int] = []
        # Checkpoint by hand, so the pages each pass writes to the WAL can be counted.
        self.store.conn.execute("PRAGMA wal_autocheckpoint = 0")

    def turn(self, messages: list[Message]) -> str:
        self.conv.extend(messages)
        before = self.store.conn.total_changes
        self.store.flush(self.session, messages)
        self.flush_rows += self.store.conn.total_changes - before
        persist = self.archive_and_compact if self.strategy == "store" else self.rewrite_active
        self.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        outcome = self.compactor.micro_pass(self.conv, persist).outcome
        if outcome in ("absorbed", "defrag"):
            self.pass_pages.append(self.store.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
        return outcome

    def _measured(self, write) -> None:
        before, started = self.store.conn.total_changes, time.perf_counter()
        message_rows = write()
        self.pass_seconds += time.perf_counter() - started
        self.pass_rows.append(self.store.conn.total_changes - before)
        self.message_rows.append(message_rows)

    def archive_and_compact(self, result: PassResult) -> None:
        def write() -> int:
            self.store.archive_and_compact(self.session, result)
            splice = result.splice
            return len(result.skipped) + (len(splice.archived) + 1 if splice else 0)

        self._measured(write)

    def rewrite_active(self, result: PassResult) -> None:
        """The anchor's way: delete every active row and insert the whole new transcript."""
        splice = result.splice
        removed = {index for index, _ in splice.removed}
        after = [m for i, m in enumerate(self.conv.messages) if i not in removed]
        after.insert(splice.marker_index, splice.marker)
        store, conn, sid = self.store, self.store.conn, self.session

        def write() -> int:
            with store._transaction():
                for msg in splice.archived:  # keep the originals and old markers, as the store does
                    conn.execute("UPDATE messages SET state = 'archived', archived_by = ? WHERE id = ?",
                                 (splice.marker.id, msg.id))
                deleted = conn.execute("DELETE FROM messages WHERE session_id = ? AND state = 'active'", (sid,))
                for position, msg in enumerate(after):
                    store._insert(sid, msg, position, "active")
                store._touch(sid)
            return len(splice.archived) + deleted.rowcount + len(after)

        self._measured(write)
        for msg in (*splice.archived, splice.marker):
            msg.stored = True

    def size(self) -> tuple[int, int]:
        """(main file bytes after a checkpoint, free pages)."""
        self.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        free = self.store.conn.execute("PRAGMA freelist_count").fetchone()[0]
        return self.store.path.stat().st_size, free


def rows_per_pass(folder: Path, passes: int, limit: int, user_every: int) -> dict:
    lanes = {name: Lane(folder / f"{name}.db", limit, name) for name in ("store", "rewrite")}
    sources = {name: Turns(user_every) for name in lanes}
    for name, lane in lanes.items():
        opening = sources[name].opening()
        lane.conv.extend(opening)
        lane.store.flush(lane.session, opening)
    outcomes: dict[str, dict[str, int]] = {name: {} for name in lanes}
    for _ in range(passes):
        for name, lane in lanes.items():  # the same turn for both, interleaved
            outcome = lane.turn(sources[name].next())
            outcomes[name][outcome] = outcomes[name].get(outcome, 0) + 1
    out = {}
    for name, lane in lanes.items():
        size, free = lane.size()
        rows = lane.pass_rows
        tenth = max(1, len(rows) // 10)
        out[name] = {
            "passes": passes,
            "published": len(rows),
            "outcomes": outcomes[name],
            "rows_per_pass_mean": statistics.fmean(rows) if rows else 0.0,
            "message_rows_per_pass_mean": statistics.fmean(lane.message_rows) if rows else 0.0,
            "wal_pages_per_pass_mean": statistics.fmean(lane.pass_pages) if lane.pass_pages else 0.0,
            "page_size": lane.store.conn.execute("PRAGMA page_size").fetchone()[0],
            "rows_per_pass_first_10pct": statistics.fmean(rows[:tenth]) if rows else 0.0,
            "rows_per_pass_last_10pct": statistics.fmean(rows[-tenth:]) if rows else 0.0,
            "rows_written_total": sum(rows),
            "flush_rows_total": lane.flush_rows,
            "pass_write_seconds_total": lane.pass_seconds,
            "db_bytes": size,
            "free_pages": free,
            "stored_messages": lane.store.count_rows(),
            "active_messages_at_end": len(lane.conv),
        }
        lane.store.close()
    return out


# --- (b) commit time at 100 and 10,000 stored messages -------------------------------------------


class Timed:
    def __init__(self, path: Path, stored: int, limit: int, user_every: int):
        self.store = Store(path)
        self.session = self.store.create_session(f"bench {stored}").id
        self.compactor = make_compactor(limit)
        self.conv = Conversation(counter=self.compactor.ctx.counter)
        self.turns = Turns(user_every)
        self.seconds: list[float] = []
        self.conv.extend(self.turns.opening())
        while len(self.conv) < stored:
            self.conv.extend(self.turns.next())
        self.store.flush(self.session, self.conv.messages)
        report = self.compactor.compress(self.conv, persist=lambda r: self.store.archive_and_compact(self.session, r))
        assert report.outcome == "compressed", report.outcome
        for _ in range(5):  # warm up: a micro marker in place, caches warm
            self.step(timed=False)

    def step(self, timed: bool = True) -> str:
        new = self.turns.next()
        self.conv.extend(new)
        self.store.flush(self.session, new)

        def persist(result: PassResult) -> None:
            started = time.perf_counter()
            self.store.archive_and_compact(self.session, result)
            if timed:
                self.seconds.append(time.perf_counter() - started)

        return self.compactor.micro_pass(self.conv, persist).outcome

    def stored(self) -> int:
        return self.store.conn.execute(
            "SELECT count(*) FROM messages WHERE session_id = ?", (self.session,)).fetchone()[0]


def commit_time(folder: Path, timed: int, limit: int, user_every: int) -> dict:
    sizes = (100, 10_000)
    lanes = {size: Timed(folder / f"timed-{size}.db", size, limit, user_every) for size in sizes}
    stored_before = {size: lane.stored() for size, lane in lanes.items()}
    block = 5
    while min(len(lane.seconds) for lane in lanes.values()) < timed:
        for lane in lanes.values():
            for _ in range(block):
                lane.step()
    out = {}
    for size, lane in lanes.items():
        seconds = sorted(lane.seconds[:timed])
        out[size] = {
            "stored_messages_before": stored_before[size],
            "stored_messages_after": lane.stored(),
            "passes_timed": len(seconds),
            "median_ms": statistics.median(seconds) * 1000,
            "p90_ms": seconds[int(0.9 * (len(seconds) - 1))] * 1000,
            "min_ms": seconds[0] * 1000,
        }
        lane.store.close()
    return out


# --- report -------------------------------------------------------------------------------------------


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=1000, help="passes on the growing session (a)")
    parser.add_argument("--timed", type=int, default=50, help="timed passes per size (b)")
    parser.add_argument("--user-every", type=int, default=4, help="a user message every N turns")
    parser.add_argument("--limit", type=int, default=32_768, help="the context window, in tokens")
    parser.add_argument("--keep", type=Path, help="write the databases here and keep them")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        rows = rows_per_pass(folder, args.passes, args.limit, args.user_every)
        commits = commit_time(folder, args.timed, args.limit, args.user_every)
        elapsed = time.perf_counter() - started

    store, rewrite = rows["store"], rows["rewrite"]
    rows_ratio = rewrite["rows_per_pass_mean"] / max(store["rows_per_pass_mean"], 1e-9)
    size_ratio = rewrite["db_bytes"] / max(store["db_bytes"], 1)
    commit_ratio = commits[10_000]["median_ms"] / max(commits[100]["median_ms"], 1e-9)
    if args.json:
        print(json.dumps({"rows_per_pass": rows, "commit_time": commits, "rows_ratio": rows_ratio,
                          "size_ratio": size_ratio, "commit_ratio": commit_ratio}, indent=1))
        return 1 if commit_ratio > MAX_COMMIT_RATIO else 0

    print(f"bench_store: summarizer = {InstantScriptedSummarizer.model_name}; exchanges from {DEMO_SESSION.name};")
    print(f"  a user message every {args.user_every} turns; window {args.limit:,} tokens; "
          "SQLite WAL, synchronous=NORMAL")
    print()
    print(f"(a) {args.passes:,} passes on a growing session, one exchange per turn")
    mib = 1024 * 1024
    print(table([
        ["strategy", "passes published", "message rows/pass", "rows/pass mean", "first 10%", "last 10%",
         "rows total", "pages/pass", "pass writes s", "db size", "stored msgs", "active at end"],
        *[[name, f"{r['published']:,}", f"{r['message_rows_per_pass_mean']:,.1f}", f"{r['rows_per_pass_mean']:,.1f}",
           f"{r['rows_per_pass_first_10pct']:,.1f}",
           f"{r['rows_per_pass_last_10pct']:,.1f}", f"{r['rows_written_total']:,}",
           f"{r['wal_pages_per_pass_mean']:,.1f}",
           f"{r['pass_write_seconds_total']:.2f}", f"{r['db_bytes'] / mib:.2f} MiB", f"{r['stored_messages']:,}",
           f"{r['active_messages_at_end']:,}"]
          for name, r in (("store (archive_and_compact)", store), ("rewrite every active row", rewrite))],
    ]))
    print("  rows = SQLite total_changes of the pass (message rows + FTS index rows + session timestamp);")
    print("  message rows = rows of the messages table inserted, updated or deleted by the pass")
    print(f"  pages/pass = {store['page_size']:,}-byte pages the pass wrote to the WAL (its disk I/O); the WAL is")
    print("  checkpointed before each pass to count them, which also makes 'pass writes s' slower than in (b)")
    print(f"  flush (the same append for both): {store['flush_rows_total']:,} rows over {args.passes:,} turns")
    print(f"  pass outcomes: {', '.join(f'{k} {v}' for k, v in sorted(store['outcomes'].items()))}")
    pages_ratio = rewrite["wal_pages_per_pass_mean"] / max(store["wal_pages_per_pass_mean"], 1e-9)
    print(f"  ratio rewrite / store: rows per pass {rows_ratio:,.1f}x, pages written per pass {pages_ratio:,.1f}x, "
          f"database size {size_ratio:.2f}x")
    print()
    print("(b) commit time of one pass (archive_and_compact: BEGIN ... COMMIT), by stored messages")
    print(table([
        ["stored messages", "passes", "median ms", "p90 ms", "min ms"],
        *[[f"{c['stored_messages_before']:,} -> {c['stored_messages_after']:,}", str(c["passes_timed"]),
           f"{c['median_ms']:.3f}", f"{c['p90_ms']:.3f}", f"{c['min_ms']:.3f}"] for c in commits.values()],
    ]))
    verdict = "ok" if commit_ratio <= MAX_COMMIT_RATIO else f"FAIL (above {MAX_COMMIT_RATIO})"
    print(f"  ratio median(10,000) / median(100): {commit_ratio:.2f}  {verdict}")
    print(f"\n({elapsed:.1f} s)")
    return 1 if commit_ratio > MAX_COMMIT_RATIO else 0


if __name__ == "__main__":
    raise SystemExit(main())
