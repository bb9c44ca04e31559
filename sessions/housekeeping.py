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


# A segment file no index row names, or a temp file, may belong to a write in progress in
# another process (renamed into place, its index row not yet committed): doctor leaves such
# files alone until they are this old, or until the writer (its pid is in a temp file's name)
# is gone.
ORPHAN_GRACE_S = 300.0


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
    recent_unindexed: int = 0  # orphan or temp files young enough to be a write in progress (kept)
    dangling_links: int = 0  # node -> segment links naming no segment (removed)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, not ours
    return True


def _age(path: Any) -> float:
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return 0.0


def _temp_writer_gone(path: Any) -> bool:
    """A temp file is named .{segment}.{pid}.tmp: its write is over if that pid is gone."""
    parts = os.path.basename(str(path)).split(".")
    try:
        pid = int(parts[-2])
    except (IndexError, ValueError):
        return True
    return pid != os.getpid() and not _pid_alive(pid)


def doctor(
    store: Store,
    snaps: SnapshotStore,
    fingerprint_id: str | None = None,
    *,
    repair: bool = True,
    grace_s: float = ORPHAN_GRACE_S,
) -> DoctorReport:
    """Check the database and every indexed snapshot file (whole, checksums, and the segment its
    index row says: id, range, fingerprint); quarantine damage, drop index rows of missing
    files, remove leftovers of interrupted writes. Every finding is written to snapshot_log."""
    rep = DoctorReport()
    rep.integrity = str(store.db.execute("PRAGMA integrity_check").fetchone()[0])
    for seg in store.segments():
        rep.checked += 1
        if not snaps.abs_path(seg.file).exists():
            reason: str | None = "snapshot file is missing"
        else:
            reason = snaps.verify(seg.file, seg.fingerprint_id, seg_id=seg.id, start=seg.start, end=seg.end)
        if reason is not None and "missing" in reason:
            if store.segment(seg.id) is None:  # dropped meanwhile by another process (gc, a refusal)
                rep.checked -= 1
                continue
            rep.missing += 1
            if repair:
                store.drop_segment(seg.id)
                store.log(
                    "verify",
                    "missing",
                    segment_id=seg.id,
                    nbytes=seg.bytes,
                    detail="file deleted behind the index; its turns will be re-prefilled",
                )
            continue
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
    dangling = store.db.execute(
        "SELECT COUNT(*) FROM node_segments WHERE segment_id NOT IN (SELECT id FROM segments)"
    ).fetchone()[0]
    rep.dangling_links = int(dangling)
    if dangling and repair:
        with store.tx() as db:
            db.execute("DELETE FROM node_segments WHERE segment_id NOT IN (SELECT id FROM segments)")
    for rel in snaps.files():
        # asked again per file: an index row committed after the listing above is not an orphan
        if store.db.execute("SELECT 1 FROM segments WHERE file = ?", (rel,)).fetchone() is not None:
            continue
        if _age(snaps.abs_path(rel)) < grace_s:
            rep.recent_unindexed += 1
            continue
        rep.orphans += 1
        if repair:
            # a file written just before a crash, before its index row: it is whole (renamed
            # into place only after fsync) but unknown; drop it, it is recomputable.
            snaps.remove(rel)
            store.log("verify", "orphan", detail=f"removed {rel}: no index entry")
    for tmp in snaps.temp_files():
        if not _temp_writer_gone(tmp) and _age(tmp) < grace_s:
            rep.recent_unindexed += 1
            continue
        rep.temp_files += 1
        if repair:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    store.log(
        "verify",
        "ok" if not rep.damaged and not rep.missing else "repaired",
        nbytes=rep.total_bytes,
        detail=f"doctor: {rep.checked} checked, {rep.ok} ok, {rep.other_fingerprint} other fingerprint, "
        f"{len(rep.damaged)} damaged, {rep.missing} missing, {rep.orphans} orphan(s), {rep.temp_files} temp file(s)",
    )
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
    """Remove segments no node uses any more (e.g. after a session was deleted).

    Each segment is re-checked and dropped inside one write transaction, so a segment another
    process links at the same moment (its row and its link are committed together) is never
    taken for unreferenced."""
    n = 0
    candidates = store.db.execute(
        "SELECT id FROM segments WHERE id NOT IN (SELECT segment_id FROM node_segments)"
    ).fetchall()
    for (seg_id,) in candidates:
        with store.tx() as db:
            row = db.execute(
                "SELECT file, bytes FROM segments WHERE id = ? AND id NOT IN (SELECT segment_id FROM node_segments)",
                (seg_id,),
            ).fetchone()
            if row is None:
                continue
            db.execute("DELETE FROM segments WHERE id = ?", (seg_id,))
        snaps.remove(row[0])
        store.log("evict", "ok", segment_id=seg_id, nbytes=row[1], detail="unreferenced")
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
        store.log(
            "evict",
            "ok",
            segment_id=seg.id,
            nbytes=seg.bytes,
            detail=f"over budget ({refs.get(seg.id, 0)} node(s), last used {time.ctime(seg.last_used)})",
        )
        total -= seg.bytes
        freed += seg.bytes
        evicted += 1
    return GcReport(
        budget=budget,
        before_bytes=before,
        after_bytes=total,
        evicted=evicted,
        freed_bytes=freed,
        unreferenced=unref,
    )
