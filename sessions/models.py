"""Domain objects of the session store, and the one place rows become them."""

from __future__ import annotations

import sqlite3
import sys
from array import array
from dataclasses import dataclass, field
from typing import Any

import orjson


def pack_tokens(tokens: list[int] | tuple[int, ...]) -> bytes:
    a = array("i", tokens)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def unpack_tokens(data: bytes | None) -> list[int]:
    if not data:
        return []
    a = array("i")
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tolist()


@dataclass
class Session:
    id: int
    title: str
    title_custom: bool
    created: float
    updated: float
    model: str
    system_prompt: str
    params: dict[str, Any]
    active_leaf: int | None
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class Node:
    id: int
    session_id: int
    parent_id: int | None
    base_id: int | None  # the ancestor whose whole context precedes this node's tokens (normally the parent)
    role: str  # system | user | assistant
    content: str
    piece: str  # the rendered text this node's tokens stand for
    tokens: list[int]
    ctx_len: int  # tokens in the context up to and including this node
    status: str  # done | stopped (user stopped the reply) | partial
    meta: dict[str, Any]
    created: float

    @property
    def ctx_start(self) -> int:
        return self.ctx_len - len(self.tokens)


@dataclass
class Segment:
    id: str
    fingerprint_id: str
    kind: str  # delta | full
    parent_id: str
    start: int
    end: int
    bytes: int
    file: str
    created: float
    last_used: float
    uses: int


def _json(text: str | None) -> dict[str, Any]:
    return orjson.loads(text) if text else {}


def session_from_row(r: sqlite3.Row) -> Session:
    return Session(
        id=r["id"],
        title=r["title"],
        title_custom=bool(r["title_custom"]),
        created=r["created"],
        updated=r["updated"],
        model=r["model"] or "",
        system_prompt=r["system_prompt"] or "",
        params=_json(r["params"]),
        active_leaf=r["active_leaf"],
        stats=_json(r["stats"]),
    )


def node_from_row(r: sqlite3.Row) -> Node:
    return Node(
        id=r["id"],
        session_id=r["session_id"],
        parent_id=r["parent_id"],
        base_id=r["base_id"],
        role=r["role"],
        content=r["content"],
        piece=r["piece"] or "",
        tokens=unpack_tokens(r["tokens"]),
        ctx_len=r["ctx_len"],
        status=r["status"],
        meta=_json(r["meta"]),
        created=r["created"],
    )


def segment_from_row(r: sqlite3.Row) -> Segment:
    return Segment(
        id=r["id"],
        fingerprint_id=r["fingerprint_id"],
        kind=r["kind"],
        parent_id=r["parent_id"],
        start=r["start"],
        end=r["end"],
        bytes=r["bytes"],
        file=r["file"],
        created=r["created"],
        last_used=r["last_used"],
        uses=r["uses"],
    )


def dumps(d: dict[str, Any]) -> str:
    return orjson.dumps(d).decode()
