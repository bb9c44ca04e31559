"""Snapshot files: one KV-state segment each, content-addressed, verified before use.

Layout of a segment file (little-endian):

    0   8   magic  b"LLMCSEG\\0"
    8   4   u32 format version (FORMAT_VERSION)
    12  4   u32 header length H
    16  8   u64 xxh3-64 of the header bytes
    24  H   header: JSON (id, parent, kind, fingerprint_id, fingerprint, start, end, tokens,
            payload_len, payload_xxh3_128, created)
    24+H    payload: the engine's seq-state blob for positions [start, end)

`kind` is "delta" (only the cells of [start, end), for attention-only models whose memory can
be cut by position) or "full" (the whole sequence state at `end`, for sliding-window,
recurrent and hybrid models, whose state cannot be cut). A segment's id is the chain hash
sha256(parent id || token ids), with the model fingerprint's id as the root's parent: equal
token prefixes under the same model and settings get equal ids, so branches and sessions
that share a prefix share its segments.

Writes go to a temp file in the same folder, are fsynced, then renamed into place: a reader
sees a whole file or none. Every read checks magic, version, header checksum, fingerprint,
id, range, tokens, length and payload checksum, and says which one failed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import mmap
import os
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import xxhash

from llmchat.sessions.models import pack_tokens

MAGIC = b"LLMCSEG\x00"
FORMAT_VERSION = 1
_FIXED = struct.Struct("<8sIIQ")


class SnapshotError(Exception):
    """A snapshot that cannot be trusted; the message is the reason, one line."""


class SnapshotMissing(SnapshotError):
    """The snapshot file is not there (deleted behind the index, evicted meanwhile): nothing
    to quarantine."""


@dataclass
class SegmentHeader:
    id: str
    parent: str
    kind: str
    fingerprint_id: str
    fingerprint: dict[str, Any]
    start: int
    end: int
    tokens: list[int]

    def to_json(self, payload_len: int, payload_hash: str) -> bytes:
        return orjson.dumps(
            {
                "id": self.id,
                "parent": self.parent,
                "kind": self.kind,
                "fingerprint_id": self.fingerprint_id,
                "fingerprint": self.fingerprint,
                "start": self.start,
                "end": self.end,
                "tokens": self.tokens,
                "payload_len": payload_len,
                "payload_xxh3_128": payload_hash,
                "created": time.time(),
            }
        )


def chain_id(parent_id: str, tokens: Sequence[int]) -> str:
    h = hashlib.sha256(parent_id.encode())
    h.update(pack_tokens(list(tokens)))
    return h.hexdigest()


def fingerprint_diff(expected: dict[str, Any], found: dict[str, Any]) -> str:
    diffs = [
        f"{k} {found.get(k)!r} (now {expected.get(k)!r})"
        for k in sorted(set(expected) | set(found))
        if expected.get(k) != found.get(k)
    ]
    return "made with another " + ", ".join(diffs[:3]) if diffs else "fingerprint id mismatch"


@dataclass
class ReadResult:
    header: dict[str, Any]
    payload: memoryview  # a writable, private view of the file's payload
    read_ms: float
    verify_ms: float


class SnapshotStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def rel_path(self, fingerprint_id: str, seg_id: str) -> str:
        return f"{fingerprint_id[:16]}/{seg_id[:2]}/{seg_id}.seg"

    def abs_path(self, rel: str) -> Path:
        return self.root / rel

    # ------------------------------------------------------------------ write
    def write(self, header: SegmentHeader, payload: bytes | bytearray) -> tuple[str, int]:
        """Atomically write a segment; returns (relative path, file size). Raises OSError
        (e.g. ENOSPC) with no partial file left behind."""
        rel = self.rel_path(header.fingerprint_id, header.id)
        path = self.abs_path(rel)
        # a file already there was left by a crash between rename and index row, or by a concurrent
        # writer of the same content: adopt it only if it is whole and is this segment
        whole = path.exists() and (
            self.verify(rel, header.fingerprint_id, seg_id=header.id, start=header.start, end=header.end)
            is None
        )
        if whole:
            return rel, path.stat().st_size
        path.parent.mkdir(parents=True, exist_ok=True)
        hjson = header.to_json(len(payload), xxhash.xxh3_128_hexdigest(payload))
        fixed = _FIXED.pack(MAGIC, FORMAT_VERSION, len(hjson), xxhash.xxh3_64_intdigest(hjson))
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, fixed)
            _write_all(fd, hjson)
            _write_all(fd, memoryview(payload))
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp, path)
            _fsync_dir(path.parent)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return rel, len(fixed) + len(hjson) + len(payload)

    # ------------------------------------------------------------------ read
    def read_header(self, path: Path) -> tuple[dict[str, Any], int]:
        """The parsed header and the payload's offset; SnapshotError if it is not trustworthy."""
        try:
            with path.open("rb") as f:
                fixed = f.read(_FIXED.size)
                hlen = _check_fixed(fixed)
                hjson = f.read(hlen)
        except FileNotFoundError:
            raise SnapshotMissing("snapshot file is missing") from None
        except OSError as e:
            raise SnapshotError(f"cannot read snapshot: {e.strerror or e}") from None
        return _parse_header(fixed, hjson), _FIXED.size + hlen

    def read(
        self,
        rel: str,
        *,
        seg_id: str,
        fingerprint_id: str,
        fingerprint: dict[str, Any],
        start: int,
        tokens: Sequence[int],
    ) -> ReadResult:
        """Read and verify a segment against what the caller expects it to hold.

        The file is mapped copy-on-write, not copied: the payload handed to the engine is a view
        of the page cache (llama.cpp copies it once, into the KV cache). Segment files are never
        modified in place (written to a temp name, renamed; removed by unlink), so a mapping
        cannot see them change."""
        path = self.abs_path(rel)
        t0 = time.perf_counter()
        try:
            with path.open("rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < _FIXED.size:
                    raise SnapshotError("truncated header")
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except FileNotFoundError:
            raise SnapshotMissing("snapshot file is missing") from None
        except OSError as e:
            raise SnapshotError(f"cannot read snapshot: {e.strerror or e}") from None
        fixed = mm[: _FIXED.size]
        hlen = _check_fixed(fixed)
        offset = _FIXED.size + hlen
        header = _parse_header(fixed, mm[_FIXED.size : offset])
        if header.get("fingerprint_id") != fingerprint_id:
            found = header.get("fingerprint")
            raise SnapshotError(fingerprint_diff(fingerprint, found if isinstance(found, dict) else {}))
        if header.get("id") != seg_id:
            raise SnapshotError("snapshot id does not match its index entry")
        if header.get("start") != start or header.get("end") != start + len(tokens):
            raise SnapshotError(
                f"snapshot covers {header.get('start')}..{header.get('end')}, expected {start}..{start + len(tokens)}"
            )
        if header.get("tokens") != list(tokens):
            raise SnapshotError("snapshot tokens differ from the conversation's")
        n = header["payload_len"]
        if size != offset + n:
            raise SnapshotError(
                f"snapshot file has {size - offset} payload bytes, header says {n} (truncated?)"
            )
        payload = memoryview(mm)[offset:]
        t1 = time.perf_counter()
        if xxhash.xxh3_128_hexdigest(payload) != header.get("payload_xxh3_128"):
            raise SnapshotError("payload checksum mismatch (corrupt)")
        t2 = time.perf_counter()
        return ReadResult(header, payload, (t1 - t0) * 1000, (t2 - t1) * 1000)

    def verify(
        self,
        rel: str,
        fingerprint_id: str | None = None,
        *,
        seg_id: str | None = None,
        start: int | None = None,
        end: int | None = None,
    ) -> str | None:
        """None if the file is whole and (optionally) is the segment its index entry names —
        this id, this fingerprint, this range — else the reason."""
        path = self.abs_path(rel)
        try:
            header, offset = self.read_header(path)
            if seg_id is not None and header.get("id") != seg_id:
                return "snapshot id does not match its index entry"
            if (start is not None and header.get("start") != start) or (
                end is not None and header.get("end") != end
            ):
                return f"snapshot covers {header.get('start')}..{header.get('end')}, its index entry says {start}..{end}"
            n = header["payload_len"]
            if path.stat().st_size != offset + n:
                return "truncated payload"
            h = xxhash.xxh3_128()
            with path.open("rb") as f:
                f.seek(offset)
                while chunk := f.read(8 << 20):
                    h.update(chunk)
            if h.hexdigest() != header.get("payload_xxh3_128"):
                return "payload checksum mismatch (corrupt)"
            if fingerprint_id is not None and header.get("fingerprint_id") != fingerprint_id:
                return (
                    f"made with another model or settings (fingerprint {str(header.get('fingerprint_id'))[:12]}, "
                    f"expected {fingerprint_id[:12]})"
                )
        except SnapshotError as e:
            return str(e)
        except OSError as e:
            return f"cannot read: {e.strerror or e}"
        return None

    def remove(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.abs_path(rel))

    def quarantine(self, rel: str) -> Path | None:
        src = self.abs_path(rel)
        if not src.exists():
            return None
        dst = self.root / "quarantine" / rel.replace("/", "_")
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        except OSError:
            # no room for the quarantine folder (disk full, a file in its place): a file that
            # cannot be trusted must still never be read again, so remove it instead
            with contextlib.suppress(OSError):
                os.unlink(src)
            return None
        return dst

    def files(self) -> list[str]:
        """Every segment file on disk (relative paths), excluding quarantine and temp files."""
        if not self.root.is_dir():
            return []
        out = []
        for p in self.root.glob("*/*/*.seg"):
            out.append(str(p.relative_to(self.root)))
        return out

    def temp_files(self) -> list[Path]:
        return list(self.root.glob("*/*/.*.tmp")) if self.root.is_dir() else []


def _check_fixed(fixed: bytes) -> int:
    """Validate the fixed part of a segment file; return the header length."""
    if len(fixed) < _FIXED.size:
        raise SnapshotError("truncated header")
    magic, version, hlen, _hsum = _FIXED.unpack(fixed)
    if magic != MAGIC:
        raise SnapshotError("not an llmchat snapshot (bad magic)")
    if version != FORMAT_VERSION:
        raise SnapshotError(f"snapshot format {version}, this llmchat reads {FORMAT_VERSION}")
    if hlen > 64 << 20:
        raise SnapshotError("corrupt header length")
    return int(hlen)


def _parse_header(fixed: bytes, hjson: bytes) -> dict[str, Any]:
    _magic, _version, hlen, hsum = _FIXED.unpack(fixed)
    if len(hjson) != hlen:
        raise SnapshotError("truncated header")
    if xxhash.xxh3_64_intdigest(hjson) != hsum:
        raise SnapshotError("header checksum mismatch (corrupt)")
    try:
        header = orjson.loads(hjson)
    except orjson.JSONDecodeError:
        raise SnapshotError("header is not valid JSON (corrupt)") from None
    # well-formed JSON with a valid checksum can still be junk (an edit, a bug elsewhere):
    # every field a reader relies on must have its type, or the file is refused
    if not isinstance(header, dict):
        raise SnapshotError("header is not an object (corrupt)")
    for key, kind in (
        ("id", str),
        ("fingerprint_id", str),
        ("start", int),
        ("end", int),
        ("payload_len", int),
        ("payload_xxh3_128", str),
        ("tokens", list),
    ):
        value = header.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SnapshotError(f"header field {key!r} is absent or malformed (corrupt)")
    if header["payload_len"] < 0:
        raise SnapshotError("header field 'payload_len' is negative (corrupt)")
    return header


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
