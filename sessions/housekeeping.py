"""Snapshot housekeeping: verification (doctor), the disk budget (gc), orphan clean-up.

Messages are never touched here: only snapshot segments, which can always be recomputed by
re-prefilling.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

from llmchat.sessions.snapshots import SnapshotStore
from llmchat.sessions.store import Store

DEFAULT_BUDGET = 2 << 30  # 2 GiB of snapshots before the least recently used are evicted


@dataclass
class DoctorReport:
    checked: int = 0
    ok: int = 0
    damaged: list[dict[str, Any]] = field(default_factory=list)  # quarantined
    other_fingerprint: int = 0  # whole, but made with another model or settings
    missing: int = 0  # index rows whose file is gone (rows dropped)
    orphans: int = 0  # files no index row names (removed)
    temp_files: int = 0  # leftovers of interrupted writes (removed)
    total_bytes: int = 0
    integrity: str = "ok"

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def doctor(store: Store, snaps: SnapshotStore, fingerprint_id: str | None = None, *, repair: bool = True) -> DoctorReport:
    rep = DoctorReport()
    rep.integrity = str(store.db.execute("PRAGMA integrity_check").fetchone()[0])
    known = set()
    for seg in store.segments():
        rep.checked += 1
        known.add(seg.file)
        if not snaps.abs_path(seg.file).exists():
            rep.missing += 1
            if repair:
                store.drop_segment(seg.id)
                store.log("verify", "missing", segment_id=seg.id, detail="file deleted behind the index")
            continue
        reason = snaps.verify(seg.file)
        if reason is None and fingerprint_id is not None and seg.fingerprint_id != fingerprint_id:
            rep.other_fingerprint += 1
            rep.total_bytes += seg.bytes
            continue
        if reason is None:
            rep.ok += 1
            rep.total_bytes += seg.bytes
            continue
        rep.damaged.append({"segment": seg.id, "file": seg.file, "reason": reason})
        if repair:
            snaps.quarantine(seg.file)
            store.drop_segment(seg.id)
            store.log("verify", "quarantined", segment_id=seg.id, nbytes=seg.bytes, detail=reason)
    for rel in snaps.files():
        if rel not in known:
            rep.orphans += 1
            if repair:
                # a file written just before a crash, before its index row: it is whole (renamed
                # into place only after fsync) but unknown; drop it, it is recomputable.
                snaps.remove(rel)
    for tmp in snaps.temp_files():
        rep.temp_files += 1
        if repair:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return rep


@dataclass
class GcReport:
    budget: int
    before_bytes: int
    after_bytes: int
    evicted: int
    freed_bytes: int
    unreferenced: int

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def collect_unreferenced(store: Store, snaps: SnapshotStore) -> int:
    """Remove segments no node uses any more (e.g. after a session was deleted)."""
    refs = store.segment_refs()
    n = 0
    for seg in store.segments():
        if refs.get(seg.id, 0) == 0:
            store.drop_segment(seg.id)
            snaps.remove(seg.file)
            store.log("evict", "ok", segment_id=seg.id, nbytes=seg.bytes, detail="unreferenced")
            n += 1
    return n


def gc(store: Store, snaps: SnapshotStore, budget: int = DEFAULT_BUDGET) -> GcReport:
    """Keep snapshots within `budget` bytes: evict least recently used first; among equally
    recent ones the deepest (latest positions) first; segments shared by several nodes last."""
    unref = collect_unreferenced(store, snaps)
    segs = store.segments()
    total = sum(s.bytes for s in segs)
    before = total
    refs = store.segment_refs()
    order = sorted(segs, key=lambda s: (refs.get(s.id, 0) > 1, s.last_used, -s.start))
    evicted = freed = 0
    for seg in order:
        if total <= budget:
            break
        store.drop_segment(seg.id)
        snaps.remove(seg.file)
        store.log("evict", "ok", segment_id=seg.id, nbytes=seg.bytes,
                  detail=f"over budget ({refs.get(seg.id, 0)} node(s), last used {time.ctime(seg.last_used)})")
        total -= seg.bytes
        freed += seg.bytes
        evicted += 1
    return GcReport(budget=budget, before_bytes=before, after_bytes=total, evicted=evicted, freed_bytes=freed,
                    unreferenced=unref)
