"""The file tools: read, list, find by pattern, edit by exact replacement, write.

Paths are relative to the workspace (absolute ones are accepted and checked the same
way); every one goes through ``Workspace.check``. Output is sized for a model's context:
reads are numbered and capped with a note saying how to read on, listings are capped
with a count of what was left out.

Read before edit: with a ``context.read_record`` (the agent always sets one), ``edit_file``
and ``write_file`` change an existing file only when ``read_file`` read it in this session
and it has not changed since (``read_record`` says why); the refusal comes from ``_plan``,
which ``preview`` calls too, so it comes before the user is asked to approve anything. A
read of any part counts; what our tools write counts as read.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path
from typing import Any

from .base import Tool, ToolContext, ToolError, ToolKind, ToolResult
from .ignore import IgnoreRules, entry_mark, list_entries, walk_files
from .read_record import Seen, stamp

# A file is binary when its first bytes hold a NUL (as git and ripgrep decide).
BINARY_SNIFF_BYTES = 8192
DEFAULT_READ_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_LIST_ENTRIES = 500
MAX_GLOB_RESULTS = 200


def _path_param(what: str) -> dict[str, Any]:
    return {"type": "string", "description": what}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def is_binary(path: Path) -> bool:
    with path.open("rb") as f:
        return b"\0" in f.read(BINARY_SNIFF_BYTES)


def _require_file(path: Path, given: str) -> None:
    if not path.exists():
        raise ToolError(f"{given}: no such file")
    if path.is_dir():
        raise ToolError(f"{given} is a directory (use list_dir)")


def _size_text(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


class ReadFile(Tool):
    name = "read_file"
    kind = ToolKind.READ
    description = ("Read a text file. Lines come numbered (number, tab, text). Use offset "
                   "and limit to read a part of a long file.")
    parameters = _schema({
        "path": _path_param("File path, relative to the workspace"),
        # 0 is taken as the start: small models count from 0 (Qwen2.5-Coder asks for offset 0),
        # and a call refused for it is a step lost for nothing.
        "offset": {"type": "integer", "minimum": 0, "description": "First line to read (1-based; 0 also starts at 1)"},
        "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read"},
    }, ["path"])

    def paths(self, arguments: dict[str, Any]) -> list[str]:
        return [arguments["path"]]

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        ws = context.workspace
        given = arguments["path"]
        path = ws.check(given, context, tool=self.name, purpose="read")
        _require_file(path, given)
        shown = ws.display(path)
        before = stamp(path)  # taken before reading: a change made while we read is a change
        size = before[1]
        if is_binary(path):
            return ToolResult(content=f"{shown} is a binary file ({_size_text(size)}); not shown",
                              bytes=size, paths=(shown,))
        offset = max(1, arguments.get("offset", 1))
        limit = arguments.get("limit", DEFAULT_READ_LINES)
        budget = context.max_output_bytes
        out: list[str] = []
        used = 0
        last = offset - 1  # the last line shown
        total = 0
        cut_by_size = False
        # Read line by line: a huge file costs what is shown, not its size.
        with path.open("r", encoding="utf-8", errors="replace", newline="") as f:
            for number, line in enumerate(f, start=1):
                total = number
                if number % 10_000 == 0:
                    context.check_cancel()
                if number < offset or cut_by_size or number >= offset + limit:
                    continue  # counted for the "of N" note, not shown
                text = line.rstrip("\r\n")
                if len(text) > MAX_LINE_CHARS:
                    text = text[:MAX_LINE_CHARS] + f"… [{len(text) - MAX_LINE_CHARS} chars cut]"
                entry = f"{number:>6}\t{text}\n"
                cost = len(entry.encode("utf-8"))
                if used + cost > budget - 200 and out:
                    cut_by_size = True
                    continue
                out.append(entry)
                used += cost
                last = number
        if offset > total and total:
            raise ToolError(f"{given} has {total} lines; offset {offset} is past the end")
        if context.read_record is not None:
            context.read_record.record(path, before)
        if total == 0:
            return ToolResult(content=f"{shown} is empty", paths=(shown,))
        content = "".join(out)
        truncated = last < total
        if truncated:
            content += (f"[lines {offset}-{last} of {total} shown; call read_file with "
                        f"offset={last + 1} to read on]\n")
        return ToolResult(content=content, bytes=size, truncated=truncated, paths=(shown,))


class ListDir(Tool):
    name = "list_dir"
    kind = ToolKind.READ
    description = ("List a directory: each entry as a path relative to the workspace; directories "
                   "end with '/', symlinks with '@'. Skips .git and what .gitignore ignores.")
    parameters = _schema({"path": _path_param("Directory, relative to the workspace (default '.')")}, [])

    def paths(self, arguments: dict[str, Any]) -> list[str]:
        return [arguments.get("path", ".")]

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        ws = context.workspace
        given = arguments.get("path", ".")
        path = ws.check(given, context, tool=self.name, purpose="read")
        if not path.is_dir():
            raise ToolError(f"{given}: not a directory" if path.exists() else f"{given}: no such directory")
        rules = IgnoreRules(ws.root if ws.contains(path) else path)
        entries = list_entries(path, rules)
        shown = ws.display(path)
        # Each entry as a path the next call can take as it is, as glob and grep show theirs:
        # listing shopkit/, the 1.5B model answered "ledger.py" for shopkit/ledger.py.
        prefix = "" if shown == "." else shown.rstrip("/") + "/"
        lines = []
        for entry in entries[:MAX_LIST_ENTRIES]:
            suffix = entry_mark(entry)
            lines.append(prefix + entry.name + suffix)
        if not entries:
            lines.append("(empty)")
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
        return ToolResult(content="\n".join(lines) + "\n", truncated=len(entries) > MAX_LIST_ENTRIES,
                          paths=(shown,))


class Glob(Tool):
    name = "glob"
    kind = ToolKind.READ
    description = ("Find files by a gitignore-style pattern, e.g. '*.py' (any depth), "
                   "'src/**/*.ts', 'docs/*.md'. Skips .git and what .gitignore ignores.")
    parameters = _schema({
        "pattern": {"type": "string", "minLength": 1, "description": "The pattern"},
        "path": _path_param("Directory to search, relative to the workspace (default '.')"),
    }, ["pattern"])

    def paths(self, arguments: dict[str, Any]) -> list[str]:
        return [arguments.get("path", ".")]

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        ws = context.workspace
        given = arguments.get("path", ".")
        base = ws.check(given, context, tool=self.name, purpose="read")
        if not base.is_dir():
            raise ToolError(f"{given}: not a directory")
        pattern = arguments["pattern"].removeprefix("./")
        try:
            import pathspec  # on first use: ~7 ms the app's start-up need not pay

            spec = pathspec.GitIgnoreSpec.from_lines([pattern])
        except Exception as e:  # noqa: BLE001 - pathspec raises several kinds for a bad pattern
            raise ToolError(f"invalid pattern {pattern!r}: {e}") from None
        inside = ws.contains(base)
        rules = IgnoreRules(ws.root if inside else base)
        found: list[str] = []
        more = 0
        for path in walk_files(base, rules, context.check_cancel):
            # The pattern is taken from ``path`` or, as the results are shown, from the
            # workspace: the 1.5B model searched "shopkit/*" in "shopkit" and found nothing.
            if (spec.match_file(path.relative_to(base).as_posix())
                    or (inside and spec.match_file(path.relative_to(ws.root).as_posix()))):
                if len(found) < MAX_GLOB_RESULTS:
                    found.append(ws.display(path))
                else:
                    more += 1
        if not found:
            return ToolResult(content=f"no files match {pattern!r}\n")
        text = "\n".join(found) + "\n"
        if more:
            text += f"[{more} more matches not shown; narrow the pattern or the path]\n"
        return ToolResult(content=text, truncated=bool(more))


def unified_diff(old: str, new: str, shown: str, *, created: bool = False) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile="/dev/null" if created else f"a/{shown}",
                                 tofile=f"b/{shown}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _diff_counts(diff: str) -> tuple[int, int]:
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _read_text(path: Path, given: str) -> str:
    if is_binary(path):
        raise ToolError(f"{given} is a binary file; it cannot be edited as text")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{given} is not UTF-8 text; it cannot be edited safely") from None


def _require_read(path: Path, shown: str, context: ToolContext, doing: str, tool: str) -> None:
    """Refuse to change the existing file ``path`` unless the model read it in this session
    and it is as it was then (no record in ``context``: no such rule).

    For ``edit_file`` the refusal is the read the model skipped: it says why and holds the
    file as ``read_file`` shows it (which records the read), so the next call can be the
    change, made from the file's real text. Refused with only the words "read it first", the
    1.5B model read it and then said the change was done without making it. An edit repeated
    blindly after it still has to match the text exactly. ``write_file`` replaces the whole
    file, so its refusal reads nothing: handed the file, the same model wrote the same blind
    content over it again; the model must read it itself (or change part with edit_file)."""
    record = context.read_record
    if record is None:
        return
    seen = record.check(path)
    if seen is Seen.CURRENT:
        return
    why = (f"{shown} was not read in this session (edits apply only to a file read first)"
           if seen is Seen.UNREAD else f"{shown} changed since it was read")
    if tool != EditFile.name:
        raise ToolError(f"{why}; read it with read_file before {doing} it, or change a part of it with edit_file")
    try:
        shown_text = ReadFile().run({"path": shown}, context).content
    except ToolError as exc:  # it vanished or turned binary meanwhile: the refusal alone
        raise ToolError(f"{why}; read it with read_file before {doing} it") from exc
    raise ToolError(f"{why}, so nothing was changed. Here it is now (read for you); call {tool} "
                    "again with text copied from it exactly:", detail=shown_text)


def _record_write(path: Path, context: ToolContext) -> None:
    """What our tool just wrote the model knows: the next edit needs no read."""
    if context.read_record is not None:
        context.read_record.record(path, written=True)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` next to ``path`` and rename over it: never a half-written file."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class EditFile(Tool):
    name = "edit_file"
    kind = ToolKind.EDIT
    description = ("Replace exact text in a file. old_string must match the file exactly "
                   "(whitespace included) and occur once, unless replace_all is true. "
                   "Read the file with read_file first: an edit of a file not read in this "
                   "session is refused.")
    parameters = _schema({
        "path": _path_param("File path, relative to the workspace"),
        "old_string": {"type": "string", "minLength": 1, "description": "The exact text to replace"},
        "new_string": {"type": "string", "description": "The text to put in its place"},
        "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"},
    }, ["path", "old_string", "new_string"])

    def paths(self, arguments: dict[str, Any]) -> list[str]:
        return [arguments["path"]]

    def _plan(self, arguments: dict[str, Any], context: ToolContext) -> tuple[Path, str, str, int, str]:
        ws = context.workspace
        given = arguments["path"]
        path = ws.check(given, context, tool=self.name, purpose="write")
        _require_file(path, given)
        old_text = _read_text(path, given)
        shown = ws.display(path)
        _require_read(path, shown, context, "editing", self.name)
        old, new = arguments["old_string"], arguments["new_string"]
        if old == new:
            raise ToolError("old_string and new_string are the same; nothing to change")
        count = old_text.count(old)
        if count == 0 and "\r\n" in old_text and "\r\n" not in old:
            # The model writes "\n"; a CRLF file keeps its line endings.
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            count = old_text.count(old)
        if count == 0:
            raise ToolError(f"old_string not found in {given}; read the file and copy the text exactly")
        if count > 1 and not arguments.get("replace_all", False):
            raise ToolError(f"old_string occurs {count} times in {given}; include more context "
                            "to make it unique, or set replace_all")
        new_text = old_text.replace(old, new)
        return path, shown, new_text, count, unified_diff(old_text, new_text, shown)

    def preview(self, arguments: dict[str, Any], context: ToolContext) -> str | None:
        return self._plan(arguments, context)[4]

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path, shown, new_text, count, diff = self._plan(arguments, context)
        context.check_cancel()
        write_atomically(path, new_text)
        _record_write(path, context)
        added, removed = _diff_counts(diff)
        times = "1 replacement" if count == 1 else f"{count} replacements"
        return ToolResult(content=f"edited {shown}: {times} (+{added} -{removed} lines)\n",
                          bytes=len(new_text.encode("utf-8")), paths=(shown,), diff=diff)


class WriteFile(Tool):
    name = "write_file"
    kind = ToolKind.EDIT
    description = ("Write a whole file, creating it (and its directories) or replacing it. "
                   "For a change to part of a file use edit_file. An existing file must be "
                   "read with read_file first.")
    parameters = _schema({
        "path": _path_param("File path, relative to the workspace"),
        "content": {"type": "string", "description": "The file's full new content"},
    }, ["path", "content"])

    def paths(self, arguments: dict[str, Any]) -> list[str]:
        return [arguments["path"]]

    def _plan(self, arguments: dict[str, Any], context: ToolContext) -> tuple[Path, str, bool, str]:
        ws = context.workspace
        given = arguments["path"]
        path = ws.check(given, context, tool=self.name, purpose="write")
        if path.is_dir():
            raise ToolError(f"{given} is a directory")
        created = not path.exists()
        old_text = "" if created else _read_text(path, given)
        shown = ws.display(path)
        if not created:
            _require_read(path, shown, context, "writing over", self.name)
        return path, shown, created, unified_diff(old_text, arguments["content"], shown, created=created)

    def preview(self, arguments: dict[str, Any], context: ToolContext) -> str | None:
        return self._plan(arguments, context)[3]

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path, shown, created, diff = self._plan(arguments, context)
        context.check_cancel()
        # The path was resolved (and checked) whole, so its parents lie where it does.
        path.parent.mkdir(parents=True, exist_ok=True)
        content = arguments["content"]
        write_atomically(path, content)
        _record_write(path, context)
        size = len(content.encode("utf-8"))
        verb = "created" if created else "wrote"
        return ToolResult(content=f"{verb} {shown} ({size} bytes)\n", bytes=size,
                          paths=(shown,), diff=diff)
