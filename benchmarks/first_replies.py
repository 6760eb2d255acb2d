"""Does the model look before it answers? The first reply to a workspace question, per prompt.

For each prompt variant, sends each task SAMPLES times (the server's default sampling) to an
OpenAI-compatible server, with the app's real system prompt (``session.system_prompt.build``
for a generated project, approval full, headless) and tool specs, and counts the first replies
that call a valid tool: natively, or written as text that ``chat.text_tool_calls`` recovers.
Variants: ``app`` (the prompt as it is), ``app+line`` (one more line telling it to call a tool
to look first), ``app+example`` (one made-up exchange, a grep call and its answer, before the
task). ``--dump FILE`` keeps every reply (for fixtures).

    ../shared/realmodels/serve qwen2.5-coder-1.5b-instruct-q4_k_m 18523
    uv run python benchmarks/first_replies.py --url http://127.0.0.1:18523/v1 --samples 3
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.request
from pathlib import Path

from agent_task_project import make_project

from hermes_tui.chat.text_tool_calls import recover_calls
from hermes_tui.session import system_prompt
from hermes_tui.tools.builtin import builtin_registry

TASKS = [
    "Which file in this repository defines the class InventoryLedger? Answer with the file's path.",
    "How many entries does the ROWS list in shopkit/fixtures.py have? Answer with the number.",
    "In shopkit/pricing.py, what is the default currency of format_price? Answer with the currency code.",
    "Run the tests and tell me which one fails.",
]
LINE = ("\nBefore answering a question about the workspace, call a tool to look (grep to find a name, "
        "read_file to read a file); never answer from memory.")
EXAMPLE = [  # another project's question, so nothing in it answers a task
    {"role": "user", "content": "Where is the function parse_args defined in this repository?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "ex1", "type": "function", "function": {
        "name": "grep", "arguments": json.dumps({"pattern": "def parse_args"})}}]},
    {"role": "tool", "tool_call_id": "ex1", "content": "cli/main.py:12:def parse_args(argv=None):"},
    {"role": "assistant", "content": "parse_args is defined in cli/main.py (line 12)."},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--dump")
    args = parser.parse_args()
    workspace = make_project(Path(tempfile.mkdtemp()) / "ws")
    tools = builtin_registry().specs()
    prompt = system_prompt.build(workspace, mode="full", interactive=False,
                                 tools=[t["function"]["name"] for t in tools])
    variants = {
        "app": [{"role": "system", "content": prompt}],
        "app+line": [{"role": "system", "content": prompt + LINE}],
        "app+example": [{"role": "system", "content": prompt}, *EXAMPLE],
    }
    dump = []
    for name, head in variants.items():
        looked = 0
        for task in TASKS:
            for _ in range(args.samples):
                body = json.dumps({"model": "m", "messages": [*head, {"role": "user", "content": task}],
                                   "tools": tools, "max_tokens": args.max_tokens}).encode()
                request = urllib.request.Request(args.url.rstrip("/") + "/chat/completions", data=body,
                                                 headers={"Content-Type": "application/json"})
                message = json.loads(urllib.request.urlopen(request, timeout=900).read())["choices"][0]["message"]
                native = message.get("tool_calls") or []
                recovered = None if native else recover_calls(message.get("content") or "", tools)
                looked += bool(native) or recovered is not None
                dump.append({"variant": name, "task": task, "content": message.get("content"), "tool_calls": native,
                             "recovered": recovered.form if recovered else None})
        print(f"{name}: {looked} of {len(TASKS) * args.samples} first replies call a valid tool", flush=True)
    if args.dump:
        Path(args.dump).write_text(json.dumps(dump, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
