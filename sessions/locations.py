"""Where llmchat keeps its data: one place, platformdirs-based, overridable by LLMCHAT_HOME.

Nothing here touches the disk at import time; `ensure()` creates folders when asked.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_path

ENV_HOME = "LLMCHAT_HOME"


def data_dir() -> Path:
    override = os.environ.get(ENV_HOME)
    if override:
        return Path(override).expanduser()
    return user_data_path("llmchat", appauthor=False)


def database_path() -> Path:
    return data_dir() / "llmchat.db"


def snapshots_dir() -> Path:
    return data_dir() / "snapshots"


def config_path() -> Path:
    return data_dir() / "config.json"


def ensure() -> Path:
    """Create the data dir (and its snapshot folder); return the data dir."""
    d = data_dir()
    snapshots_dir().mkdir(parents=True, exist_ok=True)
    return d
