"""Messages between the engine worker thread and the screens (posted, never called)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

EventSink = Callable[[Any], None]
StopCheck = Callable[[], bool]
JobFn = Callable[[EventSink, StopCheck], Any]


@dataclass
class EngineJob:
    """One call into the service, run in the engine worker. `fn(on_event, should_stop)`."""

    kind: str  # load | turn | activate
    fn: JobFn
    context: dict[str, Any] = field(default_factory=dict)


@dataclass
class EngineEvent(Message):
    """A Progress, TokenText or Notice event from the service, during a job."""

    kind: str
    event: Any


@dataclass
class JobDone(Message):
    job: EngineJob
    result: Any


@dataclass
class JobFailed(Message):
    job: EngineJob
    error: str
    unexpected: bool = False
    error_type: str = ""  # the exception's class name, e.g. ModelLoadError, StoreError
