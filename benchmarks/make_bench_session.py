"""Derive ``hermes_tui/assets/bench_session.json`` from the bundled demo session.

    uv run python benchmarks/make_bench_session.py

The benchmark (``hermes-tui bench``) runs passes over this sample. It is the demo
session (a real 182-message agent session) with every assistant and tool message
longer than ``MAX_CHARS`` cut to its first and last ``MAX_CHARS // 2`` characters,
so each pass's prompt stays in the range the spec describes ("a few thousand
tokens" at most) and pass costs compare across the session's exchanges. The system
prompt and the user's task are kept whole (they are never in a pass's prompt).
Deterministic: tests check the committed file matches this script's output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ASSETS = Path(__file__).resolve().parents[1] / "hermes_tui" / "assets"
SOURCE = ASSETS / "demo_session.json"
TARGET = ASSETS / "bench_session.json"
MAX_CHARS = 2_000


def clip(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    keep = MAX_CHARS // 2
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters elided ...]\n{text[-keep:]}"


def derive(messages: list[dict]) -> list[dict]:
    out = []
    for message in messages:
        message = dict(message)
        if message["role"] in ("assistant", "tool") and isinstance(message.get("content"), str):
            message["content"] = clip(message["content"])
        out.append(message)
    return out


def render(messages: list[dict]) -> str:
    return json.dumps(derive(messages), indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    TARGET.write_text(render(json.loads(SOURCE.read_text(encoding="utf-8"))), encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
