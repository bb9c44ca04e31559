"""Errors the engine raises. Each carries a one-line, user-facing message."""


class EngineError(Exception):
    """A runtime failure of the model engine (decode failed, context full, ...)."""


class ModelLoadError(EngineError):
    """The model file is missing, not GGUF, or llama.cpp refused to load it."""


class ContextFullError(EngineError):
    """The prompt does not fit in the context window."""


class SnapshotRefused(EngineError):
    """A snapshot could not be trusted or could not be applied; the caller re-prefills."""
