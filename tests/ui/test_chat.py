"""Pilot tests of the chat screen on the scripted fake engine."""

from __future__ import annotations

import asyncio

from llmchat.app.screens.chat import ChatScreen
from llmchat.widgets.composer import Composer
from llmchat.widgets.message import MessageView
from llmchat.widgets.statusbar import StatusBar

from .conftest import settle


def views(app) -> list[MessageView]:
    return list(app.screen.query(MessageView))


async def send(pilot, text: str) -> None:
    composer = pilot.app.screen.query_one(Composer)
    composer.focus()
    composer.text = text
    await pilot.press("enter")


async def test_send_streams_reply(harness):
    from textual.widgets import Markdown

    harness.engine.replies = ["Hello **there**, here is `code`."]
    harness.engine.block_after = 8
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ChatScreen)
        assert app.screen.query_one(StatusBar).model == "fake-model"
        await send(pilot, "Hi model")
        # mid-stream: the first tokens are on screen, in the Markdown body, while the model works
        await asyncio.to_thread(harness.engine.blocked.wait, 10)
        streaming = views(app)[-1]
        for _ in range(50):
            await pilot.pause()
            if streaming.query_one(Markdown).source == "Hello **":
                break
        assert streaming.query_one(Markdown).source == "Hello **"
        assert streaming.data.node_id is None and app.busy
        harness.engine.release.set()
        await settle(pilot)
        vs = views(app)
        assert [v.data.role for v in vs] == ["user", "assistant"]
        assert vs[0].data.content == "Hi model"
        assert vs[1].data.content == "Hello **there**, here is `code`."
        assert vs[1].data.node_id is not None
        assert app.screen.query_one(Composer).text == ""
        session = harness.service.store.last_session()
        assert session.title == "Hi model"


async def test_stop_keeps_partial_reply(harness):
    engine = harness.engine
    engine.replies = ["abcdefghijklmnopqrstuvwxyz"]
    engine.block_after = 5
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "count letters")
        await asyncio.to_thread(engine.blocked.wait, 10)
        await pilot.pause()
        # the composer stays responsive during generation
        composer = app.screen.query_one(Composer)
        await pilot.press("x", "y")
        assert composer.text == "xy"
        await pilot.press("escape")
        await settle(pilot)
        vs = views(app)
        assert vs[-1].data.role == "assistant"
        assert vs[-1].data.content == "abcde"
        assert vs[-1].data.status == "stopped"
        node = harness.service.store.node(vs[-1].data.node_id)
        assert node.status == "stopped" and node.content == "abcde"


async def test_edit_past_message_makes_branch(harness):
    harness.engine.replies = ["first answer", "second answer", "edited answer"]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "question one")
        await settle(pilot)
        await send(pilot, "question two")
        await settle(pilot)
        first_user = views(app)[0]
        first_user.focus()
        await pilot.press("e")
        await pilot.pause()
        area = app.screen.query_one("#edit-text")
        area.text = "question one, edited"
        await pilot.press("ctrl+s")
        await settle(pilot)
        vs = views(app)
        assert [v.data.content for v in vs] == ["question one, edited", "edited answer"]
        assert len(vs[0].data.siblings) == 2 and vs[0].data.sibling_index == 1
        switcher = vs[0].query_one(".position")
        assert str(switcher.render()) == "2/2"


async def test_switch_siblings_restores_branch(harness):
    harness.engine.replies = ["reply A", "reply B"]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "hello")
        await settle(pilot)
        reply = views(app)[-1]
        reply.focus()
        await pilot.press("r")  # regenerate: a sibling reply
        await settle(pilot)
        vs = views(app)
        assert vs[-1].data.content == "reply B"
        assert vs[-1].data.siblings and len(vs[-1].data.siblings) == 2
        vs[-1].focus()
        await pilot.press("left")
        await settle(pilot)
        vs = views(app)
        assert vs[-1].data.content == "reply A"
        session = harness.service.store.last_session()
        assert session.active_leaf == vs[-1].data.node_id
        badge = app.screen.query_one(StatusBar).badge
        assert badge  # the restore badge after a branch switch
        # switch back (the switched message keeps the focus): the snapshots of branch B are restored
        assert app.focused is vs[-1]
        await pilot.press("right")
        await settle(pilot)
        assert views(app)[-1].data.content == "reply B"
        assert "restored" in app.screen.query_one(StatusBar).badge


async def test_tree_jump(harness):
    harness.engine.replies = ["one", "two", "three"]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        for q in ("q1", "q2", "q3"):
            await send(pilot, q)
            await settle(pilot)
        await pilot.press("ctrl+t")
        await pilot.pause()
        from textual.widgets import Tree

        from llmchat.app.screens.tree import TreeScreen

        assert isinstance(app.screen, TreeScreen)
        tree = app.screen.query_one(Tree)
        target = next(n for n in _walk(tree.root) if n.data is not None and "two" in str(n.label))
        tree.move_cursor(target)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ChatScreen)
        assert [v.data.content for v in views(app)] == ["q1", "one", "q2", "two"]
        assert harness.service.store.last_session().active_leaf == target.data


async def test_send_while_busy_is_refused_and_stop_works_with_worker(harness):
    engine = harness.engine
    engine.block_after = 2
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "first")
        await asyncio.to_thread(engine.blocked.wait, 10)
        await send(pilot, "second")  # refused: still generating
        await pilot.pause()
        assert app.screen.query_one(Composer).text == "second"
        engine.release.set()
        await settle(pilot)
        assert [v.data.role for v in views(app)] == ["user", "assistant"]


async def test_copy_message(harness):
    harness.engine.replies = ["copy me"]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "hi")
        await settle(pilot)
        await pilot.press("ctrl+b")
        assert app.clipboard == "copy me"


async def test_model_load_error_is_shown_not_raised(home):
    from llmchat.app.screens.dialogs import ErrorScreen
    from llmchat.app.tui import make_app
    from llmchat.engine.errors import ModelLoadError

    def broken():
        raise ModelLoadError("model file not found: /nope.gguf")

    app = make_app(broken, config_path=home / "config.json")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        assert app.load_error == "model file not found: /nope.gguf"


def _walk(node):
    yield node
    for child in node.children:
        yield from _walk(child)


async def test_fork_opens_new_session(harness):
    harness.engine.replies = ["one", "two"]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "q1")
        await settle(pilot)
        await send(pilot, "q2")
        await settle(pilot)
        views(app)[1].focus()  # the first reply
        await pilot.press("f")
        await settle(pilot)
        store = harness.service.store
        assert len(store.sessions()) == 2
        assert app.screen.session_id == store.last_session().id != 1
        assert [v.data.content for v in views(app)] == ["q1", "one"]


async def test_chat_error_is_a_notification(harness):
    harness.engine.n_ctx = 120  # too small for a long message: ChatError from the service
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "x" * 200)
        await settle(pilot)
        assert isinstance(app.screen, ChatScreen)
        messages = [str(n.message) for n in app._notifications]
        assert any("context holds 120" in m for m in messages), messages
        assert not app.busy


async def test_refused_snapshot_is_reported(harness):
    harness.engine.replies = ["fine"]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "hello")
        await settle(pilot)
    # damage every snapshot file's payload, then resume in a fresh context
    for f in (harness.home / "snapshots").rglob("*"):
        if f.is_file():
            data = bytearray(f.read_bytes())
            data[-1] ^= 0xFF
            f.write_bytes(bytes(data))
    harness.engine.clear()
    app2 = harness.app(continue_last=True)
    async with app2.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        badge = app2.screen.query_one(StatusBar).badge
        assert "refused" in badge and "prefilled" in badge
        assert any("snapshot refused" in str(n.message) for n in app2._notifications)


async def test_disk_full_notice_keeps_chatting(harness):
    import errno

    harness.engine.capture_error = OSError(errno.ENOSPC, "No space left on device")
    harness.engine.replies = ["still here"]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "hello")
        await settle(pilot)
        assert views(app)[-1].data.content == "still here"
        assert any("disk full" in str(n.message) for n in app._notifications)


async def test_builtin_theme_works_with_our_css(harness):
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.theme = "nord"
        await send(pilot, "hi")
        await settle(pilot)
        assert views(app)[0].styles.background is not None


async def test_sibling_switcher_arrows_are_clickable(harness):
    harness.engine.replies = ["reply A", "reply B"]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await send(pilot, "hello")
        await settle(pilot)
        await pilot.press("ctrl+r")
        await settle(pilot)
        reply = views(app)[-1]
        assert str(reply.query_one(".position").render()) == "2/2"
        await pilot.click(reply.query_one(".prev"))
        await settle(pilot)
        reply = views(app)[-1]
        assert reply.data.content == "reply A"
        assert str(reply.query_one(".position").render()) == "1/2"
