"""llmchat's model runtime: llama-cpp-python, chat templates, prefill, generation and KV capture/restore.

Nothing here imports Textual; the UI drives this package from a single thread worker.
"""

from llmchat.engine.errors import EngineError, ModelLoadError

__all__ = ["EngineError", "ModelLoadError"]
