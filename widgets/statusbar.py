"""The status line: model, context used, speed of the last reply, the restore badge and progress."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class StatusBar(Widget):
    """Two rows: facts about the model and context; then progress, or the restore badge."""

    DEFAULT_CSS = """
    StatusBar { height: 2; padding: 0 1; }
    """

    model: reactive[str] = reactive("")
    context_used: reactive[int] = reactive(0)
    n_ctx: reactive[int] = reactive(0)
    tps: reactive[float | None] = reactive(None)
    badge: reactive[str] = reactive("")
    progress: reactive[str] = reactive("")
    session_title: reactive[str] = reactive("")

    def render(self) -> Text:
        top = Text(no_wrap=True, overflow="ellipsis")
        top.append(self.model or "no model", style="bold")
        if self.n_ctx:
            top.append(f"  ctx {self.context_used:,}/{self.n_ctx:,}")
        if self.tps is not None:
            top.append(f"  {self.tps:,.1f} tok/s")
        if self.session_title:
            top.append(f"  · {self.session_title}", style="italic")
        bottom = Text(no_wrap=True, overflow="ellipsis")
        if self.progress:
            bottom.append(self.progress, style="bold")
        elif self.badge:
            bottom.append("⟲ " + self.badge)
        return Text("\n").join([top, bottom])
