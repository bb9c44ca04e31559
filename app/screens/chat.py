"""The chat screen: the conversation of the active branch, the composer and the status line.

It owns the open session id and decides what every request does; model work goes through
`LlmChatApp.run_engine` and comes back as JobDone/JobFailed/EngineEvent messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer

from llmchat.app.jobs import EngineEvent, EngineJob, EventSink, JobDone, JobFailed, StopCheck
from llmchat.app.screens.dialogs import EditDialog, ErrorScreen, SessionSettings, SettingsDialog
from llmchat.widgets.composer import Composer
from llmchat.widgets.message import MessageData, MessageView
from llmchat.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from llmchat.app.tui import LlmChatApp
    from llmchat.sessions.chat import ChatService, RestoreReport, TurnResult
    from llmchat.sessions.models import Node
    from llmchat.sessions.store import Store


GENERATING = "generating… (Esc: stop)"
STOPPING = "stopping…"


class ChatScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "stop", "Stop"),
        Binding("ctrl+n", "new_session", "New"),
        Binding("ctrl+o", "sessions", "Sessions"),
        Binding("ctrl+t", "tree", "Tree"),
        Binding("ctrl+r", "regenerate_last", "Regenerate"),
        Binding("ctrl+b", "copy_last", "Copy"),
        Binding("ctrl+f", "fork_here", "Fork"),
        Binding("f2", "settings", "Settings"),
        Binding("question_mark", "app.help", "Help", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="chat")
        self.session_id: int | None = None
        self.pending_settings = SessionSettings()  # for the session created on the first send
        self._streaming: MessageView | None = None
        self._render_seq = 0  # a path shown before its restore ends is skipped if the restore won the race

    @property
    def llm_app(self) -> LlmChatApp:
        return cast("LlmChatApp", self.app)

    @property
    def service(self) -> ChatService | None:
        return self.llm_app.service

    @property
    def store(self) -> Store:
        assert self.service is not None
        return self.service.store

    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="conversation")
        yield Composer(id="composer", placeholder="Message (Enter: send · Shift+Enter/Ctrl+J: newline · F1: help)")
        yield StatusBar(id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#conversation", VerticalScroll).anchor()
        self.query_one(Composer).focus()
        status = self.query_one(StatusBar)
        status.model = self.llm_app.model_name
        self.load_model()

    # ------------------------------------------------------------------ engine jobs
    def _run(self, kind: str, fn: Any, **context: Any) -> bool:
        app = self.llm_app
        if app.busy and kind != "load":
            self.notify("the model is busy: press Esc to stop the reply first", severity="warning", timeout=3)
            return False
        app.run_engine(self, EngineJob(kind, fn, context))
        return True

    def load_model(self) -> None:
        app = self.llm_app
        self.query_one(StatusBar).progress = f"loading model {app.model_name}…".replace(" …", "…")
        self.query_one("#conversation", VerticalScroll).loading = True

        def load(on_event: EventSink, should_stop: StopCheck) -> ChatService:
            return app.service_factory()

        self._run("load", load)

    def open_session(self, session_id: int, node_id: int | None = None) -> None:
        """Show a session's active path now, then restore its context in the engine."""
        service = self.service
        if service is None:
            return
        try:
            service.store.session(session_id)
        except KeyError:
            self.notify(f"no session {session_id}", severity="error")
            return
        if self.llm_app.busy:
            self.notify("the model is busy: press Esc to stop the reply first", severity="warning", timeout=3)
            return
        self.session_id = session_id
        self._render_seq += 1
        self.call_after_refresh(self._prerender, self._render_seq, node_id)
        self.query_one(StatusBar).progress = "restoring context…"

        def activate(on_event: EventSink, should_stop: StopCheck) -> RestoreReport:
            return service.activate(session_id, node_id, on_event=on_event)

        self._run("activate", activate, session_id=session_id)

    async def _prerender(self, seq: int, node_id: int | None) -> None:
        """Show the path while its context is restored, unless the restore has finished already."""
        if seq == self._render_seq:
            await self.render_session(node_id)

    async def on_engine_event(self, message: EngineEvent) -> None:
        from llmchat.sessions.chat import Notice, Progress, TokenText

        event = message.event
        if isinstance(event, TokenText):
            status = self.query_one(StatusBar)
            if status.progress != GENERATING and status.progress != STOPPING:
                status.progress = GENERATING
            if self._streaming is not None:
                await self._streaming.append(event.text)
        elif isinstance(event, Progress):
            verb = {"restore": "restoring", "prefill": "prefilling", "measure": "measuring"}.get(event.stage, event.stage)
            pct = f" {100 * event.done // event.total}%" if event.total else ""
            self.query_one(StatusBar).progress = f"{verb} {event.done:,}/{event.total:,} tokens{pct}"
        elif isinstance(event, Notice):
            self.notify(event.text, severity="error" if event.level == "error" else "warning")

    async def on_job_done(self, message: JobDone) -> None:
        self.llm_app.busy = False
        self._render_seq += 1
        self.query_one("#conversation", VerticalScroll).loading = False
        status = self.query_one(StatusBar)
        status.progress = ""
        kind = message.job.kind
        if kind == "load":
            await self._loaded(message.result)
        elif kind == "activate":
            report: RestoreReport = message.result
            self._show_restore(report, always=True)
            status.context_used = report.target_tokens
            await self.render_session()
        elif kind == "turn":
            await self._turn_done(message.result)

    async def on_job_failed(self, message: JobFailed) -> None:
        app = self.llm_app
        app.busy = False
        self._render_seq += 1
        self.query_one("#conversation", VerticalScroll).loading = False
        self.query_one(StatusBar).progress = ""
        if message.job.kind == "load":
            app.load_error = message.error
            store = message.error_type in ("StoreError", "OSError")
            title = "The session store could not be opened" if store else "The model could not be loaded"
            self.query_one(StatusBar).progress = title
            app.push_screen(ErrorScreen(title, message.error))
            return
        await self._finish_stream()
        self.notify(message.error, title="bug — please report" if message.unexpected else "", severity="error",
                    timeout=10)
        await self.render_session()

    async def _loaded(self, service: ChatService) -> None:
        app = self.llm_app
        app.service = service
        status = self.query_one(StatusBar)
        status.model = str(service.engine.info.name)
        status.n_ctx = int(service.engine.n_ctx)
        note = getattr(service.engine.info, "template_note", "")
        if note:
            self.notify(note, severity="warning")
        target: int | None = None
        if app.start_session_id is not None:
            target = app.start_session_id
        elif app.continue_last:
            last = service.store.last_session()
            if last is None:
                self.notify("no previous session: starting a new one", timeout=4)
            else:
                target = last.id
        if target is not None:
            self.open_session(target)

    # ------------------------------------------------------------------ turns
    async def on_composer_submitted(self, message: Composer.Submitted) -> None:
        text = message.text
        if not text.strip():
            return
        service = self.service
        if service is None:
            self.notify("the model is still loading", severity="warning", timeout=3)
            return
        if self.llm_app.busy:
            self.notify("the model is busy: press Esc to stop the reply first", severity="warning", timeout=3)
            return
        if self.session_id is None:
            self._create_session(self.pending_settings)
        sid = self.session_id
        assert sid is not None
        message.composer.clear()
        await self._begin_stream(user_text=text)

        def send(on_event: EventSink, should_stop: StopCheck) -> TurnResult:
            return service.send(sid, text, on_event=on_event, should_stop=should_stop)

        self._run("turn", send)

    def edit_message(self, node_id: int, text: str) -> None:
        service = self.service
        if service is None or self.llm_app.busy:
            self.notify("the model is busy: press Esc to stop the reply first", severity="warning", timeout=3)
            return
        node = service.store.node(node_id)

        async def start() -> None:
            await self.render_path(service.store.path_to(node.parent_id) if node.parent_id else [])
            await self._begin_stream(user_text=text)

            def edit(on_event: EventSink, should_stop: StopCheck) -> TurnResult:
                return service.edit(node_id, text, on_event=on_event, should_stop=should_stop)

            self._run("turn", edit)

        self.call_later(start)

    def regenerate(self, node_id: int) -> None:
        service = self.service
        if service is None or self.llm_app.busy:
            self.notify("the model is busy: press Esc to stop the reply first", severity="warning", timeout=3)
            return
        node = service.store.node(node_id)
        user_id = node.id if node.role == "user" else node.parent_id

        async def start() -> None:
            await self.render_path(service.store.path_to(user_id) if user_id else [])
            await self._begin_stream(user_text=None)

            def regen(on_event: EventSink, should_stop: StopCheck) -> TurnResult:
                return service.regenerate(node_id, on_event=on_event, should_stop=should_stop)

            self._run("turn", regen)

        self.call_later(start)

    async def _begin_stream(self, *, user_text: str | None) -> None:
        conv = self.query_one("#conversation", VerticalScroll)
        views = []
        if user_text is not None:
            views.append(MessageView(MessageData("user", user_text, node_id=None)))
        self._streaming = MessageView(MessageData("assistant", "", node_id=None))
        views.append(self._streaming)
        await conv.mount_all(views)
        conv.anchor()
        self.query_one(StatusBar).progress = "waiting for the model… (Esc: stop)"

    async def _finish_stream(self) -> None:
        if self._streaming is not None:
            await self._streaming.finish()
            self._streaming = None

    def _show_restore(self, report: RestoreReport, *, always: bool = False) -> None:
        """The restore badge in the status line; a refused snapshot is also a notification."""
        if always or report.restored_tokens or report.refused:
            self.query_one(StatusBar).badge = report.badge()
        for refused in report.refused:
            self.notify(f"snapshot refused: {refused.get('reason', '')} (re-prefilled instead)", severity="warning")

    async def _turn_done(self, result: TurnResult) -> None:
        streaming = self._streaming
        await self._finish_stream()
        status = self.query_one(StatusBar)
        status.context_used = result.context_tokens
        tps = result.reply_node.meta.get("tps")
        status.tps = float(tps) if tps is not None else None
        self._show_restore(result.restore)
        for warning in result.warnings:
            self.notify(warning, severity="warning")
        if result.stopped:
            self.notify("stopped: the partial reply is kept", timeout=3)
        if streaming is None or not streaming.is_mounted:
            await self.render_session()
            return
        # update the views in place (no rebuild: the scroll position stays where the user left it)
        conv = self.query_one("#conversation", VerticalScroll)
        views = list(conv.query_children(MessageView))
        idx = views.index(streaming)
        if idx != len(views) - 1 or len(self.store.path_to(result.reply_node.id)) != len(views):
            await self.render_session()  # e.g. a system-prompt node appeared before the first message
            return
        pending_user = views[idx - 1] if idx > 0 and views[idx - 1].data.node_id is None else None
        if pending_user is not None:
            await pending_user.set_data(self._data_for(result.user_node))
        await streaming.set_data(self._data_for(result.reply_node))
        session = self.store.session(result.session_id)
        status.session_title = session.title or f"session {session.id}"

    def action_stop(self) -> None:
        if self.llm_app.request_stop():
            self.query_one(StatusBar).progress = STOPPING

    # ------------------------------------------------------------------ rendering
    async def render_session(self, node_id: int | None = None) -> None:
        """Show the path to node_id (default: the session's active leaf)."""
        if self.service is None or self.session_id is None:
            await self.render_path([])
            return
        try:
            session = self.store.session(self.session_id)
        except KeyError:
            self.session_id = None
            await self.render_path([])
            return
        self.query_one(StatusBar).session_title = session.title or f"session {session.id}"
        leaf = node_id if node_id is not None else session.active_leaf
        await self.render_path(self.store.path_to(leaf) if leaf else [])

    async def render_path(self, path: list[Node]) -> None:
        conv = self.query_one("#conversation", VerticalScroll)
        old_views = list(conv.query_children(MessageView))
        focused = self.focused
        focus_index = old_views.index(focused) if isinstance(focused, MessageView) and focused in old_views else None
        views = [MessageView(self._data_for(node), id=f"node-{node.id}") for node in path]
        self._streaming = None
        async with conv.batch():
            await conv.remove_children()
            await conv.mount_all(views)
        if focus_index is not None and focus_index < len(views):
            self.set_focus(views[focus_index])  # e.g. keep switching branches with ← → on the same message
        else:
            conv.anchor()
            if focus_index is not None:
                self.query_one(Composer).focus()

    def _data_for(self, node: Node) -> MessageData:
        siblings = [n.id for n in self.store.children(node.parent_id, node.session_id) if n.role == node.role]
        return MessageData(node.role, node.content, node_id=node.id, status=node.status, siblings=tuple(siblings))

    # ------------------------------------------------------------------ message requests
    def on_message_view_request(self, message: MessageView.Request) -> None:
        view = message.view
        node_id = view.data.node_id
        if message.action == "copy":
            self.app.copy_to_clipboard(view.text)
            self.notify("message copied to the clipboard", timeout=2)
            return
        if node_id is None:
            return
        if message.action == "edit":
            self.ask_edit(node_id)
        elif message.action == "regenerate":
            self.regenerate(node_id)
        elif message.action == "sibling" and message.sibling_id is not None:
            self.switch_to(message.sibling_id)
        elif message.action == "fork":
            self.fork(node_id)

    def ask_edit(self, node_id: int) -> None:
        node = self.store.node(node_id)

        def done(text: str | None) -> None:
            if text is not None and text.strip() and text != node.content:
                self.edit_message(node_id, text)

        self.app.push_screen(EditDialog("Edit message — sending makes a new branch", node.content), done)

    def switch_to(self, sibling_id: int) -> None:
        if self.session_id is None:
            return
        leaf = self.store.deepest_leaf(sibling_id)
        self.open_session(self.session_id, leaf)

    def fork(self, node_id: int) -> None:
        if self.service is None or self.llm_app.busy:
            self.notify("the model is busy: press Esc to stop the reply first", severity="warning", timeout=3)
            return
        session = self.service.fork(node_id)
        self.notify(f"forked into session {session.id}: {session.title}", timeout=4)
        self.open_session(session.id)

    # ------------------------------------------------------------------ screen actions
    def _last_view(self, role: str) -> MessageView | None:
        views = [v for v in self.query(MessageView) if v.data.role == role and v.data.node_id is not None]
        return views[-1] if views else None

    def action_regenerate_last(self) -> None:
        view = self._last_view("assistant")
        if view is not None and view.data.node_id is not None:
            self.regenerate(view.data.node_id)

    def action_copy_last(self) -> None:
        view = self._last_view("assistant")
        if view is not None:
            self.app.copy_to_clipboard(view.text)
            self.notify("reply copied to the clipboard", timeout=2)

    def action_fork_here(self) -> None:
        views = [v for v in self.query(MessageView) if v.data.node_id is not None]
        if views and views[-1].data.node_id is not None:
            self.fork(views[-1].data.node_id)

    def _create_session(self, settings: SessionSettings) -> None:
        from llmchat.sessions.chat import clean_text

        assert self.service is not None
        session = self.service.new_session(system_prompt=clean_text(settings.system_prompt), params=settings.params)
        self.session_id = session.id

    def action_new_session(self) -> None:
        def done(settings: SessionSettings | None) -> None:
            if settings is None:
                return
            self.pending_settings = settings
            self.session_id = None
            if self.service is not None:
                self._create_session(settings)
            status = self.query_one(StatusBar)
            status.badge = ""
            status.session_title = "new session"
            self.call_later(self.render_session)
            self.query_one(Composer).focus()

        self.app.push_screen(SettingsDialog("New session", self.pending_settings, _sampling_defaults()), done)

    def action_settings(self) -> None:
        if self.session_id is None or self.service is None:
            current = self.pending_settings
        else:
            s = self.store.session(self.session_id)
            current = SessionSettings(system_prompt=s.system_prompt, params=dict(s.params))

        def done(settings: SessionSettings | None) -> None:
            if settings is None:
                return
            if self.session_id is None or self.service is None:
                self.pending_settings = settings
            else:
                from llmchat.sessions.chat import clean_text

                self.store.update_session(self.session_id, params=settings.params,
                                          system_prompt=clean_text(settings.system_prompt))
            self.notify("session settings saved", timeout=2)

        self.app.push_screen(SettingsDialog("Session settings", current, _sampling_defaults()), done)

    def action_sessions(self) -> None:
        from llmchat.app.screens.browser import SessionBrowser

        if self.service is None:
            self.notify("the model is still loading", severity="warning", timeout=3)
            return

        def done(session_id: int | None) -> None:
            if session_id is not None:
                self.open_session(session_id)
            elif self.session_id is not None:
                self.call_later(self.render_session)  # it may have been renamed or deleted

        self.app.push_screen(SessionBrowser(self.service, current=self.session_id), done)

    def action_tree(self) -> None:
        from llmchat.app.screens.tree import TreeResult, TreeScreen

        if self.service is None or self.session_id is None:
            self.notify("no conversation yet", timeout=2)
            return

        def done(result: TreeResult | None) -> None:
            if result is None:
                return
            if result.fork:
                self.fork(result.node_id)
            else:
                assert self.session_id is not None
                self.open_session(self.session_id, result.node_id)

        self.app.push_screen(TreeScreen(self.store, self.session_id), done)


def _sampling_defaults() -> dict[str, Any]:
    from llmchat.engine.runtime import Sampling

    return Sampling().to_dict()
