"""Record how real models write tool calls: native ``tool_calls``, a text form, or neither.

Sends realistic agent requests (a system message describing a workspace, the app's real
tool specs, a user task) to an OpenAI-compatible server, non-streamed, temperature 0, and
saves each reply (content, finish_reason, tool_calls) to a JSON fixture; then prints the
count per kind: native, recovered per text form (``chat.text_tool_calls``), text that looks
like a call but is not recovered, and neither.

    ../shared/realmodels/serve qwen2.5-coder-1.5b-instruct-q4_k_m 18522
    uv run python benchmarks/record_text_calls.py --url http://127.0.0.1:18522/v1 \
        --out tests/chat/fixtures/text_calls_qwen2.5-coder-1.5b.json
    uv run python benchmarks/record_text_calls.py --count tests/chat/fixtures/*.json   # counts only
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import urllib.request
from collections import Counter
from pathlib import Path

from hermes_tui.chat.text_tool_calls import recover_calls
from hermes_tui.tools.builtin import builtin_registry

SYSTEM = (
    "You are a coding agent working in the workspace /home/dev/shop, a git repository of a "
    "small Python project (setup.cfg, src/shop/, tests/). OS: Linux, shell: bash. "
    "Use the tools to read, search, run and edit; paths are relative to the workspace. "
    "Read a file before editing it."
)

TASKS = [
    "Find where class Cart is defined.",
    "Run the tests.",
    "Read setup.cfg.",
    "List the files in src/shop.",
    "Which files import requests?",
    "Find all Python test files.",
    "What does the function apply_discount in src/shop/pricing.py do?",
    "Change the version in setup.cfg to 1.2.0.",
    "Create a file NOTES.md that says 'todo: add coupons'.",
    "Show me the git log of the last 5 commits.",
    "Search for TODO comments in the code.",
    "Rename the function total_price to cart_total in src/shop/cart.py.",
    "Fix the failing test in tests/test_cart.py.",
    "How many lines does src/shop/cart.py have?",
    "Find the definition of DefaultAgent and tell me what its run method does.",
    "Install the dependencies with pip.",
]

NEAR_CALL = ('"name"', "<tool_call>", "<function=", '"arguments"')


def ask(url: str, task: str, tools: list[dict], timeout: float, max_tokens: int) -> dict:
    body = {"model": "any", "temperature": 0, "max_tokens": max_tokens, "tools": tools,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]}
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        reply = json.load(response)
    choice = reply["choices"][0]
    message = choice["message"]
    return {"task": task, "content": message.get("content") or "", "finish_reason": choice.get("finish_reason"),
            "tool_calls": message.get("tool_calls") or None, "model": reply.get("model")}


def kind(reply: dict, tools: list[dict]) -> str:
    if reply["tool_calls"]:
        return "native"
    recovered = recover_calls(reply["content"], tools)
    if recovered is not None:
        return f"recovered:{recovered.form}"
    if any(marker in reply["content"] for marker in NEAR_CALL):
        return "call-like text, not run"
    return "neither"


def count(paths: list[str]) -> None:
    tools = builtin_registry().specs()
    for path in paths:
        fixture = json.loads(Path(path).read_text())
        kinds = Counter(kind(reply, tools) for reply in fixture["replies"])
        print(f"{fixture['model']} ({fixture['date']}, {len(fixture['replies'])} requests):")
        for name, n in kinds.most_common():
            print(f"  {name:32} {n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--out")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--max-tokens", type=int, default=512,
                        help="a call needs < 150; a cut-off answer still counts as 'neither'")
    parser.add_argument("--tasks", type=int, default=len(TASKS), help="the first N tasks only")
    parser.add_argument("--count", nargs="*")
    args = parser.parse_args()
    if args.count:
        count(args.count)
        return
    if not (args.url and args.out):
        sys.exit("--url and --out, or --count FIXTURE...")
    tools = builtin_registry().specs()
    out = Path(args.out)
    # Saved after every reply and resumed from: on a loaded machine a run takes many minutes.
    fixture = json.loads(out.read_text()) if out.exists() else {
        "model": "?", "date": datetime.date.today().isoformat(),
        "note": f"llama-server --jinja (../shared/realmodels/serve), temperature 0, max_tokens {args.max_tokens}, "
                "tools: builtin_registry().specs(); benchmarks/record_text_calls.py",
        "system": SYSTEM, "replies": []}
    done = {reply["task"] for reply in fixture["replies"]}
    for task in TASKS[:args.tasks]:
        if task in done:
            continue
        try:
            reply = ask(args.url, task, tools, args.timeout, args.max_tokens)
        except OSError as exc:  # a timeout: the task is left for the next run
            print(f"{task[:50]:52} failed: {exc}", flush=True)
            continue
        print(f"{task[:50]:52} {reply['finish_reason']:10} {json.dumps(reply['content'])[:100]}", flush=True)
        fixture["model"] = reply["model"]
        fixture["replies"].append(reply)
        out.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    count([args.out])


if __name__ == "__main__":
    main()
