"""The model's own chat template (from GGUF metadata), rendered with jinja2 in a sandbox.

Conversations are stored as token pieces per message; the template decides the text of
each piece. `ChatTemplate.render` gives the whole prompt text for a list of messages; the
engine derives the pieces from differences between renders and checks the prefix property
(rendering k+1 messages extends rendering k) instead of assuming it.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from llmchat.engine.errors import EngineError

# ChatML, used when a GGUF carries no template (and said so in ChatTemplate.note).
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def _raise(msg: str) -> None:
    raise TemplateError(msg)


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


class ChatTemplate:
    """A compiled chat template plus the special-token strings it refers to."""

    def __init__(self, source: str | None, *, bos: str = "", eos: str = "") -> None:
        self.is_fallback = not source
        self.source = source or CHATML
        self.note = "" if source else "the model has no chat template; using ChatML"
        self.bos = bos
        self.eos = eos
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: _dt.datetime.now().strftime(fmt)
        try:
            self._template = env.from_string(self.source)
        except TemplateError as e:
            raise EngineError(f"the model's chat template does not compile: {e}") from None

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        try:
            return self._template.render(
                messages=[m.as_dict() for m in messages],
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos,
                eos_token=self.eos,
                tools=None,
            )
        except TemplateError as e:
            raise EngineError(f"the model's chat template failed to render: {e}") from None

    def generation_prompt(self, messages: Sequence[Message]) -> str:
        """Text the template adds after `messages` to open the assistant's reply."""
        without = self.render(messages, add_generation_prompt=False)
        with_gp = self.render(messages, add_generation_prompt=True)
        if with_gp.startswith(without):
            return with_gp[len(without) :]
        return ""

    def closing(self, messages: Sequence[Message], reply: str) -> str | None:
        """Text the template renders after a reply's content to close the turn, or None when
        the template transforms the reply (prefix property broken there)."""
        opened = self.render(messages, add_generation_prompt=True) + reply
        closed = self.render([*messages, Message("assistant", reply)], add_generation_prompt=False)
        if closed.startswith(opened):
            return closed[len(opened) :]
        return None
