"""The screens and dialogs of the llmchat TUI."""
