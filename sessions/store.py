"""The SQLite session store: sessions, message trees, the snapshot index and its audit log.

WAL mode and a busy timeout let several llmchat processes share one data dir; every change
that touches more than one row runs in one transaction (BEGIN IMMEDIATE, so writers queue
instead of failing half-way). The schema is versioned by PRAGMA user_version; MIGRATIONS
holds the ordered upgrade steps.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from llmchat.sessions.models import (
    Node,
    Segment,
    Session,
    dumps,
    node_from_row,
    pack_tokens,
    segment_from_row,
    session_from_row,
)


class StoreError(Exception):
    """A one-line, user-facing store failure (not writable, newer schema, ...)."""


MIGRATIONS: list[tuple[str, ...]] = [
    # 1: sessions, message tree, snapshot index, audit log, settings, full-text search
    (
        "CREATE TABLE sessions ( id INTEGER PRIMARY KEY, title TEXT NOT NULL DEFAULT '', title_custom INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, updated REAL NOT NULL, model TEXT NOT NULL DEFAULT '', system_prompt TEXT NOT NULL DEFAULT '', params TEXT NOT NULL DEFAULT '{}', active_leaf INTEGER, stats TEXT NOT NULL DEFAULT '{}' )",
        "CREATE TABLE nodes ( id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, parent_id INTEGER REFERENCES nodes(id) ON DELETE CASCADE, base_id INTEGER, role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')), content TEXT NOT NULL, piece TEXT NOT NULL DEFAULT '', tokens BLOB NOT NULL, ctx_len INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'done', meta TEXT NOT NULL DEFAULT '{}', created REAL NOT NULL )",
        "CREATE INDEX nodes_session ON nodes(session_id)",
        "CREATE INDEX nodes_parent ON nodes(parent_id)",
        "CREATE TABLE segments ( id TEXT PRIMARY KEY, fingerprint_id TEXT NOT NULL, kind TEXT NOT NULL, parent_id TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, bytes INTEGER NOT NULL, file TEXT NOT NULL, created REAL NOT NULL, last_used REAL NOT NULL, uses INTEGER NOT NULL DEFAULT 0 )",
        "CREATE TABLE node_segments ( node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE, fingerprint_id TEXT NOT NULL, segment_id TEXT NOT NULL, PRIMARY KEY (node_id, fingerprint_id) )",
        "CREATE INDEX node_segments_segment ON node_segments(segment_id)",
        "CREATE TABLE snapshot_log ( id INTEGER PRIMARY KEY, ts REAL NOT NULL, op TEXT NOT NULL, session_id INTEGER, node_id INTEGER, segment_id TEXT, bytes INTEGER, ms REAL, outcome TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '' )",
        "CREATE INDEX snapshot_log_session ON snapshot_log(session_id)",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE VIRTUAL TABLE nodes_fts USING fts5(content, content='nodes', content_rowid='id')",
        "CREATE TRIGGER nodes_ai AFTER INSERT ON nodes BEGIN INSERT INTO nodes_fts(rowid, content) VALUES (new.id, new.content); END",
        "CREATE TRIGGER nodes_ad AFTER DELETE ON nodes BEGIN INSERT INTO nodes_fts(nodes_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
        "CREATE TRIGGER nodes_au AFTER UPDATE OF content ON nodes BEGIN INSERT INTO nodes_fts(nodes_fts, rowid, content) VALUES ('delete', old.id, old.content); INSERT INTO nodes_fts(rowid, content) VALUES (new.id, new.content); END",
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)


class Store:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(
                str(self.path), timeout=30, isolation_level=None, check_same_thread=False
            )
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA busy_timeout = 30000")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open the session database {self.path}: {e}") from None
        except OSError as e:
            raise StoreError(f"cannot create the data dir {self.path.parent}: {e.strerror or e}") from None

    # ------------------------------------------------------------------ plumbing
    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the database {self.path} has schema {version}, newer than this llmchat knows ({SCHEMA_VERSION})"
            )
        while version < SCHEMA_VERSION:
            with self.tx():
                current = self.db.execute("PRAGMA user_version").fetchone()[0]
                if current != version:  # another process migrated meanwhile
                    version = current
                    continue
                for stmt in MIGRATIONS[version]:
                    self.db.execute(stmt)
                version += 1
                self.db.execute(f"PRAGMA user_version = {version}")

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. Re-entrant within a thread; another thread sharing this
        connection (the UI reading while the engine worker writes) waits for it instead of
        joining it."""
        with self._lock:
            if self.db.in_transaction:
                yield self.db
                return
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            else:
                self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ sessions
    def create_session(
        self, *, model: str, system_prompt: str = "", params: dict[str, Any] | None = None, title: str = ""
    ) -> Session:
        now = time.time()
        with self.tx() as db:
            cur = db.execute(
                "INSERT INTO sessions (title, title_custom, created, updated, model, system_prompt, params) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (title, 1 if title else 0, now, now, model, system_prompt, dumps(params or {})),
            )
            sid = int(cur.lastrowid or 0)
        return self.session(sid)

    def session(self, sid: int) -> Session:
        r = self.db.execute("SELECT * FROM sessions WHERE id = ?", (sid,)).fetchone()
        if r is None:
            raise KeyError(sid)
        return session_from_row(r)

    def sessions(self, limit: int = 1000) -> list[Session]:
        rows = self.db.execute("SELECT * FROM sessions ORDER BY updated DESC, id DESC LIMIT ?", (limit,))
        return [session_from_row(r) for r in rows]

    def last_session(self) -> Session | None:
        r = self.db.execute("SELECT * FROM sessions ORDER BY updated DESC, id DESC LIMIT 1").fetchone()
        return session_from_row(r) if r else None

    def update_session(self, sid: int, **fields: Any) -> None:
        allowed = {"title", "title_custom", "model", "system_prompt", "params", "active_leaf", "stats"}
        sets, vals = [], []
        for k, v in fields.items():
            if k not in allowed:
                raise ValueError(k)
            sets.append(f"{k} = ?")
            vals.append(dumps(v) if k in ("params", "stats") else v)
        sets.append("updated = ?")
        vals.append(time.time())
        with self.tx() as db:
            db.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE id = ?", (*vals, sid))

    def rename_session(self, sid: int, title: str) -> None:
        self.update_session(sid, title=title, title_custom=1)

    def delete_session(self, sid: int) -> None:
        with self.tx() as db:
            db.execute(
                "DELETE FROM node_segments WHERE node_id IN (SELECT id FROM nodes WHERE session_id = ?)",
                (sid,),
            )
            db.execute("DELETE FROM nodes WHERE session_id = ?", (sid,))
            db.execute("DELETE FROM sessions WHERE id = ?", (sid,))

    def session_summary(self, sid: int) -> dict[str, Any]:
        r = self.db.execute(
            "SELECT COUNT(*) AS n, SUM(role = 'user') AS turns, COALESCE(MAX(ctx_len), 0) AS tokens "
            "FROM nodes WHERE session_id = ?",
            (sid,),
        ).fetchone()
        b = self.db.execute(
            "SELECT COALESCE(SUM(s.bytes), 0) FROM segments s WHERE s.id IN ("
            "SELECT ns.segment_id FROM node_segments ns JOIN nodes n ON n.id = ns.node_id WHERE n.session_id = ?)",
            (sid,),
        ).fetchone()[0]
        return {"messages": r["n"], "turns": r["turns"] or 0, "tokens": r["tokens"], "snapshot_bytes": b}

    def search(self, query: str, limit: int = 50) -> list[tuple[Session, Node]]:
        """Full-text search over message contents; also matches session titles."""
        terms = " ".join('"' + t.replace('"', '""') + '"' for t in query.split())
        if not terms:
            return []
        out: list[tuple[Session, Node]] = []
        rows = self.db.execute(
            "SELECT n.* FROM nodes_fts f JOIN nodes n ON n.id = f.rowid WHERE nodes_fts MATCH ? "
            "ORDER BY rank LIMIT ?",
            (terms, limit),
        ).fetchall()
        seen: set[int] = set()
        for r in rows:
            node = node_from_row(r)
            out.append((self.session(node.session_id), node))
            seen.add(node.session_id)
        like = f"%{query}%"
        for r in self.db.execute("SELECT * FROM sessions WHERE title LIKE ? LIMIT ?", (like, limit)):
            s = session_from_row(r)
            if s.id not in seen:
                root = self.db.execute(
                    "SELECT * FROM nodes WHERE session_id = ? ORDER BY id LIMIT 1", (s.id,)
                ).fetchone()
                if root is not None:
                    out.append((s, node_from_row(root)))
        return out

    # ------------------------------------------------------------------ nodes
    def add_node(
        self,
        *,
        session_id: int,
        parent_id: int | None,
        base_id: int | None,
        role: str,
        content: str,
        piece: str,
        tokens: list[int],
        ctx_len: int,
        status: str = "done",
        meta: dict[str, Any] | None = None,
        activate: bool = True,
        title: str | None = None,
    ) -> Node:
        now = time.time()
        with self.tx() as db:
            cur = db.execute(
                "INSERT INTO nodes (session_id, parent_id, base_id, role, content, piece, tokens, ctx_len, status, "
                "meta, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    parent_id,
                    base_id,
                    role,
                    content,
                    piece,
                    pack_tokens(tokens),
                    ctx_len,
                    status,
                    dumps(meta or {}),
                    now,
                ),
            )
            nid = int(cur.lastrowid or 0)
            if activate:
                db.execute(
                    "UPDATE sessions SET active_leaf = ?, updated = ? WHERE id = ?", (nid, now, session_id)
                )
            if title is not None:
                db.execute(
                    "UPDATE sessions SET title = ? WHERE id = ? AND title_custom = 0 AND title = ''",
                    (title, session_id),
                )
        return self.node(nid)

    def node(self, nid: int) -> Node:
        r = self.db.execute("SELECT * FROM nodes WHERE id = ?", (nid,)).fetchone()
        if r is None:
            raise KeyError(nid)
        return node_from_row(r)

    def update_node_meta(self, nid: int, meta: dict[str, Any]) -> None:
        with self.tx() as db:
            db.execute("UPDATE nodes SET meta = ? WHERE id = ?", (dumps(meta), nid))

    def nodes(self, session_id: int) -> list[Node]:
        rows = self.db.execute("SELECT * FROM nodes WHERE session_id = ? ORDER BY id", (session_id,))
        return [node_from_row(r) for r in rows]

    def children(self, nid: int | None, session_id: int) -> list[Node]:
        if nid is None:
            rows = self.db.execute(
                "SELECT * FROM nodes WHERE session_id = ? AND parent_id IS NULL ORDER BY id", (session_id,)
            )
        else:
            rows = self.db.execute("SELECT * FROM nodes WHERE parent_id = ? ORDER BY id", (nid,))
        return [node_from_row(r) for r in rows]

    def _ancestry(self, nid: int, link: str) -> list[Node]:
        """Root..nid following `link` (parent_id or base_id), in one query."""
        rows = self.db.execute(
            f"WITH RECURSIVE p(id, depth) AS (SELECT ?, 0 UNION ALL "
            f"SELECT n.{link}, p.depth + 1 FROM nodes n JOIN p ON n.id = p.id WHERE n.{link} IS NOT NULL) "
            "SELECT nodes.* FROM p JOIN nodes ON nodes.id = p.id ORDER BY p.depth DESC",
            (nid,),
        ).fetchall()
        return [node_from_row(r) for r in rows]

    def path_to(self, nid: int) -> list[Node]:
        """Root..nid along parent links: the messages of a branch."""
        return self._ancestry(nid, "parent_id")

    def chain_to(self, nid: int) -> list[Node]:
        """Root..nid along base links: the nodes whose tokens make up nid's context."""
        return self._ancestry(nid, "base_id")

    def deepest_leaf(self, nid: int) -> int:
        """Follow the newest child down from nid."""
        while True:
            r = self.db.execute(
                "SELECT id FROM nodes WHERE parent_id = ? ORDER BY id DESC LIMIT 1", (nid,)
            ).fetchone()
            if r is None:
                return nid
            nid = r[0]

    # ------------------------------------------------------------------ snapshot index
    def segment(self, seg_id: str) -> Segment | None:
        r = self.db.execute("SELECT * FROM segments WHERE id = ?", (seg_id,)).fetchone()
        return segment_from_row(r) if r else None

    def segments(self) -> list[Segment]:
        return [segment_from_row(r) for r in self.db.execute("SELECT * FROM segments ORDER BY last_used")]

    def add_segment(self, seg: Segment, node_id: int | None) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO segments (id, fingerprint_id, kind, parent_id, start, end, bytes, file, created, "
                "last_used, uses) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    seg.id,
                    seg.fingerprint_id,
                    seg.kind,
                    seg.parent_id,
                    seg.start,
                    seg.end,
                    seg.bytes,
                    seg.file,
                    seg.created,
                    seg.last_used,
                    seg.uses,
                ),
            )
            if node_id is not None:
                db.execute(
                    "INSERT OR REPLACE INTO node_segments (node_id, fingerprint_id, segment_id) VALUES (?, ?, ?)",
                    (node_id, seg.fingerprint_id, seg.id),
                )

    def segment_for_node(self, node_id: int, fingerprint_id: str) -> Segment | None:
        r = self.db.execute(
            "SELECT s.* FROM node_segments ns JOIN segments s ON s.id = ns.segment_id "
            "WHERE ns.node_id = ? AND ns.fingerprint_id = ?",
            (node_id, fingerprint_id),
        ).fetchone()
        return segment_from_row(r) if r else None

    def segment_links(self, node_id: int) -> list[tuple[str, str]]:
        """(fingerprint id, segment id) of every snapshot a node has."""
        rows = self.db.execute(
            "SELECT fingerprint_id, segment_id FROM node_segments WHERE node_id = ?", (node_id,)
        )
        return [(r[0], r[1]) for r in rows]

    def segments_bytes(self) -> int:
        return int(self.db.execute("SELECT COALESCE(SUM(bytes), 0) FROM segments").fetchone()[0])

    def link_segment(self, node_id: int, fingerprint_id: str, seg_id: str) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO node_segments (node_id, fingerprint_id, segment_id) VALUES (?, ?, ?)",
                (node_id, fingerprint_id, seg_id),
            )

    def touch_segments(self, ids: list[str]) -> None:
        if not ids:
            return
        now = time.time()
        with self.tx() as db:
            db.executemany(
                "UPDATE segments SET last_used = ?, uses = uses + 1 WHERE id = ?", [(now, i) for i in ids]
            )

    def drop_segment(self, seg_id: str) -> None:
        with self.tx() as db:
            db.execute("DELETE FROM node_segments WHERE segment_id = ?", (seg_id,))
            db.execute("DELETE FROM segments WHERE id = ?", (seg_id,))

    def segment_refs(self) -> dict[str, int]:
        """How many nodes (across all sessions) use each segment."""
        return {
            r[0]: r[1]
            for r in self.db.execute("SELECT segment_id, COUNT(*) FROM node_segments GROUP BY segment_id")
        }

    def get_meta(self, key: str) -> str | None:
        r = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return r[0] if r else None

    def set_meta(self, key: str, value: str) -> None:
        with self.tx() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def log(
        self,
        op: str,
        outcome: str,
        *,
        session_id: int | None = None,
        node_id: int | None = None,
        segment_id: str | None = None,
        nbytes: int | None = None,
        ms: float | None = None,
        detail: str = "",
    ) -> None:
        try:
            with self.tx() as db:
                db.execute(
                    "INSERT INTO snapshot_log (ts, op, session_id, node_id, segment_id, bytes, ms, outcome, detail) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (time.time(), op, session_id, node_id, segment_id, nbytes, ms, outcome, detail),
                )
        except sqlite3.OperationalError:
            pass  # the audit log never stops a chat (e.g. disk full)

    def recent_log(self, limit: int = 50, session_id: int | None = None) -> list[dict[str, Any]]:
        if session_id is None:
            rows = self.db.execute("SELECT * FROM snapshot_log ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = self.db.execute(
                "SELECT * FROM snapshot_log WHERE session_id = ? ORDER BY id DESC LIMIT ?",
                (session_id, limit),
            )
        return [dict(r) for r in rows]

    def log_summary(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for r in self.db.execute("SELECT op, outcome, COUNT(*) FROM snapshot_log GROUP BY op, outcome"):
            out.setdefault(r[0], {})[r[1]] = r[2]
        return out
