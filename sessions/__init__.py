"""Conversation trees, their SQLite store and the snapshot store. No UI, no Textual."""
