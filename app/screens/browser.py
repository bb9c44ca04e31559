"""The session browser: sessions by last use, full-text search, rename, delete, export, open."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Label, Static

from llmchat.app.screens.dialogs import ConfirmDialog, PromptDialog
from llmchat.app.screens.tree import preview
from llmchat.sessions.models import Session

if TYPE_CHECKING:
    from llmchat.sessions.chat import ChatService


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{n} B"


def when(ts: float, *, short: bool = False) -> str:
    return time.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M", time.localtime(ts))


def restore_badge(stats: dict[str, Any]) -> str:
    """The badge of the session's last restore, from session.stats["last_restore"]."""
    from llmchat.sessions.chat import RestoreReport

    last = stats.get("last_restore")
    if not isinstance(last, dict):
        return ""
    fields = {k: v for k, v in last.items() if k in RestoreReport.__dataclass_fields__}
    try:
        return RestoreReport(**fields).badge()
    except TypeError:
        return ""


class SessionBrowser(Screen[int | None]):
    """Dismisses with the id of the session to open, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("slash", "search", "Search"),
        Binding("o", "open", "Open"),
        Binding("r", "rename", "Rename"),
        Binding("d,delete", "delete", "Delete"),
        Binding("m", "export('md')", "Export MD"),
        Binding("j", "export('json')", "Export JSON"),
    ]

    def __init__(self, service: ChatService, *, current: int | None = None) -> None:
        super().__init__(id="browser")
        self.service = service
        self.store = service.store
        self.current = current
        self.matches: dict[int, str] = {}  # session id -> matching snippet, while searching
        self.details_text = ""  # what the details pane shows, as plain text

    def compose(self) -> ComposeResult:
        yield Label("Sessions", classes="screen-title")
        yield Input(placeholder="Search messages and titles (full text) — Enter to browse results", id="search")
        with Horizontal(id="browser-body"):
            table: DataTable[Any] = DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
            yield table
            with Vertical(id="details-pane"):
                yield Static("", id="details", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("Title", "Last used", "Turns", "Tokens", "Snapshots", "Model")
        self.refresh_table()
        table.focus()

    # ------------------------------------------------------------------ data
    def _sessions(self) -> list[Session]:
        query = self.query_one("#search", Input).value.strip()
        if not query:
            self.matches = {}
            return self.store.sessions()
        self.matches = {}
        out: list[Session] = []
        for session, node in self.store.search(query):
            if session.id not in self.matches:
                self.matches[session.id] = node.content
                out.append(session)
        return out

    def refresh_table(self, select: int | None = None) -> None:
        table = self.query_one(DataTable)
        keep = select if select is not None else self.selected()
        table.clear()
        rows = self._sessions()
        for s in rows:
            summary = self.store.session_summary(s.id)
            title = Text(preview(s.title or f"session {s.id}", 30))
            if s.id == self.current:
                title.stylize("bold")
            table.add_row(title, when(s.updated, short=True), str(summary["turns"]), f"{summary['tokens']:,}",
                          human_bytes(summary["snapshot_bytes"]), preview(s.model, 16), key=str(s.id))
        ids = [s.id for s in rows]
        if keep in ids:
            table.move_cursor(row=ids.index(keep))
        self.show_details()

    def selected(self) -> int | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        except Exception:
            return None
        return int(key.value) if key.value is not None else None

    def show_details(self) -> None:
        """The selected session's facts, its last restore badge, the search match and a preview."""
        details = self.query_one("#details", Static)
        sid = self.selected()
        if sid is None:
            self.details_text = "No sessions." if not self.query_one("#search", Input).value else "No matches."
            details.update(self.details_text)
            return
        s = self.store.session(sid)
        summary = self.store.session_summary(sid)
        facts: list[tuple[str, str]] = [
            ("model", s.model),
            ("created", when(s.created)),
            ("last used", when(s.updated)),
            ("turns", f"{summary['turns']} ({summary['messages']} messages)"),
            ("tokens", f"{summary['tokens']:,}"),
            ("snapshots", human_bytes(summary["snapshot_bytes"])),
        ]
        if s.params:
            facts.append(("settings", ", ".join(f"{k}={v}" for k, v in sorted(s.params.items()))))
        if s.system_prompt:
            facts.append(("system", preview(s.system_prompt, 120)))
        sections: list[tuple[str, list[str]]] = []
        badge = restore_badge(s.stats)
        if badge:
            sections.append(("last restore", [badge]))
        if sid in self.matches:
            sections.append(("match", [preview(self.matches[sid], 200)]))
        path = self.store.path_to(s.active_leaf) if s.active_leaf else []
        if path:
            who = {"user": "You", "assistant": "AI", "system": "System"}
            sections.append(("preview", [f"{who.get(n.role, n.role)}: {preview(n.content, 100)}" for n in path[-4:]]))

        title = s.title or f"session {s.id}"
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        for key, value in facts:
            grid.add_row(key, value)
        parts: list[Any] = [Text(title, style="bold"), Text(""), grid]
        text_lines = [title, *(f"{k}: {v}" for k, v in facts)]
        for heading, lines in sections:
            parts += [Text(""), Text(heading, style="bold underline")]
            parts += [Text(line) for line in lines]
            text_lines += [heading, *lines]
        self.details_text = "\n".join(text_lines)
        details.update(Group(*parts))

    # ------------------------------------------------------------------ events
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_details()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.refresh_table()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    # ------------------------------------------------------------------ actions
    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_close(self) -> None:
        search = self.query_one("#search", Input)
        if search.has_focus and search.value:
            search.value = ""
            return
        self.dismiss(None)

    def action_open(self) -> None:
        sid = self.selected()
        if sid is not None:
            self.dismiss(sid)

    def action_rename(self) -> None:
        sid = self.selected()
        if sid is None:
            return
        s = self.store.session(sid)

        def done(title: str | None) -> None:
            if title is not None and title.strip():
                self.store.rename_session(sid, " ".join(title.split()))
                self.refresh_table(select=sid)
                self.notify("renamed", timeout=2)

        self.app.push_screen(PromptDialog("Rename session", s.title), done)

    def action_delete(self) -> None:
        sid = self.selected()
        if sid is None:
            return
        s = self.store.session(sid)

        def done(yes: bool | None) -> None:
            if not yes:
                return
            if getattr(self.app, "busy", False):  # deleting collects snapshot files the engine may be writing
                self.notify("the model is busy: wait for the reply (or stop it) before deleting", severity="warning")
                return
            try:
                self.service.delete_session(sid)
            except Exception as e:
                self.notify(f"delete failed: {e}", severity="error")
                return
            self.notify(f"deleted “{s.title or sid}”", timeout=3)
            self.refresh_table()

        self.app.push_screen(
            ConfirmDialog(f"Delete the session “{s.title or sid}” and all its branches? This cannot be undone."),
            done,
        )

    def action_export(self, fmt: str) -> None:
        from llmchat.sessions import locations

        sid = self.selected()
        if sid is None:
            return
        try:
            text = self.service.export(sid, fmt)
            folder = locations.data_dir() / "exports"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"session-{sid}.{fmt}"
            path.write_text(text, encoding="utf-8")
        except Exception as e:
            self.notify(f"export failed: {e}", severity="error")
            return
        self.notify(f"exported to {path}", timeout=6)
