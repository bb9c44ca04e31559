"""`llmchat bench --full` runs end to end on tiny contexts and returns the keys the table needs."""

from __future__ import annotations

import time

from llmchat.app.bench_full import print_full, run_full


def test_run_full_smoke(capsys) -> None:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    res = run_full(
        None,
        [64, 128],
        engine_options={"n_ctx": 1024},
        quick=True,
        sections=["restore", "capture", "compression", "q8_0"],
    )
    assert time.perf_counter() - t0 < 120
    rows = res["restore"]
    assert [r["tokens"] for r in rows] == [64, 128]
    for r in rows:
        assert "error" not in r, r
        assert r["exact"] is True
        assert r["cold_exact"] is True, r.get("cold_error")
        for k in (
            "reprefill_ms",
            "restore_ms",
            "raw_restore_ms",
            "limit_ms",
            "speedup",
            "vs_raw",
            "vs_limit",
        ):
            assert isinstance(r[k], float) and r[k] > 0, k
        assert 20_000 < r["bytes_per_token"] < 26_000  # f16 K+V of SmolLM2-135M: 23,040 B/token
        peer = r["peer"]
        assert "error" not in peer, peer
        assert peer["load_state_ok"] and peer["load_state_ms"] > 0
        assert peer.get("disk_cache_ok") or "disk_cache_error" in peer
    cap = res["capture"]
    assert cap["turns"] == 6 and cap["bytes_per_new_token_min"] > 20_000
    assert cap["bytes_per_new_token_max"] <= cap["bytes_per_new_token_min"] * 1.01
    assert all(r["exact"] for r in res["kv_q8_0"])
    assert res["kv_q8_0"][0]["bytes_per_token"] < rows[0]["bytes_per_token"] * 0.6
    assert 0 < res["compression"]["zlib1"]["ratio"] <= 1.01
    assert {t["target"] for t in res["targets"]}
    print_full(res)
    out = capsys.readouterr().out
    assert "-- restore" in out and "-- targets" in out
