"""Building the core objects (store, snapshots, engine, service) for the CLI and the TUI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmchat.sessions import locations
from llmchat.sessions.snapshots import SnapshotStore
from llmchat.sessions.store import Store, StoreError


@dataclass
class Core:
    store: Store
    snaps: SnapshotStore


def open_core() -> Core:
    """Open the data dir (created on first use). One-line StoreError when it is not usable."""
    try:
        locations.ensure()
    except OSError as e:
        raise StoreError(f"cannot create the data dir {locations.data_dir()}: {e.strerror or e}") from None
    d = locations.data_dir()
    store = Store(locations.database_path())
    probe = d / f".write-test-{id(store)}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise StoreError(f"the data dir {d} is not writable: {e.strerror or e}") from None
    return Core(store=store, snaps=SnapshotStore(locations.snapshots_dir()))


def load_engine(model: str | Path | None, **options: Any) -> Any:
    from llmchat.engine.modelfile import default_model_path
    from llmchat.engine.runtime import Engine, EngineConfig

    path = Path(model).expanduser() if model else default_model_path()
    options.setdefault("identity_cache", locations.data_dir() / "model-ids.json")
    return Engine(EngineConfig(model_path=path, **options))


def make_service(core: Core, model: str | Path | None, *, use_snapshots: bool = True, **options: Any) -> Any:
    from llmchat.sessions.chat import ChatService

    return ChatService(core.store, core.snaps, load_engine(model, **options), use_snapshots=use_snapshots)
