"""The help screen (F1 or ?): every key binding, collected from the classes that define them."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


def _sections() -> list[tuple[str, list[Binding]]]:
    from llmchat.app.screens.browser import SessionBrowser
    from llmchat.app.screens.chat import ChatScreen
    from llmchat.app.screens.tree import TreeScreen
    from llmchat.app.tui import LlmChatApp
    from llmchat.widgets.composer import Composer
    from llmchat.widgets.message import MessageView

    def bindings(cls: type) -> list[Binding]:
        return [b for b in getattr(cls, "BINDINGS", []) if isinstance(b, Binding)]

    return [
        ("Everywhere", [*bindings(LlmChatApp), Binding("ctrl+p", "command_palette", "Command palette")]),
        ("Chat", bindings(ChatScreen)),
        ("Composer", bindings(Composer)),
        ("A focused message (Tab / Shift+Tab to reach it; ↑/↓ to move)", bindings(MessageView)),
        ("Session browser", bindings(SessionBrowser)),
        ("Conversation tree", bindings(TreeScreen)),
    ]


def _key_label(keys: str) -> str:
    return " / ".join(k.replace("question_mark", "?").replace("left_square_bracket", "[")
                      .replace("right_square_bracket", "]") for k in keys.split(","))


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide", id="help"):
            yield Label("llmchat — keys", classes="dialog-title")
            for title, bindings in _sections():
                table = Table(show_header=False, box=None, padding=(0, 2), expand=False)
                table.add_column(style="bold", no_wrap=True)
                table.add_column()
                for b in bindings:
                    table.add_row(Text(_key_label(b.key)), Text(b.description or b.action))
                yield Label(title, classes="help-section")
                yield Static(table)
            yield Label("Esc: close", classes="dialog-hint")

    def action_close(self) -> None:
        self.dismiss(None)
