"""UI test fixtures: a scripted fake engine under the REAL ChatService, Store and SnapshotStore.

The fake engine implements sessions.chat.EngineLike: one token per character (code point),
ChatML as its template, capture/restore blobs that encode the token range they hold (so a
restore of the wrong tokens is refused), and scripted replies. `block_after` makes it stop
after that many reply tokens until `release` is set or the service asks it to stop, which
makes the stop test deterministic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from llmchat.engine.errors import SnapshotRefused
from llmchat.engine.template import ChatTemplate
from llmchat.sessions.models import pack_tokens

EOG = 0x110001  # beyond Unicode: never produced by tokenize
EOG_TEXT = "<|im_end|>"


@dataclass
class FakeInfo:
    name: str = "fake-model"
    path: str = "/models/fake.gguf"
    n_ctx: int = 4096
    memory_kind: str = "attention"
    fingerprint: dict[str, Any] = field(default_factory=lambda: {"model": "fake", "layout": 1})
    fingerprint_id: str = "fake-fingerprint"
    template_note: str = ""


@dataclass
class Decoded:
    tokens: int
    ms: float


class FakeEngine:
    def __init__(self, n_ctx: int = 4096) -> None:
        self.tokens: list[int] = []
        self.n_ctx = n_ctx
        self.info = FakeInfo(n_ctx=n_ctx)
        self.template = ChatTemplate(None)
        self.add_bos = False
        self.prefill_rate_tps = 2000.0
        self.replies: list[str] = []  # scripted replies, consumed in order
        self.turns = 0
        self.block_after: int | None = None
        self.blocked = threading.Event()  # set when generation is held at block_after
        self.release = threading.Event()
        self.restores = 0
        self.capture_error: OSError | None = None  # e.g. ENOSPC: the disk is full

    # ------------------------------------------------------------------ facts
    @property
    def can_cut(self) -> bool:
        return True

    @property
    def bos(self) -> int:
        return 1

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        return [ord(c) for c in text]

    def token_bytes(self, token: int) -> bytes:
        return EOG_TEXT.encode() if token == EOG else chr(token).encode("utf-8")

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return token == EOG

    # ------------------------------------------------------------------ context
    def keep(self, n: int) -> bool:
        del self.tokens[n:]
        return True

    def clear(self) -> None:
        self.tokens = []

    def prefill(self, tokens: Sequence[int], *, progress: Any = None, should_stop: Any = None) -> Decoded:
        if len(self.tokens) + len(tokens) > self.n_ctx:
            from llmchat.engine.errors import ContextFullError

            raise ContextFullError("context full")
        self.tokens.extend(tokens)
        if progress is not None and tokens:
            progress(len(tokens), len(tokens))
        return Decoded(len(tokens), len(tokens) / self.prefill_rate_tps * 1000)

    def next_reply(self) -> str:
        self.turns += 1
        if self.replies:
            return self.replies.pop(0)
        return f"Reply {self.turns}: **hello** from the fake model."

    def generate(self, sampling: Any, *, should_stop: Any = None) -> Iterator[int]:
        text = self.next_reply()
        stop = should_stop or (lambda: False)
        for i, ch in enumerate(text[: sampling.max_tokens]):
            if self.block_after is not None and i == self.block_after:
                self.blocked.set()
                while not self.release.wait(0.005):
                    if stop():
                        break
            if stop():
                return
            self.tokens.append(ord(ch))
            yield ord(ch)
        if stop() or len(text) > sampling.max_tokens:
            return
        self.tokens.append(EOG)
        yield EOG

    # ------------------------------------------------------------------ snapshots
    def capture(self, start: int, end: int) -> bytearray:
        if self.capture_error is not None:
            raise self.capture_error
        return bytearray(b"FAKEKV" + pack_tokens(self.tokens[start:end]))

    def restore(self, blob: Any, tokens: Sequence[int]) -> None:
        if bytes(blob) != b"FAKEKV" + pack_tokens(list(tokens)):
            raise SnapshotRefused("fake engine: the blob does not hold these tokens")
        if len(self.tokens) + len(tokens) > self.n_ctx:
            raise SnapshotRefused("fake engine: no room")
        self.restores += 1
        self.tokens.extend(tokens)


class FakeClock:
    """A stand-in for the `time` module inside the core: fixed wall clock, 1 ms per perf_counter call."""

    def __init__(self) -> None:
        self._t = 1_780_000_000.0
        self._perf = 0.0

    def time(self) -> float:
        self._t += 1.0
        return self._t

    def perf_counter(self) -> float:
        self._perf += 0.001
        return self._perf

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "home"
    monkeypatch.setenv("LLMCHAT_HOME", str(d))
    from llmchat.sessions import locations

    locations.ensure()
    return d


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    """Deterministic times in the core (timestamps, durations) for snapshot tests."""
    import os

    import llmchat.sessions.chat as chat
    import llmchat.sessions.snapshots as snapshots
    import llmchat.sessions.store as store

    clock = FakeClock()
    for mod in (chat, snapshots, store):
        monkeypatch.setattr(mod, "time", clock)
    old_tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield clock
    if old_tz is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old_tz
    time.tzset()


class Harness:
    """Builds the real service on the fake engine, and apps on it."""

    def __init__(self, home: Path, engine: FakeEngine) -> None:
        self.home = home
        self.engine = engine
        self.service: Any = None

    def service_factory(self) -> Any:
        from llmchat.sessions import locations
        from llmchat.sessions.chat import ChatService
        from llmchat.sessions.snapshots import SnapshotStore
        from llmchat.sessions.store import Store

        if self.service is None:
            self.service = ChatService(Store(locations.database_path()), SnapshotStore(locations.snapshots_dir()),
                                       self.engine)
        return self.service

    def app(self, **kw: Any) -> Any:
        from llmchat.app.tui import make_app

        return make_app(self.service_factory, config_path=self.home / "config.json", **kw)


@pytest.fixture
def harness(home: Path, engine: FakeEngine) -> Harness:
    return Harness(home, engine)


async def settle(pilot: Any) -> None:
    """Wait until no engine job runs and every message it posted has been handled."""
    from textual.worker import WorkerCancelled, WorkerError, WorkerFailed

    app = pilot.app
    for _ in range(100):
        for worker in list(app.workers):
            try:  # a job started from another job's result cancels that (finished) worker: exclusive
                await worker.wait()
            except (WorkerCancelled, WorkerFailed, WorkerError):
                pass
        await pilot.pause()
        if not app.busy and all(w.is_finished for w in app.workers):
            await pilot.pause()
            return
    raise AssertionError("the app did not settle")
