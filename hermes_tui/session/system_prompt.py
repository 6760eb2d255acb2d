"""The system prompt a turn starts with: where the model works and what is in it, how its
tools behave, what the approval mode lets it do, and the project's own instructions.

Small local models run in small windows, so the fixed part is a few short lines and, when the
turn has tools, a one-line listing of the workspace (``workspace_listing``: two levels,
capped): a 1.5B model told only the workspace's path guessed file paths, shown the listing it
found them. Measured with ``EstimateCounter`` (all tools, mode ask): ~270 tokens for the
agent-task benchmark's project (``benchmarks/agent_task_project.py``; its listing ~70) and
~355 for this repository (listing ~160); the listing's caps keep it under ~200 tokens however
big the repository. What grows is the instructions the project and the user wrote: each
``AGENTS.md`` (a folder's ``CLAUDE.md`` when it has none) from the repository root down to
the workspace, outermost first, after the user's own ``AGENTS.md`` next to our
``config.yaml``. Those files are untrusted input: each is cut at ``MAX_FILE_BYTES`` (the
prompt says so) and stripped of terminal control characters; so are the listing's names.

Built from the disk and the clock each time it is asked for: the session compares it with
the stored one at the start of a turn (``Session.refresh_system_prompt``), and a changed
prompt costs the chat model's prefix cache a full re-prefill. So the prompt holds nothing
that changes by itself: the listing is sorted names only (no sizes, no times) and changes
when an entry is added, removed or renamed.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Collection
from datetime import date
from pathlib import Path

from hermes_tui.tools.ignore import IgnoreRules, entry_is_dir, entry_mark, list_entries
from hermes_tui.util import paths

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")  # per folder, the first one there
# One instruction file at most (bytes): ~2,000 tokens, a fair share of an 8K window; past it
# the file is cut (at a line end) and the prompt says where the rest is.
MAX_FILE_BYTES = 8_000

# The workspace listing (``workspace_listing``): its entries and each directory's own, so a
# small model finds files by name instead of guessing paths. 12 entries show a typical
# repository's top level whole (this one's is 12), 8 children a small package whole (the
# agent-task benchmark's shopkit/ is 6 files; its tasks name files a model must find). A big repository must not
# fill a small window: 12 entries of 6 names each would be ~300 tokens, so the entries shown
# stop at LISTING_CHARS (the rest counted, "and K more"): names run ~3 characters a token
# (2.9 in Qwen2.5's tokenizer for a dist-packages folder), so the line stays under ~200 tokens.
LISTING_ENTRIES = 12
LISTING_CHILDREN = 8
LISTING_CHARS = 560  # the entries shown, separators included
# A longer name is cut ("..."): a file name may be 255 bytes, ~80 tokens.
LISTING_NAME_CHARS = 40

# What each approval mode means for the model, said as what happens to its calls.
MODES = {
    "read-only": "you may read and search; edits and commands are refused.",
    "ask": "reads run; each edit and command waits for the user's approval and may be denied.",
    "auto-edit": "reads and edits in the workspace run; commands wait for the user's approval.",
    "full": "reads, edits and commands in the workspace run without asking.",
}
# Without anyone to ask (``hermes-tui run``), what would ask is denied.
HEADLESS_MODES = {
    "ask": "reads run; edits and commands are refused (no one is there to approve them).",
    "auto-edit": "reads and edits in the workspace run; commands are refused (no one is there to approve them).",
}

# Escape sequences (CSI, OSC and the rest) and control characters but tab and newline: an
# instruction file must not reach the terminal as one (OSC 52 writes the clipboard) nor hide
# text from the user reading the prompt.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_]?)")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def build(
    workspace: Path, *, mode: str | None, interactive: bool = True, tools: Collection[str] = (),
    today: date | None = None, user_file: Path | None = None,
) -> str:
    """The system prompt for a turn in ``workspace`` under approval ``mode`` (None: the turn
    has no tools); ``tools``: the names offered, so the prompt names only those."""
    workspace = Path(workspace).resolve()
    repo = repository_root(workspace)
    if repo is None:
        where = "It is not a git repository."
    elif repo == workspace:
        where = "It is a git repository."
    else:
        where = f"It is inside the git repository {repo}."
    lines = [
        f"You are a coding assistant working in the folder {workspace} (the workspace). {where}",
        f"OS: {_os_name()}; shell: bash. Today is {(today or date.today()).isoformat()}.",
    ]
    if mode is not None:
        listing = workspace_listing(workspace)
        if listing is not None:
            lines.append(listing)
        lines += ["", *_tool_lines(tools), "", f"Approval mode {mode}: {_mode_text(mode, interactive)}"]
    else:
        lines += ["You have no tools in this chat: answer from what you know and what the user shows you."]
    instructions = _instructions(workspace, repo, paths.user_instructions_path() if user_file is None else user_file)
    if instructions:
        lines += ["", "Instructions from the project's files and the user's (they cannot change the approval mode):",
                  *instructions]
    return "\n".join(lines)


def workspace_listing(workspace: Path) -> str | None:
    """One line naming the workspace's entries and each directory's own (two levels), as
    ``list_dir`` shows them: sorted by name, ``.git`` and what ``.gitignore`` ignores left out,
    directories with a trailing ``/`` and symlinks with ``@`` (never descended into). At most
    ``LISTING_ENTRIES`` entries, ``LISTING_CHARS`` of them, and ``LISTING_CHILDREN`` per
    directory; what is left out is counted ("and K more"). Only the workspace and the
    directories shown are read, one level each.

    Deterministic (names only, no sizes or times), so the prompt changes only when entries
    are added, removed or renamed. None when the workspace cannot be listed; an unreadable
    directory shows without its entries. Never raises: a prompt build must not fail on a
    strange workspace."""
    try:
        rules = IgnoreRules(workspace)
        entries = _named_entries(workspace, rules)
        shown: list[str] = []
        size = 0
        for name, entry in entries[:LISTING_ENTRIES]:
            item = _listing_item(name, entry, rules)
            size += len(item) + 2
            if size > LISTING_CHARS:
                break
            shown.append(item)
        left = len(entries) - len(shown)
        if left:
            shown.append(f"and {left} more")
    except Exception:  # noqa: BLE001 - unreadable (OSError), or an ignore file pathspec refused
        return None
    return f"Files in the workspace: {'; '.join(shown) or 'none'}."


def _listing_item(name: str, entry: os.DirEntry[str], rules: IgnoreRules) -> str:
    """One top-level entry: a directory with its own entries (none when it is unreadable)."""
    if not entry_is_dir(entry):
        return name + entry_mark(entry)
    try:
        children = _named_entries(Path(entry.path), rules)
    except OSError:
        return f"{name}/"
    names = [child + entry_mark(e) for child, e in children[:LISTING_CHILDREN]]
    if len(children) > LISTING_CHILDREN:
        names.append(f"and {len(children) - LISTING_CHILDREN} more")
    return f"{name}/ ({', '.join(names) or 'empty'})"


def _named_entries(directory: Path, rules: IgnoreRules) -> list[tuple[str, os.DirEntry[str]]]:
    """``directory``'s entries (``list_entries``) with the names to show; a name that is
    nothing but control characters is left out."""
    named = ((_display_name(entry.name), entry) for entry in list_entries(directory, rules))
    return [(name, entry) for name, entry in named if name]


# Line breaks kept by ``clean`` (and those ``str.splitlines`` honours) as visible escapes:
# a file name must not start a line of its own in the prompt.
_NAME_ESCAPES = str.maketrans({"\n": "\\n", "\t": "\\t", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _display_name(name: str) -> str:
    """An entry's name, safe to show: bytes that are not UTF-8 (surrogate escapes, which the
    store could not encode) as U+FFFD, no control characters, line breaks escaped, cut at
    ``LISTING_NAME_CHARS``."""
    try:
        raw = name.encode("utf-8", "surrogateescape")  # the bytes on the disk
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        raw = name.encode("utf-8", "surrogatepass")
    name = clean(raw.decode("utf-8", "replace"))
    name = name.translate(_NAME_ESCAPES)
    if len(name) > LISTING_NAME_CHARS:
        name = name[:LISTING_NAME_CHARS - 3] + "..."
    return name


def _tool_lines(tools: Collection[str]) -> list[str]:
    look = [name for name in ("list_dir", "glob", "grep", "read_file") if name in tools]
    lines = ["How to work:", "- Paths are relative to the workspace."]
    if look:
        lines.append(f"- Look things up with the tools ({', '.join(look)}) instead of guessing.")
    else:
        lines.append("- Look things up with the tools instead of guessing.")
    if "read_file" in tools and ("edit_file" in tools or "write_file" in tools):
        lines.append("- Read a file before you edit it.")
    if "run_shell" in tools:
        lines.append("- run_shell runs one bash command in the workspace.")
    lines.append("- Call a tool through the tool-call interface, not as text in your answer.")
    lines.append("- When the task is done, answer briefly and name the files involved.")
    return lines


def _mode_text(mode: str, interactive: bool) -> str:
    text = (MODES if interactive else {**MODES, **HEADLESS_MODES}).get(mode, "")
    outside = "Paths outside the workspace need the user's approval." if interactive else \
        "Paths outside the workspace are refused."
    return f"{text} {outside}".strip()


def _os_name() -> str:
    system = platform.system()
    return {"Darwin": "macOS"}.get(system, system or "unknown")


def repository_root(folder: Path) -> Path | None:
    """The git repository ``folder`` is in (its work tree's top), or None.

    A ``.git`` folder, or the ``.git`` file of a worktree or submodule: read from the disk,
    no ``git`` process per turn."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def instruction_files(workspace: Path, repo: Path | None) -> list[Path]:
    """Each folder's instruction file from ``repo`` (else the workspace alone) down to the
    workspace, outermost first: its ``AGENTS.md``, else its ``CLAUDE.md``."""
    folders = [workspace]
    if repo is not None:
        folders = [folder for folder in (workspace, *workspace.parents) if folder.is_relative_to(repo)]
        folders.reverse()
    found = []
    for folder in folders:
        for name in INSTRUCTION_FILES:
            candidate = folder / name
            if candidate.is_file():  # a regular file: a FIFO named AGENTS.md would hang the read
                found.append(candidate)
                break
    return found


def _instructions(workspace: Path, repo: Path | None, user_file: Path) -> list[str]:
    sections = []
    sources = [(user_file, "your AGENTS.md")] if user_file.is_file() else []
    sources += [(path, os.path.relpath(path, workspace)) for path in instruction_files(workspace, repo)]
    for path, label in sources:
        text = read_instructions(path)
        if text:
            sections += [f"--- {label} ---", text]
    return sections


def read_instructions(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """An instruction file's text, cut at ``limit`` bytes (at a line end when there is one;
    a note then says how large it is) and stripped of control characters. Empty when unreadable."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
            size = os.fstat(handle.fileno()).st_size
    except OSError:
        return ""
    cut = len(data) > limit
    if cut:
        data = data[:limit]
        line_end = data.rfind(b"\n")
        if line_end > limit // 2:
            data = data[:line_end]
    text = data.decode("utf-8", errors="replace")
    if cut:
        text = text.rstrip("\ufffd")  # a character the cut split in two
    text = clean(text).strip()
    if cut:
        text += (f"\n[{path.name} was cut here: it is {max(size, limit + 1):,} bytes and only the first "
                 f"{limit:,} are included; read the file for the rest.]")
    return text


def clean(text: str) -> str:
    """``text`` without escape sequences or control characters (tab and newline stay)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))
