"""Where the time of llmchat's restore and capture goes, stage by stage (issue 5 follow-up).

    .venv/bin/python benchmarks/profile_restore.py [--tokens 4096] [--reps 5]

Restore of N tokens from 256-token segment files, split into: open + header parse/checks,
payload read, payload xxh3 verify, llama_state_seq_set_data into the scratch sequence,
seq_cp scratch→live + seq_rm scratch; beside it the raw single blob (read + set_data into
live) and the limit (read + memcpy). Capture of one ~100-token turn at the end of the
context, split into seq_cp, state_seq_get_size, state_seq_get_data, and the segment write
(file write, fsync, rename, dir fsync). Medians of --reps.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import xxhash

    from llmchat.app.bench import bench_tokens
    from llmchat.app.bench_full import SEGMENT, _capture_segments
    from llmchat.app.runtime import load_engine
    from llmchat.engine.runtime import LIVE, SCRATCH
    from llmchat.sessions.snapshots import SnapshotStore

    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--kv-type", default="f16")
    a = p.parse_args(argv)
    eng = load_engine(None, type_k=a.kv_type, type_v=a.kv_type)
    ll = eng._ll
    n = a.tokens
    toks = bench_tokens(eng, n)
    eng.prefill(toks)
    stages: dict[str, list[float]] = {}

    def rec(k: str, t0: float) -> float:
        t = time.perf_counter()
        stages.setdefault(k, []).append((t - t0) * 1000)
        return t

    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        store = SnapshotStore(tmp / "s")
        segs, nbytes, _ = _capture_segments(eng, store, toks, "prof")
        raw = tmp / "raw.bin"
        raw.write_bytes(eng._get_seq(LIVE))
        for _ in range(a.reps):
            eng.clear()
            t_all = time.perf_counter()
            for rel, _sid, s, e in segs:
                t0 = time.perf_counter()
                path = store.abs_path(rel)
                header, off = store.read_header(path)
                assert header["tokens"] == toks[s:e] and header["start"] == s
                t0 = rec("1 open + header parse/checks", t0)
                size = path.stat().st_size - off
                buf = bytearray(size)
                with path.open("rb", buffering=0) as f:
                    f.seek(off)
                    f.readinto(buf)
                t0 = rec("2 payload read", t0)
                assert xxhash.xxh3_128_hexdigest(buf) == header["payload_xxh3_128"]
                t0 = rec("3 payload xxh3 verify", t0)
                arr = (ctypes.c_uint8 * size).from_buffer(buf)
                if s == 0:
                    ll.llama_state_seq_set_data(eng._ctx, arr, size, LIVE)
                    del arr
                    t0 = rec("4 state_seq_set_data", t0)
                else:
                    ll.llama_state_seq_set_data(eng._ctx, arr, size, SCRATCH)
                    del arr
                    t0 = rec("4 state_seq_set_data", t0)
                    ll.llama_memory_seq_cp(eng._mem, SCRATCH, LIVE, s, e)
                    ll.llama_memory_seq_rm(eng._mem, SCRATCH, -1, -1)
                    t0 = rec("5 seq_cp + seq_rm", t0)
            rec("= segmented restore, all stages", t_all)
            assert eng._pos_max(LIVE) == n - 1
            eng.clear()
            t0 = time.perf_counter()
            with open(raw, "rb", buffering=0) as f:
                rb = bytearray(os.fstat(f.fileno()).st_size)
                f.readinto(rb)
            t0 = rec("raw: read", t0)
            arr = (ctypes.c_uint8 * len(rb)).from_buffer(rb)
            ll.llama_state_seq_set_data(eng._ctx, arr, len(rb), LIVE)
            del arr
            rec("raw: state_seq_set_data", t0)
            dst = bytearray(len(rb))
            t0 = time.perf_counter()
            memoryview(dst)[:] = rb
            rec("limit: memcpy only", t0)
        # prototypes of a cheaper SnapshotStore.read + Engine.restore (not in the core): same checks,
        # (a) payload read in 1 MiB chunks into one reused, pre-faulted buffer, hashed chunk by chunk
        # while cache-hot; (b) payload mmapped (private, copy-on-write) and handed to set_data directly
        import mmap

        reuse = bytearray(b"\x01") * max(store.abs_path(r).stat().st_size for r, *_ in segs)

        def apply(mv_arr: object, size: int, s: int, e: int) -> None:
            if s == 0:
                ll.llama_state_seq_set_data(eng._ctx, mv_arr, size, LIVE)
            else:
                ll.llama_state_seq_set_data(eng._ctx, mv_arr, size, SCRATCH)
                ll.llama_memory_seq_cp(eng._mem, SCRATCH, LIVE, s, e)
                ll.llama_memory_seq_rm(eng._mem, SCRATCH, -1, -1)

        for _ in range(a.reps):
            eng.clear()
            t0 = time.perf_counter()
            for rel, _sid, s, e in segs:
                path = store.abs_path(rel)
                header, off = store.read_header(path)
                assert header["tokens"] == toks[s:e]
                size = path.stat().st_size - off
                h = xxhash.xxh3_128()
                mv = memoryview(reuse)
                with path.open("rb", buffering=0) as f:
                    f.seek(off)
                    pos = 0
                    while pos < size:
                        k = f.readinto(mv[pos : min(size, pos + (1 << 20))])
                        h.update(mv[pos : pos + k])
                        pos += k
                assert h.hexdigest() == header["payload_xxh3_128"]
                arr = (ctypes.c_uint8 * size).from_buffer(reuse)
                apply(arr, size, s, e)
                del arr, mv
            rec("proto a: chunked read+hash into reused buffer", t0)
            assert eng._pos_max(LIVE) == n - 1
            eng.clear()
            t0 = time.perf_counter()
            for rel, _sid, s, e in segs:
                path = store.abs_path(rel)
                header, off = store.read_header(path)
                assert header["tokens"] == toks[s:e]
                with path.open("rb") as f:
                    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
                size = len(m) - off
                assert xxhash.xxh3_128_hexdigest(memoryview(m)[off:]) == header["payload_xxh3_128"]
                arr = (ctypes.c_uint8 * size).from_buffer(m, off)
                apply(arr, size, s, e)
                del arr
                m.close()
            rec("proto b: mmap (no read copy) + hash + set_data", t0)
            assert eng._pos_max(LIVE) == n - 1
        # capture of a ~100-token turn at the end of the context
        eng.clear()
        eng.prefill(toks)
        s, e = n - 100, n
        from llmchat.sessions.snapshots import SegmentHeader

        for i in range(a.reps):
            t0 = time.perf_counter()
            ll.llama_memory_seq_rm(eng._mem, SCRATCH, -1, -1)
            ll.llama_memory_seq_cp(eng._mem, LIVE, SCRATCH, s, e)
            t0 = rec("cap 1 seq_cp live→scratch", t0)
            size = int(ll.llama_state_seq_get_size(eng._ctx, SCRATCH))
            t0 = rec("cap 2 state_seq_get_size", t0)
            buf = bytearray(size)
            arr = (ctypes.c_uint8 * size).from_buffer(buf)
            ll.llama_state_seq_get_data(eng._ctx, arr, size, SCRATCH)
            del arr
            t0 = rec("cap 3 state_seq_get_data", t0)
            ll.llama_memory_seq_rm(eng._mem, SCRATCH, -1, -1)
            t0 = rec("cap 4 seq_rm scratch", t0)
            h = SegmentHeader(
                id=f"{i:02d}" + "f" * 62,
                parent="p",
                kind="delta",
                fingerprint_id=eng.info.fingerprint_id,
                fingerprint=eng.info.fingerprint,
                start=s,
                end=e,
                tokens=toks[s:e],
            )
            store.write(h, buf)
            rec("cap 5 SnapshotStore.write (incl. fsync file + dir)", t0)
            # the same write without fsync: what durability costs
            t0 = time.perf_counter()
            with open(tmp / f"nofsync{i}", "wb") as f:
                f.write(buf)
            rec("cap 5b plain write, no fsync", t0)
    eng.close()
    print(
        f"{n} tokens, {len(segs)} segments of {SEGMENT}, {nbytes / 1e6:.1f} MB state; median of {a.reps} (ms)"
    )
    for k in sorted(stages, key=lambda k: (k.startswith("cap"), k.startswith(("raw", "limit", "proto")), k)):
        v = stages[k]
        per_run = (
            sum(v) / a.reps
            if not k.startswith(("=", "raw", "limit", "cap", "proto"))
            else statistics.median(v)
        )
        print(f"  {k:<52} {per_run:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
