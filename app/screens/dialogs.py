"""Modal dialogs with typed results: confirm, edit text, one-line prompt, session settings, errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea


class ConfirmDialog(ModalScreen[bool]):
    """Yes/no. Dismisses with True only on an explicit yes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, *, yes: str = "Delete") -> None:
        super().__init__(classes="dialog-screen")
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="dialog-text", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class EditDialog(ModalScreen[str | None]):
    """Edit a (multi-line) text; Ctrl+S saves, Esc cancels. Dismisses with the text or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(self.title_text, classes="dialog-title")
            yield TextArea(self.text, id="edit-text", soft_wrap=True)
            yield Label("Ctrl+S: save and send as a new branch · Esc: cancel", classes="dialog-hint")

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.move_cursor(area.document.end)

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PromptDialog(ModalScreen[str | None]):
    """A one-line input (rename). Enter saves, Esc cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, value: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(self.value, id="prompt-input")
            yield Label("Enter: save · Esc: cancel", classes="dialog-hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass
class SessionSettings:
    """The result of the settings dialog: a system prompt and Sampling field values."""

    system_prompt: str = ""
    params: dict[str, Any] = field(default_factory=dict)


# (Sampling field, label, type)
SETTING_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("temperature", "Temperature", float),
    ("top_p", "Top p", float),
    ("max_tokens", "Max tokens", int),
    ("seed", "Seed (-1: random)", int),
)


class SettingsDialog(ModalScreen[SessionSettings | None]):
    """Per-session settings: system prompt, temperature, top_p, max tokens, seed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, title: str, settings: SessionSettings, defaults: dict[str, Any]) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.settings = settings
        self.defaults = defaults

    def compose(self) -> ComposeResult:
        params = {**self.defaults, **self.settings.params}
        with Vertical(classes="dialog wide", id="settings"):
            yield Label(self.title_text, classes="dialog-title")
            yield Label("System prompt")
            yield TextArea(self.settings.system_prompt, id="system-prompt", soft_wrap=True)
            for key, label, kind in SETTING_FIELDS:
                with Horizontal(classes="setting-row"):
                    yield Label(label, classes="setting-label")
                    yield Input(str(params.get(key, "")), id=f"set-{key}", compact=True,
                                type="integer" if kind is int else "number")
            yield Static("", id="settings-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#system-prompt", TextArea).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        else:
            self.action_cancel()

    def action_save(self) -> None:
        params: dict[str, Any] = dict(self.settings.params)
        for key, label, kind in SETTING_FIELDS:
            raw = self.query_one(f"#set-{key}", Input).value.strip()
            if not raw:
                params.pop(key, None)
                continue
            try:
                params[key] = kind(raw)
            except ValueError:
                self.query_one("#settings-error", Static).update(f"{label}: not a valid number")
                return
        prompt = self.query_one("#system-prompt", TextArea).text.strip()
        self.dismiss(SessionSettings(system_prompt=prompt, params=params))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ErrorScreen(ModalScreen[None]):
    """A fatal problem (the model did not load): the reason, and how to leave."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q,escape", "app.quit", "Quit")]

    def __init__(self, title: str, message: str) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide error"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.message, markup=False, classes="dialog-text")
            yield Label("q: quit", classes="dialog-hint")
