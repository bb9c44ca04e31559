"""The llmchat Textual app: the app factory, the engine worker and `run_tui` for the CLI.

All calls into the ChatService that touch the model (loading it, turns, restores) run in one
thread worker group ("engine"); the worker reports back only by posting messages
(app/jobs.py) to the screen that asked, so no widget is touched from the worker thread.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from llmchat.app.config import load_config, save_config
from llmchat.app.jobs import EngineEvent, EngineJob, JobDone, JobFailed
from llmchat.themes.palette import DEFAULT_THEME, STYLESHEET, THEMES

if TYPE_CHECKING:
    from llmchat.sessions.chat import ChatService

ServiceFactory = Callable[[], "ChatService"]


def one_line(error: BaseException) -> str:
    """A user-facing one-line message for an error raised by the core."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if isinstance(error, KeyError):
        return f"not found: {text}"
    return text or type(error).__name__


def _expected_errors() -> tuple[type[BaseException], ...]:
    from llmchat.engine.errors import EngineError
    from llmchat.sessions.chat import ChatError
    from llmchat.sessions.snapshots import SnapshotError
    from llmchat.sessions.store import StoreError

    return (ChatError, EngineError, StoreError, SnapshotError, KeyError, OSError)


class LlmChatApp(App[int]):
    """A chat with a local model, whose conversations are trees restored from snapshots."""

    TITLE = "llmchat"
    CSS_PATH = str(STYLESHEET)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f1", "help", "Help"),
        Binding("f9", "toggle_theme", "Theme"),
    ]

    def __init__(
        self, service_factory: ServiceFactory, *, session_id: int | None = None, continue_last: bool = False,
        model_name: str = "", config_path: Path | None = None,
    ) -> None:
        self.service_factory = service_factory
        self.start_session_id = session_id
        self.continue_last = continue_last
        self.model_name = model_name
        self.config_path = config_path
        self.service: ChatService | None = None
        self.load_error: str | None = None
        self.busy = False  # an engine job is running (set and cleared on the UI thread)
        self.last_traceback = ""
        self._stop = threading.Event()
        self._engine_lock = threading.Lock()  # belt and braces: one thread in the engine, ever
        super().__init__()
        for theme in THEMES:
            self.register_theme(theme)
        saved = load_config(config_path).get("theme")
        self.theme = saved if isinstance(saved, str) and saved in self.available_themes else DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # used by other (built-in) themes; variables cannot refer to other variables here
        return {"user-message": "rgba(95, 175, 215, 0.15)", "assistant-message": "rgba(128, 128, 128, 0.08)"}

    def get_default_screen(self) -> Screen:
        from llmchat.app.screens.chat import ChatScreen

        return ChatScreen()

    # ------------------------------------------------------------------ engine worker
    def run_engine(self, target: MessagePump, job: EngineJob) -> None:
        """Run `job` in the engine worker; its events and result are posted to `target`."""
        self.busy = True
        self._stop.clear()
        self._engine_worker(target, job)

    def request_stop(self) -> bool:
        """Ask the running job to stop (the service's should_stop reads this). True if one runs."""
        if not self.busy:
            return False
        self._stop.set()
        return True

    def close_engine(self, timeout: float = 60.0) -> None:
        """Stop any reply still being generated, then free the model (after the app has exited)."""
        self._stop.set()
        if self.service is None or not self._engine_lock.acquire(timeout=timeout):
            return
        try:
            close = getattr(self.service.engine, "close", None)
            if callable(close):
                close()
        finally:
            self._engine_lock.release()

    @work(thread=True, exclusive=True, exit_on_error=False, group="engine")
    def _engine_worker(self, target: MessagePump, job: EngineJob) -> None:
        worker = get_current_worker()

        def should_stop() -> bool:
            return self._stop.is_set() or worker.is_cancelled

        def on_event(event: Any) -> None:
            target.post_message(EngineEvent(job.kind, event))

        with self._engine_lock:
            try:
                result = job.fn(on_event, should_stop)
            except _expected_errors() as e:
                target.post_message(JobFailed(job, one_line(e), error_type=type(e).__name__))
            except Exception as e:  # a bug: say so, keep the app alive, keep the traceback
                self.last_traceback = traceback.format_exc()
                target.post_message(JobFailed(job, f"{type(e).__name__}: {e}", unexpected=True,
                                              error_type=type(e).__name__))
            else:
                target.post_message(JobDone(job, result))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a worker failure surfaces (jobs catch their own errors; this is the net)."""
        if event.state == WorkerState.ERROR:
            self.busy = False
            error = event.worker.error
            self.notify(f"{type(error).__name__}: {error}", title="background task failed", severity="error")

    # ------------------------------------------------------------------ themes, help, palette
    def watch_theme(self, theme: str) -> None:
        save_config({"theme": theme}, self.config_path)

    def action_toggle_theme(self) -> None:
        self.theme = "llmchat-light" if self.theme == "llmchat-dark" else "llmchat-dark"
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_help(self) -> None:
        from llmchat.app.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for theme in THEMES:
            yield SystemCommand(f"Theme: {theme.name}", f"Switch to the {theme.name} theme",
                                partial(setattr, self, "theme", theme.name))
        seen = {"quit", "command_palette"}
        for key, active in screen.active_bindings.items():
            b = active.binding
            if not b.description or b.action in seen or not active.enabled:
                continue
            seen.add(b.action)
            yield SystemCommand(b.description, f"{b.description} ({key})",
                                partial(self.call_later, self.run_action, b.action, active.node))


def make_app(
    service_factory: ServiceFactory, *, session_id: int | None = None, continue_last: bool = False,
    model_name: str = "", config_path: Path | None = None,
) -> LlmChatApp:
    """The app the CLI and every test use. `service_factory` loads the model (slow): the app
    calls it in the engine worker and shows progress meanwhile."""
    return LlmChatApp(service_factory, session_id=session_id, continue_last=continue_last,
                      model_name=model_name, config_path=config_path)


def run_tui(*, model_path: str | Path | None, session_id: int | None, continue_last: bool,
            engine_options: dict[str, Any]) -> int:
    """Entry point for `llmchat` without a subcommand."""
    from llmchat.sessions import locations
    from llmchat.sessions.chat import ChatService
    from llmchat.sessions.snapshots import SnapshotStore
    from llmchat.sessions.store import Store

    try:
        locations.ensure()
    except OSError as e:
        print(f"llmchat: cannot create the data dir {locations.data_dir()}: {e.strerror or e}", file=sys.stderr)
        return 1
    name = Path(model_path).name if model_path else ""

    def factory() -> ChatService:
        from llmchat.app.runtime import load_engine

        engine = load_engine(model_path, **engine_options)
        return ChatService(Store(locations.database_path()), SnapshotStore(locations.snapshots_dir()), engine)

    app = make_app(factory, session_id=session_id, continue_last=continue_last, model_name=name)
    result = app.run()
    app.close_engine()
    return int(result or 0) if app.load_error is None else 1
