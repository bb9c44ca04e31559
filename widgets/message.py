"""One message of the conversation, and its sibling switcher ‹ 2/3 ›.

A MessageView is told what to show (attributes down) and posts typed requests (messages
up); the chat screen decides what they do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Label, Markdown, Static
from textual.widgets.markdown import MarkdownStream

ROLE_LABEL = {"user": "You", "assistant": "Assistant", "system": "System"}


@dataclass
class MessageData:
    """What a MessageView shows. node_id is None while a reply is still streaming."""

    role: str
    content: str
    node_id: int | None = None
    status: str = "done"
    siblings: tuple[int, ...] = ()  # ids of the node and its siblings, in order

    @property
    def sibling_index(self) -> int:
        if self.node_id is None or self.node_id not in self.siblings:
            return 0
        return self.siblings.index(self.node_id)


class SiblingSwitcher(Horizontal):
    """‹ 2/3 ›: shows where a message sits among its siblings; the arrows are clickable."""

    DEFAULT_CSS = """
    SiblingSwitcher { width: auto; height: 1; }
    SiblingSwitcher > Label { width: auto; padding: 0 0; }
    SiblingSwitcher > .arrow { color: $accent; text-style: bold; }
    SiblingSwitcher > .arrow:hover { background: $accent 30%; }
    """

    @dataclass
    class Step(Message):
        switcher: SiblingSwitcher
        delta: int

    def __init__(self, index: int, count: int) -> None:
        super().__init__(classes="switcher")
        self.index = index
        self.count = count

    def compose(self) -> ComposeResult:
        yield Label("‹ ", classes="arrow prev")
        yield Label(f"{self.index + 1}/{self.count}", classes="position")
        yield Label(" ›", classes="arrow next")

    def on_click(self, event: events.Click) -> None:
        widget = event.widget
        if isinstance(widget, Label) and widget.has_class("arrow"):
            event.stop()
            self.post_message(self.Step(self, -1 if widget.has_class("prev") else 1))


class MessageView(Vertical, can_focus=True):
    """A user or assistant message: a header line (who, status, switcher) and the body
    (plain text for the user, Markdown for the assistant, streamed while it is written)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "edit", "Edit"),
        Binding("r", "regenerate", "Regenerate"),
        Binding("c", "copy", "Copy"),
        Binding("left,[", "sibling(-1)", "Prev branch"),
        Binding("right,]", "sibling(1)", "Next branch"),
        Binding("f", "fork", "Fork here"),
        Binding("up,k", "neighbour(-1)", "Prev msg", show=False),
        Binding("down,j", "neighbour(1)", "Next msg", show=False),
    ]

    @dataclass
    class Request(Message):
        """Something the user asked to do with this message."""

        view: MessageView
        action: str  # edit | regenerate | copy | sibling | fork
        sibling_id: int | None = None

    def __init__(self, data: MessageData, *, id: str | None = None) -> None:
        super().__init__(id=id, classes=f"message {data.role}")
        self.data = data
        self._stream: MarkdownStream | None = None
        self._streamed: list[str] = []

    # -------------------------------------------------------------- content
    def compose(self) -> ComposeResult:
        d = self.data
        with Horizontal(classes="message-header"):
            yield Label(ROLE_LABEL.get(d.role, d.role), classes="role")
            yield Label(self._status_text(), classes="status")
            if len(d.siblings) > 1:
                yield SiblingSwitcher(d.sibling_index, len(d.siblings))
        if d.role == "assistant":
            yield Markdown(d.content, classes="body")
        else:
            yield Static(d.content, markup=False, classes="body")

    def _status_text(self) -> str:
        if self.data.node_id is None:
            return "writing…" if self.data.role == "assistant" else ""
        return {"stopped": "(stopped)", "partial": "(partial)"}.get(self.data.status, "")

    @property
    def text(self) -> str:
        return self.data.content if self._stream is None else "".join(self._streamed)

    async def append(self, fragment: str) -> None:
        """Stream a fragment of an assistant reply into the Markdown body."""
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        self._streamed.append(fragment)
        await self._stream.write(fragment)

    async def finish(self) -> None:
        """End streaming (all written fragments are rendered when this returns)."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
            self.data.content = "".join(self._streamed)

    async def set_data(self, data: MessageData) -> None:
        """Show other data (e.g. the stored node once a streamed reply is complete)."""
        await self.finish()
        self.data = data
        self._streamed = []
        await self.recompose()

    # -------------------------------------------------------------- actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        d = self.data
        if d.node_id is None and action in ("edit", "regenerate", "sibling", "fork"):
            return False
        if action == "edit":
            return d.role == "user"
        if action == "regenerate":
            return d.role == "assistant"
        if action == "sibling":
            return len(d.siblings) > 1
        return True

    def action_edit(self) -> None:
        self.post_message(self.Request(self, "edit"))

    def action_regenerate(self) -> None:
        self.post_message(self.Request(self, "regenerate"))

    def action_copy(self) -> None:
        self.post_message(self.Request(self, "copy"))

    def action_fork(self) -> None:
        self.post_message(self.Request(self, "fork"))

    def action_sibling(self, delta: int) -> None:
        d = self.data
        if len(d.siblings) < 2:
            return
        target = d.siblings[(d.sibling_index + delta) % len(d.siblings)]
        self.post_message(self.Request(self, "sibling", sibling_id=target))

    def action_neighbour(self, delta: int) -> None:
        views = list(self.screen.query(MessageView))
        i = views.index(self) + delta
        if 0 <= i < len(views):
            views[i].focus()
            views[i].scroll_visible()
        elif delta > 0:
            self.screen.focus_next()

    def on_sibling_switcher_step(self, event: SiblingSwitcher.Step) -> None:
        event.stop()
        self.action_sibling(event.delta)
