"""Shared fixtures. Core and engine tests run the real default model (SmolLM2-135M)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmchat.engine.modelfile import default_model_path


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data dir."""
    home = tmp_path / "home"
    monkeypatch.setenv("LLMCHAT_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def model_path() -> Path:
    return default_model_path()


def new_engine(model_path: Path, **kw: object) -> object:
    from llmchat.engine.runtime import Engine, EngineConfig

    return Engine(EngineConfig(model_path=model_path, **kw))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def engine(model_path: Path) -> Iterator[object]:
    eng = new_engine(model_path, n_ctx=4096)
    yield eng
    eng.close()  # type: ignore[attr-defined]


@pytest.fixture
def service(engine: object, _home: Path) -> object:
    from llmchat.sessions.chat import ChatService
    from llmchat.sessions.snapshots import SnapshotStore
    from llmchat.sessions.store import Store

    engine.clear()  # type: ignore[attr-defined]
    store = Store(_home / "llmchat.db")
    return ChatService(store, SnapshotStore(_home / "snapshots"), engine)  # type: ignore[arg-type]


def run_cli(*args: str, home: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    import subprocess

    env = {**os.environ, "LLMCHAT_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "llmchat.app.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", default=False, help="run the long fault loops too")
