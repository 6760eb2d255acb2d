"""``grep``: search file contents with a regex, by ripgrep when it is installed.

ripgrep (``rg`` on PATH) is fast and already knows .gitignore; without it a Python
search walks the same files (``ignore.walk_files``) in the same order. Both give one
line per match, ``path:line:text``, paths relative to the workspace, binary files
skipped, hidden files searched, ``.git`` skipped. ripgrep is told to use only the
workspace's ignore files (not ``.ignore``/``.rgignore``, global excludes or those above
the root), which is what the Python search reads. The regex dialects differ at the edges
(Rust ``regex`` against Python ``re``: look-around and backreferences are Python's alone).
The ``ripgrep`` wheel on PyPI ships the binary only for a few platforms (no wheel for
glibc below 2.39, and its source build needs cargo and the network), so it is not a
dependency.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import Tool, ToolContext, ToolError, ToolKind, ToolResult
from .files import BINARY_SNIFF_BYTES
from .ignore import IgnoreRules, walk_files

if TYPE_CHECKING:
    import pathspec

DEFAULT_MAX_MATCHES = 100
MAX_MATCH_CHARS = 300


def find_ripgrep() -> str | None:
    return shutil.which("rg")


def _format(shown: str, number: int, text: str) -> str:
    text = text.rstrip("\r\n")
    if len(text) > MAX_MATCH_CHARS:
        text = text[:MAX_MATCH_CHARS] + "…"
    return f"{shown}:{number}:{text}"


def _python_matches(base: Path, root: Path, regex: re.Pattern[str], include: pathspec.GitIgnoreSpec | None,
                    context: ToolContext) -> Iterator[str]:
    rules = IgnoreRules(root)
    targets = [base] if base.is_file() else walk_files(base, rules, context.check_cancel)
    for path in targets:
        rel_base = path.relative_to(base).as_posix() if path != base else path.name
        if include is not None and not include.match_file(rel_base):
            continue
        if path != base and path.is_symlink():
            continue  # as ripgrep: symlinks found on the walk are not followed
        try:
            with path.open("rb") as f:
                if b"\0" in f.read(BINARY_SNIFF_BYTES):
                    continue
                f.seek(0)
                shown = context.workspace.display(path)
                for number, raw in enumerate(f, start=1):
                    line = raw.decode("utf-8", errors="replace")
                    if regex.search(line.rstrip("\r\n")):
                        yield _format(shown, number, line)
        except OSError:
            continue


def _ripgrep_matches(rg: str, base: Path, root: Path, pattern: str, glob: str | None,
                     ignore_case: bool, context: ToolContext) -> Iterator[str]:
    cmd = [rg, "--no-heading", "--with-filename", "--line-number", "--color", "never", "--null",
           "--hidden", "--glob", "!.git", "--no-ignore-dot", "--no-ignore-global",
           "--no-ignore-parent", "--no-require-git", "--no-config", "--sort", "path"]
    if ignore_case:
        cmd.append("--ignore-case")
    if glob:
        cmd += ["--glob", glob]
    target = os.path.relpath(base, root)
    cmd += ["--regexp", pattern, "--", target]
    env = None
    if context.sandbox is not None:
        # A search only reads: confined as read-only mode is, with the searched path (which
        # the user approved when it is outside the workspace) readable.
        cmd, env = context.sandbox.wrap(cmd, os.environ, read_only=True, extra_read=[root, base])
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            context.check_cancel()
            name, sep, rest = raw.partition(b"\0")
            number, _, text = rest.partition(b":")
            if not sep or not number.isdigit():
                continue  # "binary file matches" for a binary file named explicitly
            shown = context.workspace.display((root / os.fsdecode(name)).absolute())
            yield _format(shown.removeprefix("./"), int(number), text.decode("utf-8", errors="replace"))
        proc.wait()
        if proc.returncode == 126 and proc.stderr is not None:
            message = proc.stderr.read().decode("utf-8", errors="replace").strip()
            if message.startswith("hermes-tui sandbox"):
                raise ToolError(message)
        if proc.returncode == 2:
            assert proc.stderr is not None
            lines = proc.stderr.read().decode("utf-8", errors="replace").strip().splitlines()
            # rg exits 2 also when some file could not be read; only a bad pattern matters.
            if lines and "regex" in lines[0].lower():
                raise ToolError(f"invalid pattern: {' '.join(lines[:3])}")
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


class Grep(Tool):
    name = "grep"
    kind = ToolKind.READ
    description = ("Search file contents with a regular expression. Prints path:line:text "
                   "per matching line. Skips binary files, .git and what .gitignore ignores.")
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 1, "description": "Regular expression"},
            "path": {"type": "string", "description": "File or directory to search (default '.')"},
            "glob": {"type": "string", "description": "Only files matching this, e.g. '*.py'"},
            "ignore_case": {"type": "boolean", "description": "Case-insensitive (default false)"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 1000,
                            "description": f"Most matching lines to return (default {DEFAULT_MAX_MATCHES})"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def __init__(self, use_ripgrep: bool = True) -> None:
        self.use_ripgrep = use_ripgrep

    def paths(self, arguments: dict[str, Any]) -> list[str]:
        return [arguments.get("path", ".")]

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        ws = context.workspace
        given = arguments.get("path", ".")
        base = ws.check(given, context, tool=self.name, purpose="read")
        if not base.exists():
            raise ToolError(f"{given}: no such file or directory")
        pattern = arguments["pattern"]
        ignore_case = arguments.get("ignore_case", False)
        glob = arguments.get("glob")
        limit = arguments.get("max_results", DEFAULT_MAX_MATCHES)
        root = ws.root if ws.contains(base) else (base if base.is_dir() else base.parent)
        rg = find_ripgrep() if self.use_ripgrep else None
        if rg is not None:
            matches = _ripgrep_matches(rg, base, root, pattern, glob, ignore_case, context)
        else:
            try:
                regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
            except re.error as e:
                raise ToolError(f"invalid pattern: {e}") from None
            import pathspec  # on first use: ~7 ms the app's start-up need not pay

            include = pathspec.GitIgnoreSpec.from_lines([glob]) if glob else None
            matches = _python_matches(base, root, regex, include, context)
        lines: list[str] = []
        more = False
        try:
            for line in matches:
                if len(lines) == limit:
                    more = True
                    break
                lines.append(line)
        finally:
            close = getattr(matches, "close", None)
            if close is not None:
                close()
        if not lines:
            return ToolResult(content=f"no matches for {pattern!r}\n")
        text = "\n".join(lines) + "\n"
        if more:
            text += f"[stopped at {limit} matches; narrow the pattern, path or glob]\n"
        else:
            text += count_line(lines)
        return ToolResult(content=text, truncated=more)


_MATCH_FILE = re.compile(r"^(.*?):\d+:")


def count_line(lines: list[str]) -> str:
    """The count of all the matches shown, and in how many files: asked "how many", the
    1.5B model counted 37 lines of grep output as 36 and as 48."""
    files = {match.group(1) for line in lines if (match := _MATCH_FILE.match(line))}
    count, where = len(lines), len(files)
    return f"[{count} match{'es' if count != 1 else ''} in {where} file{'s' if where != 1 else ''}]\n"
