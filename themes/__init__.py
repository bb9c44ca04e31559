"""llmchat's look: Textual themes (palette.py) and the stylesheet llmchat.tcss."""
