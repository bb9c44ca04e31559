"""Snapshot tests (pytest-textual-snapshot) of the chat screen, the session browser and the tree.

Deterministic: fixed terminal size, scripted replies, and a fake clock inside the core
(timestamps and durations), so every figure on screen is the same on every run.
Update with `pytest tests/ui/test_snapshots.py --snapshot-update` after a deliberate change.
"""

from __future__ import annotations

from llmchat.widgets.composer import Composer

from .conftest import settle

SIZE = (100, 32)
REPLY_WITH_CODE = (
    "Here is a function:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nIt **adds** two numbers."
)


async def _quiet(pilot) -> None:
    await settle(pilot)
    for composer in pilot.app.query(Composer):
        composer.cursor_blink = False
    await pilot.pause()


def _chat_session(harness) -> None:
    service = harness.service_factory()
    s = service.new_session()
    harness.engine.replies = ["Hello! How can I help?", REPLY_WITH_CODE]
    service.send(s.id, "Hi there")
    service.send(s.id, "Write an add function in Python")
    harness.engine.clear()


def test_chat_screen(harness, frozen_clock, snap_compare):
    _chat_session(harness)
    app = harness.app(continue_last=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=_quiet)


def test_session_browser(harness, frozen_clock, snap_compare):
    service = harness.service_factory()
    for topic in ("owls", "ferns", "rivers"):
        s = service.new_session()
        harness.engine.replies = [f"All about {topic}: they are *interesting*."]
        service.send(s.id, f"Tell me about {topic}")
    service.store.rename_session(1, "Owl facts")
    harness.engine.clear()
    service.activate(2)  # restore one, so its details show the last-restore badge

    async def run_before(pilot) -> None:
        await _quiet(pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()

    app = harness.app()
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_tree_view(harness, frozen_clock, snap_compare):
    service = harness.service_factory()
    s = service.new_session(system_prompt="You are a helpful assistant.")
    harness.engine.replies = ["Paris.", "About 2.1 million people.", "Lyon.", "Marseille, maybe."]
    first = service.send(s.id, "What is the capital of France?")
    service.send(s.id, "How many people live there?")
    service.edit(first.user_node.id, "What is the second city of France?")
    service.regenerate(service.store.session(s.id).active_leaf)
    harness.engine.clear()

    async def run_before(pilot) -> None:
        await _quiet(pilot)
        await pilot.press("ctrl+t")
        await pilot.pause()

    app = harness.app(continue_last=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
