"""The TUI's remembered preferences (the theme), in locations.config_path() as JSON.

Read when the app starts, written when a preference changes; keys other tools put in the
same file are kept.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from llmchat.sessions import locations


def load_config(path: Path | None = None) -> dict[str, Any]:
    path = path or locations.config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_config(updates: dict[str, Any], path: Path | None = None) -> bool:
    """Merge `updates` into the config file. False (and nothing raised) if it cannot be written."""
    path = path or locations.config_path()
    data = load_config(path)
    data.update(updates)
    tmp = path.with_suffix(".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True
