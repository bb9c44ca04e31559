"""`llmchat bench`: re-prefill against restore from llmchat's snapshots, same context, one run.

For each length N: a context of N tokens is prefilled (timed: the re-prefill cost), captured
as turn-sized delta segments written through the real snapshot store (timed: capture), then
restored from those files into an empty context (timed: read + verify + apply) and checked
to be byte-identical to the live state it was captured from. The raw single-blob path
(llama_state_seq_get_data/set_data of the whole sequence through a file) is timed beside it.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmchat.sessions.snapshots import SegmentHeader, chain_id

SEGMENT = 256  # tokens per segment: the size of a typical chat turn

_TEXT = (
    "The history of the lighthouse keeper begins on a small island where the wind never rests. "
    "Every evening she climbed the spiral stairs, trimmed the wick, polished the great lens and "
    "wrote the weather in a leather book: the direction of the wind, the height of the waves, the "
    "ships that passed and the birds that sheltered on the gallery. Years later the book became a "
    "record of a changing sea, read by scientists who had never seen the island. "
)


def bench_tokens(eng: Any, n: int) -> list[int]:
    """n tokens of natural text as the model's tokenizer cuts it (a chat-formatted prefix)."""
    text = "<|im_start|>user\n"
    toks: list[int] = []
    i = 0
    while len(toks) < n:
        text += f"Part {i}. " + _TEXT
        i += 1
        if len(text) > 4 * n:
            toks = eng.tokenize(text)
    return eng.tokenize(text)[:n]


def _raw_roundtrip(eng: Any, path: Path) -> float:
    """The raw single-blob baseline: whole-sequence get_data → file; time read + set_data."""
    ll = eng._ll
    path.write_bytes(eng._get_seq(0))
    n = len(eng.tokens)
    eng.clear()
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(os.fstat(f.fileno()).st_size)
        f.readinto(buf)
    arr = (ctypes.c_uint8 * len(buf)).from_buffer(buf)
    ll.llama_state_seq_set_data(eng._ctx, arr, len(buf), 0)
    load_ms = (time.perf_counter() - t0) * 1000
    del arr
    if int(ll.llama_memory_seq_pos_max(eng._mem, 0)) != n - 1:
        raise RuntimeError("the raw single-blob baseline did not restore")
    eng.clear()
    return load_ms


def seq_state(eng: Any) -> bytes:
    return bytes(eng._get_seq(0))[8:]  # as `llmchat bench`: skip the leading magic + seq id


def capture_segments(
    eng: Any, store: Any, toks: list[int], tag: str
) -> tuple[list[tuple[str, str, int, int]], int, float]:
    segs = []
    parent = eng.info.fingerprint_id + f"/{tag}"
    total = 0
    t0 = time.perf_counter()
    n = len(toks)
    for s in range(0, n, SEGMENT):
        e = min(n, s + SEGMENT)
        sid = chain_id(parent, toks[s:e])
        blob = eng.capture(s, e) if eng.can_cut else eng.capture(0, n)
        header = SegmentHeader(
            id=sid,
            parent=parent,
            kind="delta",
            fingerprint_id=eng.info.fingerprint_id,
            fingerprint=eng.info.fingerprint,
            start=s,
            end=e,
            tokens=toks[s:e],
        )
        rel, _size = store.write(header, blob)
        total += len(blob)
        segs.append((rel, sid, s, e))
        parent = sid
        if not eng.can_cut:
            break
    return segs, total, (time.perf_counter() - t0) * 1000


def restore_segments(
    eng: Any, store: Any, segs: list[tuple[str, str, int, int]], toks: list[int]
) -> dict[str, float]:
    read_ms = verify_ms = 0.0
    t0 = time.perf_counter()
    for rel, sid, s, e in segs:
        res = store.read(
            rel,
            seg_id=sid,
            fingerprint_id=eng.info.fingerprint_id,
            fingerprint=eng.info.fingerprint,
            start=s,
            tokens=toks[s:e],
        )
        read_ms += res.read_ms
        verify_ms += res.verify_ms
        eng.restore(res.payload, toks[s:e])
    total = (time.perf_counter() - t0) * 1000
    return {"total": total, "read": read_ms, "verify": verify_ms, "apply": total - read_ms - verify_ms}


def run_bench(
    model: str | None,
    lengths: list[int],
    *,
    full: bool = False,
    engine_options: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    from llmchat.app.runtime import load_engine
    from llmchat.sessions.snapshots import SnapshotStore

    say = progress or (lambda _m: None)
    opts = dict(engine_options or {})
    need = max(lengths) + 16
    if not opts.get("n_ctx") and need > 8192:
        opts["n_ctx"] = need
    eng = load_engine(model, **opts)
    if max(lengths) > eng.n_ctx:
        raise ValueError(f"--tokens {max(lengths)} exceeds the context ({eng.n_ctx})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="llmchat-bench-") as tmp:
        store = SnapshotStore(Path(tmp))
        for n in lengths:
            toks = bench_tokens(eng, n)
            say(f"{n} tokens: re-prefill…")
            eng.clear()
            t0 = time.perf_counter()
            eng.prefill(toks)
            reprefill_ms = (time.perf_counter() - t0) * 1000
            say(f"{n} tokens: capture…")
            segs, state_bytes, capture_ms = capture_segments(eng, store, toks, f"bench{n}")
            live = seq_state(eng)
            say(f"{n} tokens: restore…")
            eng.clear()
            r = restore_segments(eng, store, segs, toks)
            restore_ms, read_ms, verify_ms = r["total"], r["read"], r["verify"]
            exact = seq_state(eng) == live
            eng.clear()
            eng.prefill(toks)
            raw_load_ms = _raw_roundtrip(eng, Path(tmp) / f"raw{n}.bin")
            rows.append(
                {
                    "tokens": n,
                    "reprefill_ms": round(reprefill_ms, 1),
                    "restore_ms": round(restore_ms, 2),
                    "ratio": round(reprefill_ms / restore_ms, 1),
                    "restore_read_ms": round(read_ms, 2),
                    "restore_verify_ms": round(verify_ms, 2),
                    "segments": len(segs),
                    "capture_ms": round(capture_ms, 2),
                    "state_bytes": state_bytes,
                    "bytes_per_token": round(state_bytes / n),
                    "raw_restore_ms": round(raw_load_ms, 2),
                    "raw_ratio": round(reprefill_ms / raw_load_ms, 1) if raw_load_ms > 0 else None,
                    "vs_raw": round(restore_ms / raw_load_ms, 2) if raw_load_ms > 0 else None,
                    "exact": exact,
                }
            )
            for rel, *_ in segs:
                store.remove(rel)
    info = eng.info
    eng.close()
    out: dict[str, Any] = {
        "model": info.name,
        "model_path": info.path,
        "n_ctx": info.n_ctx,
        "memory_kind": info.memory_kind,
        "kv_type": opts.get("type_k", "f16"),
        "flash_attn": opts.get("flash_attn", True),
        "threads": os.cpu_count(),
        "segment_tokens": SEGMENT,
        "rows": rows,
    }
    if full:
        from llmchat.app.bench_full import run_full

        out["full"] = run_full(model, lengths, engine_options=engine_options or {}, progress=say)
    return out


def print_table(result: dict[str, Any]) -> None:
    print(
        f"model: {result['model']}  (n_ctx {result['n_ctx']}, KV {result['kv_type']}, flash attention "
        f"{'on' if result['flash_attn'] else 'off'}, {result['threads']} threads, {result['segment_tokens']}-token segments)"
    )
    print(
        f"{'tokens':>7} {'re-prefill':>11} {'restore':>9} {'ratio':>7} {'raw blob':>9} {'vs raw':>7} "
        f"{'capture':>9} {'bytes/token':>12} {'exact':>6}"
    )
    for r in result["rows"]:
        print(
            f"{r['tokens']:>7} {r['reprefill_ms']:>8.0f} ms {r['restore_ms']:>6.1f} ms {r['ratio']:>6.0f}× "
            f"{r['raw_restore_ms']:>6.1f} ms {r['vs_raw']:>6.2f}× {r['capture_ms']:>6.1f} ms "
            f"{r['bytes_per_token']:>12,} {'yes' if r['exact'] else 'NO':>6}"
        )
    if "full" in result:
        from llmchat.app.bench_full import print_full

        print_full(result["full"])
