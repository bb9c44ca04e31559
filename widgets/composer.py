"""The multi-line message composer: Enter sends, Shift+Enter or Ctrl+J adds a newline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import TextArea


class Composer(TextArea):
    """A TextArea that posts `Composer.Submitted` on Enter instead of inserting a newline."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # not in the footer (the placeholder says it): room for the screen's actions
        Binding("enter", "submit", "Send", show=False),
        Binding("shift+enter,ctrl+j", "newline", "Newline", show=False),
    ]

    @dataclass
    class Submitted(Message):
        composer: Composer
        text: str

    def __init__(self, *, id: str | None = None, placeholder: str = "") -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus",
                         compact=True, placeholder=placeholder)

    async def _on_key(self, event: events.Key) -> None:
        # TextArea inserts "\n" for Enter before bindings are consulted: intercept it here.
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.action_submit()
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            self.action_newline()
            return
        await super()._on_key(event)

    def action_submit(self) -> None:
        self.post_message(self.Submitted(self, self.text))

    def action_newline(self) -> None:
        start, end = self.selection
        self.replace("\n", start, end, maintain_selection_offset=False)
