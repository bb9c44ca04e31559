"""Issue 4: the audit trail (snapshot_log), doctor and the disk budget (gc)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import faults_util as fu

ASK = ("--max-tokens", "6", "--temp", "0", "--seed", "1")


def _svc(engine: Any, home: Path) -> Any:
    from llmchat.sessions.chat import ChatService
    from llmchat.sessions.snapshots import SnapshotStore
    from llmchat.sessions.store import Store

    engine.clear()
    return ChatService(Store(home / "llmchat.db"), SnapshotStore(home / "snapshots"), engine)


def _sampling() -> Any:
    from llmchat.engine.runtime import Sampling

    return Sampling(temperature=0, max_tokens=6, seed=1)


def _restart(svc: Any) -> None:
    svc.engine.clear()
    svc.live_node = None


def _session_segments(svc: Any, session_id: int) -> list[Any]:
    out = []
    for n in svc.store.nodes(session_id):
        seg = svc._segment_for(n)
        if seg is not None:
            out.append(seg)
    return out


def _messages(svc: Any) -> list[tuple[int, str, str]]:
    return [
        (r[0], r[1], r[2]) for r in svc.store.db.execute("SELECT id, role, content FROM nodes ORDER BY id")
    ]


# ---------------------------------------------------------------------------- audit trail
def test_every_snapshot_operation_is_logged(engine: Any, tmp_path: Path) -> None:
    from llmchat.sessions.housekeeping import doctor, gc

    home = tmp_path / "home"
    svc = _svc(engine, home)
    s = svc.new_session()
    svc.send(s.id, "Hello! Name a colour.", sampling=_sampling())
    _restart(svc)
    svc.send(s.id, "And a fruit?", sampling=_sampling())  # restores turn 1
    fu.flip_byte(svc.snaps.abs_path(_session_segments(svc, s.id)[0].file))
    _restart(svc)
    svc.send(s.id, "And an animal?", sampling=_sampling())  # refuses the damaged one
    doctor(svc.store, svc.snaps, svc.fp_id)
    gc(svc.store, svc.snaps, budget=0)
    ops = {(op, outcome) for op, outcome, _, _ in fu.log_ops(home)}
    for want in [
        ("create", "ok"),
        ("restore", "ok"),
        ("refuse", "refused"),
        ("verify", "ok"),
        ("evict", "ok"),
    ]:
        assert want in ops, (want, ops)
    rows = fu.rows(home, "SELECT * FROM snapshot_log")
    for r in rows:
        assert r["ts"] > 0 and r["op"] in ("create", "verify", "restore", "refuse", "evict"), dict(r)
        if r["op"] in ("create", "restore", "refuse"):
            assert r["segment_id"] and r["session_id"] == s.id and r["node_id"], dict(r)
        if r["op"] in ("create", "restore"):
            assert r["bytes"] > 0 and r["ms"] is not None, dict(r)
    refused = [r for r in rows if r["op"] == "refuse"]
    assert len(refused) == 1 and "checksum" in refused[0]["detail"]
    summary = svc.store.log_summary()
    assert summary["create"]["ok"] >= 4 and summary["evict"]["ok"] >= 1


def test_doctor_cli_shows_log_and_summary(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    fu.cli_json(home, "ask", "Go on", "--continue", "--json", *ASK)
    rep = fu.cli_json(home, "doctor", "--json", "--log", "5")
    assert rep["integrity"] == "ok" and rep["damaged"] == [] and rep["checked"] == rep["ok"] >= 4
    assert rep["log_summary"]["create"]["ok"] >= 4 and rep["log_summary"]["restore"]["ok"] >= 1
    assert len(rep["recent"]) == 5 and rep["recent"][0]["op"] == "verify"  # newest first: this run
    p = fu.cli(home, "doctor")
    assert p.returncode == 0, p.stderr
    assert "database: ok" in p.stdout and "log: " in p.stdout and "create ok" in p.stdout
    assert " restore " in p.stdout  # the recent operations, one per line


# ---------------------------------------------------------------------------- doctor
def test_doctor_names_and_quarantines_damage(engine: Any, tmp_path: Path) -> None:
    from llmchat.sessions.housekeeping import doctor

    home = tmp_path / "home"
    svc = _svc(engine, home)
    s = svc.new_session()
    svc.send(s.id, "Hello! Name a colour.", sampling=_sampling())
    svc.send(s.id, "And a fruit?", sampling=_sampling())
    segs = _session_segments(svc, s.id)
    assert len(segs) == 4
    flipped, foreign, deleted, cut = segs
    fu.flip_byte(svc.snaps.abs_path(flipped.file))
    fu.rewrite_header(svc.snaps.abs_path(foreign.file), fu.foreign_fingerprint("model_digest", "0" * 64))
    svc.snaps.abs_path(deleted.file).unlink()
    fu.truncate(svc.snaps.abs_path(cut.file), 0.3)
    # leftovers: an old orphan, a fresh orphan (maybe a write in progress), temp files of a
    # dead writer and of a live one
    d = svc.snaps.abs_path(flipped.file).parent
    old_orphan = d / ("ab" * 32 + ".seg")
    old_orphan.write_bytes(b"x")
    os.utime(old_orphan, (time.time() - 3600, time.time() - 3600))
    new_orphan = d / ("cd" * 32 + ".seg")
    new_orphan.write_bytes(b"x")
    dead_tmp = d / f".{'ef' * 32}.seg.999999999.tmp"
    dead_tmp.write_bytes(b"x")
    live_tmp = d / f".{'ef' * 32}.seg.{os.getppid()}.tmp"
    live_tmp.write_bytes(b"x")
    msgs = _messages(svc)

    rep = doctor(svc.store, svc.snaps, svc.fp_id)
    reasons = {x["segment"]: x["reason"] for x in rep.damaged}
    assert set(reasons) == {flipped.id, foreign.id, cut.id}
    assert "checksum" in reasons[flipped.id]
    assert "another model" in reasons[foreign.id]
    assert "truncated" in reasons[cut.id]
    assert rep.missing == 1 and rep.orphans == 1 and rep.temp_files == 1 and rep.recent_unindexed == 2
    assert rep.checked == 4 and rep.ok == 0 and rep.integrity == "ok"
    assert sorted(q.name for q in fu.quarantined(home)) == sorted(
        x.file.replace("/", "_") for x in (flipped, foreign, cut)
    )
    assert not old_orphan.exists() and new_orphan.exists() and not dead_tmp.exists() and live_tmp.exists()
    assert (
        fu.rows(home, "SELECT * FROM segments") == [] and fu.rows(home, "SELECT * FROM node_segments") == []
    )
    ops = [(o, oc, sid) for o, oc, sid, _ in fu.log_ops(home) if o == "verify"]
    assert {(o, oc) for o, oc, _ in ops} == {
        ("verify", "quarantined"),
        ("verify", "missing"),
        ("verify", "orphan"),
        ("verify", "repaired"),
    }
    assert {sid for _, oc, sid in ops if oc == "quarantined"} == {flipped.id, foreign.id, cut.id}
    assert _messages(svc) == msgs, "doctor never touches a message"
    # repaired: a second run finds nothing, the chat re-prefills and snapshots again
    rep2 = doctor(svc.store, svc.snaps, svc.fp_id)
    assert rep2.damaged == [] and rep2.missing == 0 and rep2.orphans == 0
    _restart(svc)
    res = svc.send(s.id, "And an animal?", sampling=_sampling())
    assert res.reply.strip() and res.restore.refused == [] and res.snapshots_written >= 4


def test_doctor_without_model_still_verifies(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    f = fu.seg_files(home)[0]
    fu.flip_byte(f)
    rep = fu.cli_json(home, "doctor", "--json", "--model", "/nonexistent.gguf")
    assert "model not loaded" in rep["note"]
    assert [x["segment"] for x in rep["damaged"]] == [f.stem]


# ---------------------------------------------------------------------------- gc
def test_gc_lru_first_shared_last_never_messages(engine: Any, tmp_path: Path) -> None:
    from llmchat.sessions.housekeeping import gc

    home = tmp_path / "home"
    svc = _svc(engine, home)
    sessions = []
    for text in ("Hello! Name a colour.", "Hi! Name a fruit.", "Hey! Name an animal."):
        s = svc.new_session()
        svc.send(s.id, text, sampling=_sampling())
        sessions.append(s)
    shared_src, old, new = sessions
    svc.fork(svc.store.session(shared_src.id).active_leaf)  # its segments are now used twice
    refs = svc.store.segment_refs()
    shared = _session_segments(svc, shared_src.id)
    old_segs = _session_segments(svc, old.id)
    new_segs = _session_segments(svc, new.id)
    assert all(refs[x.id] == 2 for x in shared) and all(refs[x.id] == 1 for x in old_segs + new_segs)
    db = svc.store.db
    for segs, when in ((shared, 100.0), (old_segs, 200.0), (new_segs, 300.0)):
        db.executemany("UPDATE segments SET last_used = ? WHERE id = ?", [(when, x.id) for x in segs])
    msgs = _messages(svc)
    total = sum(x.bytes for x in svc.store.segments())

    # room for all but the least recently used unshared session: exactly that one goes
    rep = gc(svc.store, svc.snaps, budget=total - sum(x.bytes for x in old_segs))
    assert rep.evicted == len(old_segs) and rep.after_bytes <= rep.budget and rep.unreferenced == 0
    left = {x.id for x in svc.store.segments()}
    assert left == {x.id for x in shared + new_segs}
    assert all(not svc.snaps.abs_path(x.file).exists() for x in old_segs)
    # within one session (same last use) the deepest segment goes first
    evicted = [
        r["segment_id"] for r in fu.rows(home, "SELECT * FROM snapshot_log WHERE op = 'evict' ORDER BY id")
    ]
    assert evicted == [x.id for x in sorted(old_segs, key=lambda x: -x.start)]
    # nothing fits: everything goes, the shared segments last even though used least recently
    gc(svc.store, svc.snaps, budget=0)
    evicted = [
        r["segment_id"] for r in fu.rows(home, "SELECT * FROM snapshot_log WHERE op = 'evict' ORDER BY id")
    ]
    assert set(evicted[-len(shared) :]) == {x.id for x in shared}
    assert svc.store.segments() == [] and fu.seg_files(home) == []
    assert _messages(svc) == msgs, "gc never touches a message"
    # the chat goes on by re-prefilling
    _restart(svc)
    res = svc.send(old.id, "Another one?", sampling=_sampling())
    assert res.reply.strip() and res.restore.restored_tokens == 0 and res.restore.refused == []


def test_gc_cli_budget(tmp_path: Path) -> None:
    home = tmp_path / "home"
    a = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    fu.cli_json(home, "ask", "Go on", "--continue", "--json", *ASK)
    shown = fu.cli_json(home, "show", str(a["session"]), "--json")
    rep = fu.cli_json(home, "gc", "--budget", "10M", "--json")
    assert rep["evicted"] == 0 and rep["budget"] == 10 << 20 and rep["before_bytes"] == rep["after_bytes"] > 0
    rep = fu.cli_json(home, "gc", "--budget", "1K", "--json")
    assert rep["evicted"] >= 4 and rep["after_bytes"] <= 1024 and rep["freed_bytes"] == rep["before_bytes"]
    assert fu.seg_files(home) == []
    assert fu.cli_json(home, "show", str(a["session"]), "--json")["nodes"] == shown["nodes"]
    # the budget is remembered; the next turn re-prefills, and its snapshots go on the next gc
    p = fu.cli(home, "gc")
    assert p.returncode == 0 and "budget 0 MB" in p.stdout
    res = fu.cli_json(home, "ask", "More", "--continue", "--json", *ASK)
    assert res["reply"] and res["restore"]["tokens"] == 0 and res["restore"]["refused"] == []
    assert fu.check_invariants(home) == []


def test_rm_removes_only_unshared_segments(tmp_path: Path) -> None:
    home = tmp_path / "home"
    a = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    # same first message: a shared segment; a shorter reply: its own reply segment
    b = fu.cli_json(home, "ask", "Hello there", "--json", *ASK[2:], "--max-tokens", "3")
    shared = fu.rows(home, "SELECT segment_id FROM node_segments WHERE node_id = ?", (a["user_node"],))[0][0]
    assert (
        fu.rows(home, "SELECT segment_id FROM node_segments WHERE node_id = ?", (b["user_node"],))[0][0]
        == shared
    )
    p = fu.cli(home, "rm", str(a["session"]))
    assert p.returncode == 0, p.stderr
    left = {r["id"] for r in fu.rows(home, "SELECT id FROM segments")}
    assert shared in left
    assert {f.stem for f in fu.seg_files(home)} == left
    assert fu.check_invariants(home, [fu._turn_from(b, "Hello there")]) == []
    assert any(op == "evict" and "unreferenced" in d for op, _, _, d in fu.log_ops(home))
