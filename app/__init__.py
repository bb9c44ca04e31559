"""llmchat's user-facing layer: the command line, the Textual app and its screens."""
