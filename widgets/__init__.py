"""Reusable llmchat widgets: message views, the composer, the status bar."""
