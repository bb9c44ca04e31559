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
    harness.engine.replies = ["Hello **there**, here is `code`."]
    app = harness.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ChatScreen)
        assert app.screen.query_one(StatusBar).model == "fake-model"
        await send(pilot, "Hi model")
        await settle(pilot)
        vs = views(app)
        assert [v.data.role for v in vs] == ["user", "assistant"]
        assert vs[0].data.content == "Hi model"
        assert vs[1].data.content == "Hello **there**, here is `code`."
        assert vs[1].data.node_id is not None
        assert app.screen.query_one(Composer).text == ""
        session = harness.service.store.last_session()
        assert session.title == "Hi model"
