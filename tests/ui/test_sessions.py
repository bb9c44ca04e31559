"""Pilot tests of the session browser, themes and resuming, on the scripted fake engine."""

from __future__ import annotations

import json

from textual.widgets import DataTable, Input

from llmchat.app.screens.browser import SessionBrowser
from llmchat.app.screens.chat import ChatScreen
from llmchat.widgets.message import MessageView
from llmchat.widgets.statusbar import StatusBar

from .conftest import settle


def make_sessions(harness, *topics: str) -> list[int]:
    """Sessions made through the real service (one turn each) before the app starts."""
    service = harness.service_factory()
    ids = []
    for topic in topics:
        s = service.new_session()
        harness.engine.replies = [f"All about {topic}."]
        service.send(s.id, f"Tell me about {topic}")
        ids.append(s.id)
    return ids


def contents(app) -> list[str]:
    return [v.data.content for v in app.screen.query(MessageView)]


async def open_browser(pilot) -> SessionBrowser:
    await pilot.press("ctrl+o")
    await pilot.pause()
    assert isinstance(pilot.app.screen, SessionBrowser)
    return pilot.app.screen


def row_titles(browser: SessionBrowser) -> list[str]:
    table = browser.query_one(DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_open_session_from_browser(harness):
    make_sessions(harness, "owls", "ferns")
    app = harness.app()
    async with app.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        browser = await open_browser(pilot)
        assert row_titles(browser) == ["Tell me about ferns", "Tell me about owls"]
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ChatScreen)
        assert contents(app) == ["Tell me about owls", "All about owls."]
        badge = app.screen.query_one(StatusBar).badge
        assert badge.startswith("restored ")  # the context came back from snapshots


async def test_search_finds_messages(harness):
    make_sessions(harness, "owls", "ferns", "rivers")
    app = harness.app()
    async with app.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        browser = await open_browser(pilot)
        await pilot.press("slash")
        await pilot.press(*"ferns")
        await pilot.pause()
        assert row_titles(browser) == ["Tell me about ferns"]
        assert "ferns" in browser.details_text.split("\nmatch\n")[1].splitlines()[0]
        await pilot.press("enter")  # from the search box to the results
        await pilot.press("enter")  # open
        await settle(pilot)
        assert contents(app)[1] == "All about ferns."


async def test_rename_and_delete(harness):
    ids = make_sessions(harness, "owls", "ferns")
    app = harness.app()
    async with app.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        browser = await open_browser(pilot)
        await pilot.press("r")
        await pilot.pause()
        prompt = app.screen.query_one("#prompt-input", Input)
        prompt.value = "Botany notes"
        await pilot.press("enter")
        await pilot.pause()
        assert row_titles(browser)[0] == "Botany notes"
        assert harness.service.store.session(ids[1]).title == "Botany notes"
        # delete asks first; "n" keeps the session
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause()
        assert len(row_titles(browser)) == 2
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert row_titles(browser) == ["Tell me about owls"]
        assert [s.id for s in harness.service.store.sessions()] == [ids[0]]


async def test_export_writes_file(harness, home):
    make_sessions(harness, "owls")
    app = harness.app()
    async with app.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        await open_browser(pilot)
        await pilot.press("m")
        await pilot.press("j")
        await pilot.pause()
        md = (home / "exports" / "session-1.md").read_text()
        assert "All about owls." in md
        doc = json.loads((home / "exports" / "session-1.json").read_text())
        assert doc["llmchat_export"] == 1


async def test_continue_last_restores_with_badge(harness):
    make_sessions(harness, "owls", "ferns")
    harness.engine.clear()  # a fresh process: nothing in the context
    app = harness.app(continue_last=True)
    async with app.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        assert contents(app) == ["Tell me about ferns", "All about ferns."]
        status = app.screen.query_one(StatusBar)
        assert status.badge.startswith("restored ")
        stats = harness.service.store.last_session().stats
        assert stats["last_restore"]["restored_tokens"] > 0


async def test_open_session_by_id(harness):
    ids = make_sessions(harness, "owls", "ferns")
    harness.engine.clear()
    app = harness.app(session_id=ids[0])
    async with app.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        assert contents(app)[0] == "Tell me about owls"


async def test_theme_switch_is_remembered(harness, home):
    app = harness.app()
    async with app.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        assert app.theme == "llmchat-dark"
        await pilot.press("f9")
        await pilot.pause()
        assert app.theme == "llmchat-light"
    assert json.loads((home / "config.json").read_text())["theme"] == "llmchat-light"
    app2 = harness.app()
    async with app2.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        assert app2.theme == "llmchat-light"


async def test_settings_saved_with_session(harness):
    make_sessions(harness, "owls")
    harness.engine.clear()
    app = harness.app(continue_last=True)
    async with app.run_test(size=(110, 40)) as pilot:
        await settle(pilot)
        await pilot.press("f2")
        await pilot.pause()
        screen = app.screen
        screen.query_one("#system-prompt").text = "You are terse."
        screen.query_one("#set-temperature", Input).value = "0.2"
        screen.query_one("#set-max_tokens", Input).value = "64"
        await pilot.press("ctrl+s")
        await pilot.pause()
        s = harness.service.store.last_session()
        assert s.system_prompt == "You are terse."
        assert s.params["temperature"] == 0.2 and s.params["max_tokens"] == 64


async def test_new_session_with_system_prompt(harness):
    harness.engine.replies = ["ok"]
    app = harness.app()
    async with app.run_test(size=(110, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+n")
        await pilot.pause()
        app.screen.query_one("#system-prompt").text = "Be brief."
        await pilot.press("ctrl+s")
        await pilot.pause()
        composer = app.screen.query_one("#composer")
        composer.text = "hi"
        await pilot.press("enter")
        await settle(pilot)
        s = harness.service.store.last_session()
        assert s.system_prompt == "Be brief."
        assert contents(app) == ["Be brief.", "hi", "ok"]


async def test_help_screen_and_palette_list_actions(harness):
    from llmchat.app.screens.help import HelpScreen

    app = harness.app()
    async with app.run_test(size=(110, 40)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Sessions", "Tree", "New", "Settings", "Theme: llmchat-light"):
            assert title in titles
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)
