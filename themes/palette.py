"""llmchat's two Textual themes and the path of its stylesheet (themes/llmchat.tcss)."""

from __future__ import annotations

from pathlib import Path

from textual.theme import Theme

STYLESHEET = Path(__file__).with_name("llmchat.tcss")

LLMCHAT_DARK = Theme(
    name="llmchat-dark",
    primary="#5FAFD7",
    secondary="#87AF87",
    accent="#D7AF5F",
    foreground="#E4E4E4",
    background="#161A1F",
    surface="#1E242B",
    panel="#26303A",
    success="#87D787",
    warning="#FFAF5F",
    error="#FF6B6B",
    dark=True,
    variables={"user-message": "#24313D", "assistant-message": "#1E242B"},
)

LLMCHAT_LIGHT = Theme(
    name="llmchat-light",
    primary="#1F6FA8",
    secondary="#4F7F4F",
    accent="#9A6A00",
    foreground="#1C1C1C",
    background="#F7F7F4",
    surface="#FFFFFF",
    panel="#E6EAEE",
    success="#2E7D32",
    warning="#B26A00",
    error="#C62828",
    dark=False,
    variables={"user-message": "#E3EEF7", "assistant-message": "#FFFFFF"},
)

THEMES = (LLMCHAT_DARK, LLMCHAT_LIGHT)
DEFAULT_THEME = LLMCHAT_DARK.name
