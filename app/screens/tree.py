"""The conversation tree: every node of the session with a one-line preview.

Enter jumps there (the chat activates that node and shows its path); f forks from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Label, Tree
from textual.widgets.tree import TreeNode

from llmchat.sessions.models import Node
from llmchat.sessions.store import Store

PREVIEW = 70
ROLE_MARK = {"system": "⚙ System", "user": "▸ You", "assistant": "◂ Assistant"}


@dataclass
class TreeResult:
    node_id: int
    fork: bool = False


def preview(text: str, width: int = PREVIEW) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


class TreeScreen(Screen[TreeResult | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("f", "fork", "Fork here"),
        Binding("a", "expand_all", "Expand all"),
    ]

    def __init__(self, store: Store, session_id: int) -> None:
        super().__init__(id="tree-screen")
        self.store = store
        self.session_id = session_id

    def compose(self) -> ComposeResult:
        session = self.store.session(self.session_id)
        yield Label(f"Conversation tree — {session.title or f'session {session.id}'}", classes="screen-title")
        tree: Tree[int] = Tree("conversation", id="conversation-tree")
        tree.show_root = False
        yield tree
        yield Label("Enter: jump to this message · f: fork from it · Esc: back", classes="hint")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        tree = self.query_one(Tree)
        session = self.store.session(self.session_id)
        active = {n.id for n in self.store.path_to(session.active_leaf)} if session.active_leaf else set()
        by_parent: dict[int | None, list[Node]] = {}
        for node in self.store.nodes(self.session_id):
            by_parent.setdefault(node.parent_id, []).append(node)
        cursor: TreeNode[int] | None = None

        def add(parent: TreeNode[int], node: Node) -> None:
            nonlocal cursor
            label = Text()
            label.append(ROLE_MARK.get(node.role, node.role), style="bold" if node.id in active else "")
            label.append(f"  {preview(node.content)}", style="" if node.id in active else "dim")
            if node.status != "done":
                label.append(f" ({node.status})", style="italic")
            kids = by_parent.get(node.id, [])
            item = parent.add(label, data=node.id, expand=True, allow_expand=bool(kids))
            if node.id == session.active_leaf:
                cursor = item
            for kid in kids:
                add(item, kid)

        for root in by_parent.get(None, []):
            add(tree.root, root)
        tree.root.expand()
        tree.focus()
        if cursor is not None:
            target = cursor
            self.call_after_refresh(lambda: tree.move_cursor(target))

    def _highlighted(self) -> int | None:
        node = self.query_one(Tree).cursor_node
        return node.data if node is not None and isinstance(node.data, int) else None

    def on_tree_node_selected(self, event: Tree.NodeSelected[int]) -> None:
        event.stop()
        if isinstance(event.node.data, int):
            self.dismiss(TreeResult(event.node.data))

    def action_fork(self) -> None:
        nid = self._highlighted()
        if nid is not None:
            self.dismiss(TreeResult(nid, fork=True))

    def action_expand_all(self) -> None:
        self.query_one(Tree).root.expand_all()

    def action_close(self) -> None:
        self.dismiss(None)
