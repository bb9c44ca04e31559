"""End to end through the app with the REAL default model (SmolLM2-135M): a turn, then a resume."""

from __future__ import annotations

from typing import Any

import pytest

from llmchat.widgets.composer import Composer
from llmchat.widgets.message import MessageView
from llmchat.widgets.statusbar import StatusBar

from .conftest import settle

pytestmark = pytest.mark.slow


def _real_factory(params: dict[str, Any] | None = None) -> Any:
    from llmchat.engine.modelfile import default_model_path
    from llmchat.engine.runtime import Engine, EngineConfig
    from llmchat.sessions import locations
    from llmchat.sessions.chat import ChatService
    from llmchat.sessions.snapshots import SnapshotStore
    from llmchat.sessions.store import Store

    def factory() -> ChatService:
        engine = Engine(EngineConfig(model_path=default_model_path(), n_ctx=2048))
        service = ChatService(Store(locations.database_path()), SnapshotStore(locations.snapshots_dir()), engine)
        if params is not None and service.store.last_session() is None:
            service.new_session(params=params)
        return service

    return factory


async def test_real_model_turn_and_resume(home):
    try:
        from llmchat.engine.modelfile import default_model_path

        default_model_path()
    except Exception as e:  # pragma: no cover - depends on the install
        pytest.skip(f"default model not installed: {e}")
    from llmchat.app.tui import make_app

    services = []
    factory = _real_factory({"temperature": 0, "max_tokens": 12, "seed": 1})

    def keep() -> Any:
        services.append(factory())
        return services[-1]

    app = make_app(keep, continue_last=True, config_path=home / "config.json")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.load_error is None
        composer = app.screen.query_one(Composer)
        composer.text = "What is the capital of France?"
        await pilot.press("enter")
        await settle(pilot)
        views = list(app.screen.query(MessageView))
        assert [v.data.role for v in views] == ["user", "assistant"]
        assert views[1].data.content.strip()
        assert views[1].data.node_id is not None
        status = app.screen.query_one(StatusBar)
        assert status.tps is not None and status.context_used > 0
    services[0].engine.close()

    # a new process: --continue restores the context from snapshots and shows the badge
    app2 = make_app(keep, continue_last=True, config_path=home / "config.json")
    async with app2.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert len(list(app2.screen.query(MessageView))) == 2
        assert app2.screen.query_one(StatusBar).badge.startswith("restored ")
    services[1].engine.close()
