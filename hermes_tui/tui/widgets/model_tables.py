"""The models screen's two tables, drawn from ``hub`` models: the catalog (what to download, with
its cost) and what is on this machine (size, source, the role config.yaml gives it, its state),
and the detail lines shown under them. Columns shrink to the width given; from ``WIDE`` cells
on, every column is shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from hermes_tui import hub
from hermes_tui.hub.units import format_bytes

__all__ = ["DEFAULT", "DOWNLOADED", "MARKED", "PARTIAL", "THINKING", "WIDE", "CatalogTable", "LocalTable",
           "catalog_detail", "cursor_key", "local_detail", "local_key", "local_state", "restore_cursor", "roles_text",
           "state_mark"]

DOWNLOADED, PARTIAL = "●", "◐"
DEFAULT, THINKING, MARKED = "★", "⚠", "✓"
WIDE = 120  # from this width on, the tables show every column
COMMUNITY = "mlx-community/"


def roles_text(roles: tuple[str, ...] | list[str]) -> str:
    roles = tuple(roles)
    if set(roles) >= {"compression", "chat"}:
        return "both"
    return roles[0] if roles else ""


def _size_gb(value: float) -> str:
    return f"{value:.2f} GB" if value < 10 else f"{value:.1f} GB"


def local_key(m: hub.LocalModel) -> str:
    return f"{m.source}:{m.name}"


def local_state(m: hub.LocalModel) -> str:
    if not m.complete:
        return f"partial ({format_bytes(m.partial_bytes)}): p resumes"
    if m.partial_bytes:
        return f"ready; {format_bytes(m.partial_bytes)} of an update"
    return "ready"


def state_mark(local: hub.LocalModel | None) -> str:
    """A catalog model's mark: downloaded, partly downloaded, or "" (not here)."""
    if local is None:
        return ""
    return DOWNLOADED if local.complete else PARTIAL  # complete: usable, even with an update pending


def catalog_detail(m: hub.CatalogModel, local: hub.LocalModel | None) -> str:
    """The lines under the tables for a catalog model; ``local`` is its download, if any."""
    facts = [m.repo, f"{m.context_length // 1024}K context", m.license]
    lines = [" · ".join(facts), m.notes]
    hints = []
    if m.default_compression:
        hints.append(f"{DEFAULT} the suggested compression model")
    if m.reasoning:
        hints.append(f"{THINKING} a thinking model: passes are slow, a plain instruct model suits them better")
    state = state_mark(local)
    if state == DOWNLOADED:
        hints.append("downloaded: u uses it for compression, U for chat, b benchmarks it")
    elif state == PARTIAL:
        hints.append(f"partial download ({format_bytes(local.partial_bytes if local else 0)}): p resumes it")
    else:
        hints.append("p downloads it")
    lines.append("; ".join(hints))
    return "\n".join(line for line in lines if line)


def local_detail(m: hub.LocalModel) -> str:
    """The lines under the tables for a model on this machine."""
    where = "Hugging Face cache" if m.source == "hf-cache" else "models folder (imported)"
    uses = f"; config.yaml uses it for {' and '.join(m.roles)}" if m.roles else ""
    return f"{m.name} · {format_bytes(m.size_bytes)} · {where}{uses}\n{m.path}\n{local_state(m)}"


def cursor_key(table: DataTable[Any]) -> str | None:
    if table.row_count == 0:
        return None
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


def restore_cursor(table: DataTable[Any], key: str | None) -> None:
    if key is None or table.row_count == 0:
        return
    try:
        table.move_cursor(row=table.get_row_index(key), animate=False)
    except Exception:  # noqa: BLE001 - the row is gone (deleted): the cursor stays where it is
        pass


class CatalogTable(DataTable[str | Text]):
    def fill(self, catalog: list[hub.CatalogModel], *, wide: bool, width: int,
             state: Callable[[str], str]) -> None:
        """One row per catalog model, keyed by its repo; ``state(repo)`` is its mark (downloaded, partial)."""

        def shown_name(m: hub.CatalogModel) -> str:
            return m.repo if wide else m.repo.removeprefix(COMMUNITY)

        self.clear(columns=True)
        fixed = [("Params", 6), ("Disk", 7), ("Memory", 7)]
        if wide:
            fixed += [("Context", 7), ("Licence", 13)]
        fixed += [("Role", 11)]
        # The table spans the width less its margins (2) and a scrollbar (1); every column
        # is padded by one cell on each side; the state column is one cell wide.
        room = width - 3 - 3 - sum(w + 2 for _, w in fixed) - 2
        if wide:
            name_width = max(len(shown_name(m)) + 4 for m in catalog) if catalog else 20
            name_width = min(name_width, max(24, room - 32))
            notes_width = max(10, room - name_width - 2)
        else:
            name_width = max(16, room)
        self.add_column("", width=1, key="state")
        self.add_column("Model", width=name_width, key="model")
        for label, col_width in fixed:
            self.add_column(Text(label, justify="right") if label in ("Params", "Disk", "Memory", "Context")
                            else label, width=col_width, key=label.lower())
        if wide:
            self.add_column("Notes", width=notes_width, key="notes")
        for m in catalog:
            name = Text(shown_name(m), no_wrap=True, overflow="ellipsis")
            if m.default_compression:
                name.append(f" {DEFAULT}", style="bold")
            if m.reasoning:
                name.append(f" {THINKING}", style="bold")
            cells: list[str | Text] = [
                Text(state(m.repo), style="bold"),
                name,
                Text(f"{m.parameters_b:g}B", justify="right"),
                Text(_size_gb(m.disk_gb), justify="right"),
                Text(_size_gb(m.memory_gb), justify="right"),
            ]
            if wide:
                cells += [Text(f"{m.context_length // 1024}K", justify="right"), Text(m.license, no_wrap=True)]
            cells.append(roles_text(m.roles))
            if wide:
                cells.append(Text(m.notes, no_wrap=True, overflow="ellipsis", style="dim"))
            self.add_row(*cells, key=m.repo)


class LocalTable(DataTable[str | Text]):
    def fill(self, local: list[hub.LocalModel], marked: set[str], *, wide: bool, width: int) -> None:
        """One row per local model, keyed by ``local_key``; ``marked`` names the ones marked for a benchmark."""
        self.clear(columns=True)
        fixed = [("Size", 9), ("Source", 8), ("In use", 11)]
        if wide:
            fixed.append(("State", 30))
        room = width - 3 - 3 - sum(w + 2 for _, w in fixed) - 2
        self.add_column("", width=1, key="mark")
        self.add_column("Model", width=max(16, room), key="model")
        for label, col_width in fixed:
            self.add_column(Text(label, justify="right") if label == "Size" else label, width=col_width,
                            key=label.lower())
        for m in local:
            mark = MARKED if m.name in marked else ("" if m.complete else PARTIAL)
            cells: list[str | Text] = [
                Text(mark, style="bold"),
                Text(m.name, no_wrap=True, overflow="ellipsis"),
                Text(format_bytes(m.size_bytes), justify="right"),
                "HF cache" if m.source == "hf-cache" else "imported",
                roles_text(m.roles),
            ]
            if wide:
                cells.append(local_state(m))
            self.add_row(*cells, key=local_key(m))
