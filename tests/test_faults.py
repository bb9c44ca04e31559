"""Issue 4: no finished turn lost, no bad state loaded — proven by fault injection.

Real model (SmolLM2-135M), real `llmchat` processes where it matters: kill -9 at random and
at chosen points (prefill, generation, snapshot write, SQLite commit); corrupt, truncated and
foreign snapshots; disk full; two processes on one data dir and one session; files deleted
or replaced behind the index's back.

The kill loop runs LLMCHAT_FAULT_ITERATIONS iterations (default 16, seed LLMCHAT_FAULT_SEED);
the long run (200 iterations) is marked `long` and runs with LLMCHAT_LONG=1, or use
`benchmarks/fault_loop.py`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import faults_util as fu
import pytest

LONG = os.environ.get("LLMCHAT_LONG") == "1"
ASK = ("--max-tokens", "8", "--temp", "0", "--seed", "1")


# ---------------------------------------------------------------------------- helpers
def _svc(engine: Any, home: Path, *, use_snapshots: bool = True) -> Any:
    from llmchat.sessions.chat import ChatService
    from llmchat.sessions.snapshots import SnapshotStore
    from llmchat.sessions.store import Store

    engine.clear()
    return ChatService(
        Store(home / "llmchat.db"), SnapshotStore(home / "snapshots"), engine, use_snapshots=use_snapshots
    )


def _sampling(n: int = 8) -> Any:
    from llmchat.engine.runtime import Sampling

    return Sampling(temperature=0, max_tokens=n, seed=1)


def _restart(svc: Any) -> None:
    """What a new process sees: an empty context, everything else on disk."""
    svc.engine.clear()
    svc.live_node = None


def _first_segment(svc: Any, session_id: int) -> Any:
    first = svc.store.nodes(session_id)[0]
    seg = svc._segment_for(first)
    assert seg is not None, "the first message should have a snapshot"
    return seg


def _two_turns(svc: Any) -> tuple[Any, list[Any]]:
    s = svc.new_session()
    r1 = svc.send(s.id, "Hello! Name a colour.", sampling=_sampling())
    r2 = svc.send(s.id, "And a fruit?", sampling=_sampling())
    return s, [r1, r2]


# ---------------------------------------------------------------------------- kill -9
def _run_loop(home: Path, iterations: int, seed: int) -> None:
    st = fu.fault_loop(home, iterations, seed, log=print, max_tokens=(3, 10))
    print(st.summary())
    assert st.lost_turns == 0, st.problems
    assert not st.problems, "\n".join(st.problems)
    assert st.kills >= iterations // 2, st.summary()
    assert st.corruptions_refused == st.corruptions_injected, st.summary()


def test_kill9_loop(tmp_path: Path) -> None:
    """A seeded loop of real `llmchat ask` processes SIGKILLed at random moments and at each
    kill point; after each: invariants on the database, `doctor --json`, `ask --continue`."""
    n = int(os.environ.get("LLMCHAT_FAULT_ITERATIONS", "16"))
    _run_loop(tmp_path / "home", n, int(os.environ.get("LLMCHAT_FAULT_SEED", "20261129")))


@pytest.mark.long
def test_kill9_loop_long(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The long run: LLMCHAT_LONG=1 (or `pytest --long` where conftest defines that option)."""
    if not (LONG or request.config.getoption("--long", default=False)):
        pytest.skip("long fault loop: set LLMCHAT_LONG=1 (or run benchmarks/fault_loop.py)")
    _run_loop(tmp_path / "home", int(os.environ.get("LLMCHAT_FAULT_ITERATIONS_LONG", "200")), 7)


def test_kill_mid_snapshot_write_leaves_no_half_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    p = fu.cli(home, "ask", "Tell me more", "--continue", *ASK, fault="seg-write:1")
    assert p.returncode == -signal.SIGKILL, p.stderr
    tmps = fu.temp_files(home)
    assert len(tmps) == 1, "the killed write leaves only its temp file"
    assert fu.check_invariants(home, [fu._turn_from(first, "Hello there")]) == []
    for f in fu.seg_files(home):  # every visible segment file is whole
        assert fu.read_header(f)[0]["id"] == f.stem
    rep = fu.cli_json(home, "doctor", "--json")
    assert rep["integrity"] == "ok" and rep["damaged"] == [] and rep["temp_files"] == 1
    assert fu.temp_files(home) == []
    res = fu.cli_json(home, "ask", "Go on", "--continue", "--json", *ASK)
    assert res["reply"] and res["restore"]["refused"] == []


def test_kill_after_rename_orphan_is_adopted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    p = fu.cli(home, "ask", "Hello there", *ASK, fault="seg-renamed:1")
    assert p.returncode == -signal.SIGKILL
    orphans = fu.seg_files(home)
    assert len(orphans) == 1 and fu.rows(home, "SELECT * FROM segments") == []
    # doctor leaves a fresh unindexed file alone (it may be a write in progress elsewhere)
    rep = fu.cli_json(home, "doctor", "--json")
    assert rep["damaged"] == [] and rep["recent_unindexed"] == 1 and rep["orphans"] == 0
    # the killed turn's user message may be there; the next ask branches beside it and
    # adopts the whole file instead of writing it again
    res = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    assert res["reply"]
    files = {r["file"] for r in fu.rows(home, "SELECT file FROM segments")}
    assert str(orphans[0].relative_to(home / "snapshots")) in files
    assert fu.check_invariants(home) == []


@pytest.mark.parametrize("point", ["decode:1", "decode:3", "sql-commit:4", "sql-committed:5"])
def test_killed_turn_is_absent_not_partial(tmp_path: Path, point: str) -> None:
    home = tmp_path / "home"
    first = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    p = fu.cli(home, "ask", "Count to five", "--continue", *ASK, fault=point)
    assert p.returncode == -signal.SIGKILL
    replies = fu.rows(home, "SELECT * FROM nodes WHERE role = 'assistant'")
    assert [r["id"] for r in replies] == [first["node"]], "a killed reply is never stored half-way"
    assert fu.check_invariants(home, [fu._turn_from(first, "Hello there")]) == []
    res = fu.cli_json(home, "ask", "Count to five", "--continue", "--json", *ASK)
    assert res["reply"] and res["restore"]["refused"] == []
    # the new turn continues the finished one (a dangling user message is branched beside)
    path = fu.cli_json(home, "show", str(res["session"]), "--json")
    leaf = {n["id"]: n for n in path["nodes"]}
    assert leaf[res["user_node"]]["parent"] == first["node"]


# ---------------------------------------------------------------------------- bad snapshots
CORRUPTIONS: dict[str, tuple[Any, str]] = {
    "flip-payload": (lambda p: fu.flip_byte(p, "payload"), "payload checksum"),
    "flip-header": (lambda p: fu.flip_byte(p, "header"), "header"),
    "flip-magic": (lambda p: fu.flip_byte(p, "magic"), "magic"),
    "truncate-half": (lambda p: fu.truncate(p, 0.5), "truncated"),
    "truncate-header": (lambda p: fu.truncate(p, 10), "truncated"),
    "empty": (lambda p: fu.truncate(p, 0), "truncated"),
    "foreign-model": (
        lambda p: fu.rewrite_header(p, fu.foreign_fingerprint("model_digest", "f" * 64)),
        "model_digest",
    ),
    "foreign-build": (
        lambda p: fu.rewrite_header(p, fu.foreign_fingerprint("llama_build", "x" * 32)),
        "llama_build",
    ),
    "foreign-n-ctx": (lambda p: fu.rewrite_header(p, fu.foreign_fingerprint("n_ctx", 1024)), "n_ctx"),
    "foreign-kv-type": (lambda p: fu.rewrite_header(p, fu.foreign_fingerprint("type_k", "q8_0")), "type_k"),
    "other-segment": (lambda p: fu.rewrite_header(p, lambda h: h.update(id="0" * 64)), "id"),
    "other-tokens": (lambda p: fu.rewrite_header(p, lambda h: h["tokens"].__setitem__(0, 7)), "tokens"),
    "other-range": (lambda p: fu.rewrite_header(p, lambda h: h.update(end=h["end"] + 1)), "covers"),
    "junk-header": (lambda p: fu.rewrite_header(p, lambda h: h.update(payload_len="lots")), "malformed"),
    "junk-fingerprint": (
        lambda p: fu.rewrite_header(p, lambda h: h.update(fingerprint=[1], fingerprint_id="x")),
        "another",
    ),
    "not-an-object": (lambda p: fu.rewrite_header(p, lambda h: (h.clear(), h.update({"0": 0}))), "malformed"),
    "deleted": (lambda p: p.unlink(), "missing"),
}


@pytest.fixture(scope="module")
def two_turn_home(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A data dir with a two-turn session and its snapshots, made once; tests copy it."""
    home = tmp_path_factory.mktemp("two-turns") / "home"
    svc = _svc(engine, home)
    s, _ = _two_turns(svc)
    svc.store.close()  # the last connection: the WAL is checkpointed into the db file
    return home, s.id


def _copy_home(src: Path, dst: Path, engine: Any) -> Any:
    shutil.copytree(src, dst)
    return _svc(engine, dst)


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_bad_snapshot_refused_and_reprefilled(
    engine: Any, tmp_path: Path, two_turn_home: tuple[Path, int], kind: str
) -> None:
    home = tmp_path / "home"
    svc = _copy_home(two_turn_home[0], home, engine)
    sid = two_turn_home[1]
    seg = _first_segment(svc, sid)
    damage, reason = CORRUPTIONS[kind]
    damage(svc.snaps.abs_path(seg.file))
    _restart(svc)
    res = svc.send(sid, "Thanks. One more word?", sampling=_sampling(4))
    assert res.reply.strip(), "the reply is still produced"
    assert len(res.restore.refused) == 1, res.restore.refused
    ref = res.restore.refused[0]
    assert ref["segment"] == seg.id and reason.lower() in ref["reason"].lower(), ref
    assert res.restore.restored_tokens == 0 and res.restore.prefilled_tokens > 0  # re-prefilled
    logged = [r for r in fu.log_ops(home) if r[0] == "refuse"]
    assert [(r[1], r[2]) for r in logged] == [("refused", seg.id)] and logged[0][3] == ref["reason"]
    if kind == "deleted":
        assert fu.quarantined(home) == []
    else:
        assert [q.name for q in fu.quarantined(home)] == [seg.file.replace("/", "_")]
    # the index forgot it, the turn re-captured it, nothing damaged remains
    assert fu.check_invariants(home) == []
    from llmchat.sessions.housekeeping import doctor

    rep = doctor(svc.store, svc.snaps, svc.fp_id)
    assert rep.damaged == [] and rep.missing == 0 and rep.integrity == "ok"
    if kind in ("flip-payload", "deleted"):  # and the next restart restores from the fresh snapshots
        _restart(svc)
        res2 = svc.send(sid, "Bye.", sampling=_sampling(4))
        assert res2.restore.refused == [] and res2.restore.restored_tokens > 0


def test_bad_snapshot_refused_when_quarantine_impossible(
    engine: Any, tmp_path: Path, two_turn_home: tuple[Path, int]
) -> None:
    """No room for the quarantine folder (here: a file in its place): the damaged snapshot is
    removed instead, and the turn still re-prefills."""
    home = tmp_path / "home"
    svc = _copy_home(two_turn_home[0], home, engine)
    sid = two_turn_home[1]
    seg = _first_segment(svc, sid)
    (home / "snapshots" / "quarantine").write_text("in the way")
    fu.flip_byte(svc.snaps.abs_path(seg.file))
    _restart(svc)
    res = svc.send(sid, "Thanks. One more word?", sampling=_sampling(4))
    assert res.reply.strip() and len(res.restore.refused) == 1
    assert fu.check_invariants(home) == []  # the damaged file is gone; the turn re-captured it


def test_payload_llama_rejects_is_refused(tmp_path: Path) -> None:
    """A well-formed file (valid checksums) whose payload llama.cpp cannot apply: the engine
    refuses it, the turn re-prefills (in a real process: a crash here would kill the CLI)."""
    import xxhash

    home = tmp_path / "home"
    fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    first = fu.rows(
        home,
        "SELECT s.file FROM segments s JOIN node_segments ns ON ns.segment_id = s.id "
        "ORDER BY ns.node_id LIMIT 1",
    )[0]["file"]
    path = home / "snapshots" / first
    _header, off = fu.read_header(path)
    payload = path.read_bytes()[off:]
    bad = payload[: len(payload) // 3]

    def change(h: dict[str, Any]) -> None:
        h["payload_len"] = len(bad)
        h["payload_xxh3_128"] = xxhash.xxh3_128_hexdigest(bad)

    fu.rewrite_header(path, change)
    _, off2 = fu.read_header(path)
    path.write_bytes(path.read_bytes()[:off2] + bad)
    res = fu.cli_json(home, "ask", "Go on", "--continue", "--json", *ASK)
    assert res["reply"]
    assert [r["segment"] for r in res["restore"]["refused"]] == [path.stem]
    assert "rejected" in res["restore"]["refused"][0]["reason"]
    assert fu.check_invariants(home) == []


def test_other_n_ctx_and_kv_type_never_load(tmp_path: Path) -> None:
    """Snapshots made under one n_ctx / KV type are not used under another; a file of
    one put in place of the other's is refused, naming what differs."""
    home = tmp_path / "home"
    a = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    b = fu.cli_json(home, "ask", "Tell me a joke", "--continue", "--json", "--n-ctx", "1024", *ASK)
    assert b["restore"]["tokens"] == 0 and b["restore"]["refused"] == [] and b["reply"]
    c = fu.cli_json(home, "ask", "Another", "--continue", "--json", "--kv-type", "q8_0", *ASK)
    assert c["restore"]["tokens"] == 0 and c["restore"]["refused"] == [] and c["reply"]
    fps = {r["fingerprint_id"] for r in fu.rows(home, "SELECT fingerprint_id FROM segments")}
    assert len(fps) == 3
    # back under the defaults: the default-fingerprint snapshots of the shared prefix restore
    d = fu.cli_json(home, "ask", "Thanks", "--continue", "--json", *ASK)
    assert d["restore"]["tokens"] > 0 and d["restore"]["refused"] == []
    # swap files: the q8_0 file of the first message in place of the default one
    rows = fu.rows(
        home,
        "SELECT s.file, s.fingerprint_id FROM node_segments ns JOIN segments s "
        "ON s.id = ns.segment_id WHERE ns.node_id = ?",
        (a["user_node"],),
    )
    by_fp = {r["fingerprint_id"]: home / "snapshots" / r["file"] for r in rows}
    default_fp = fu.read_header(
        by_fp[
            next(
                fp
                for fp in by_fp
                if fu.read_header(by_fp[fp])[0]["fingerprint"]["type_k"] == "f16"
                and fu.read_header(by_fp[fp])[0]["fingerprint"]["n_ctx"] != 1024
            )
        ]
    )[0]["fingerprint_id"]
    q8 = next(p for p in by_fp.values() if fu.read_header(p)[0]["fingerprint"]["type_k"] == "q8_0")
    shutil.copyfile(q8, by_fp[default_fp])
    e = fu.cli_json(home, "ask", "Once more", "--continue", "--json", *ASK)
    assert e["reply"] and len(e["restore"]["refused"]) == 1
    assert "type_k" in e["restore"]["refused"][0]["reason"]
    doc = fu.cli_json(home, "doctor", "--json")
    assert doc["other_fingerprint"] >= 2 and doc["damaged"] == []


# ---------------------------------------------------------------------------- disk full
def test_disk_full_in_process(engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    svc = _svc(engine, home)
    s = svc.new_session()
    real_write = os.write
    written = [0]

    def full_write(fd: int, data: Any) -> int:
        if written[0] > 1000:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(data[:600]))
        written[0] += n
        return n

    monkeypatch.setattr(os, "write", full_write)
    res = svc.send(s.id, "Hello! Name a colour.", sampling=_sampling())
    monkeypatch.setattr(os, "write", real_write)
    assert res.reply.strip()
    assert any("disk full" in w for w in res.warnings), res.warnings
    assert res.to_dict()["warnings"] == res.warnings
    assert fu.seg_files(home) == [] and fu.temp_files(home) == []
    assert fu.rows(home, "SELECT * FROM segments") == []
    assert ("create", "failed") in {(r[0], r[1]) for r in fu.log_ops(home)}
    assert fu.check_invariants(home) == []
    # space again: the next turn writes the missing snapshots and all restores
    res2 = svc.send(s.id, "And a fruit?", sampling=_sampling())
    assert res2.warnings == [] and res2.snapshots_written >= 3
    _restart(svc)
    res3 = svc.send(s.id, "Bye.", sampling=_sampling())
    assert res3.restore.refused == [] and res3.restore.restored_tokens > 0


def _mount_tmpfs(mnt: Path, size: str) -> None:
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.decode().strip()}")


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Any:
    mnt = tmp_path / "tiny"
    _mount_tmpfs(mnt, "400k")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Any:
    mnt = tmp_path / "small"
    _mount_tmpfs(mnt, "8m")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_disk_full_real_tmpfs(tmp_path: Path, tiny_tmpfs: Path) -> None:
    """The snapshot folder on a 400 KB tmpfs: real ENOSPC from the kernel."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "snapshots").symlink_to(tiny_tmpfs, target_is_directory=True)
    turns = []
    for i, text in enumerate(["Hello! Name a colour.", "And a fruit?", "And an animal?"]):
        res = fu.cli_json(home, "ask", text, "--json", *ASK, *(["--continue"] if i else []))
        assert res["reply"]
        turns.append(fu._turn_from(res, text))
    assert any("disk full" in w for w in res["warnings"]), res["warnings"]
    p = fu.cli(home, "ask", "Once more", "--continue", *ASK)
    assert p.returncode == 0 and "warning: snapshot skipped (disk full)" in p.stderr, p.stderr
    assert fu.temp_files(home) == []
    assert fu.check_invariants(home, turns) == []
    doc = fu.cli_json(home, "doctor", "--json")
    assert doc["damaged"] == [] and doc["missing"] == 0 and doc["integrity"] == "ok"
    res = fu.cli_json(home, "ask", "Last one", "--continue", "--json", *ASK)
    assert res["reply"] and res["restore"]["refused"] == []


def test_database_disk_full_is_one_line(tmp_path: Path, small_tmpfs: Path) -> None:
    """Everything on a full tmpfs: the database cannot grow. One line, exit 1, and the turns
    committed before are intact."""
    tiny_tmpfs = small_tmpfs
    home = tiny_tmpfs / "home"
    res = fu.cli_json(home, "ask", "Hello", "--json", "--no-snapshots", *ASK)
    filler = tiny_tmpfs / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    p = fu.cli(home, "ask", "x " * 3000, "--continue", "--no-snapshots", *ASK)
    if p.returncode == 0:  # the WAL still had room: nothing to prove here
        pytest.skip("the database still had room")
    fu.assert_one_line_error(p, 1)
    filler.unlink()
    assert fu.check_invariants(home, [fu._turn_from(res, "Hello")]) == []


# ---------------------------------------------------------------------------- concurrency
def _spawn(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        fu.cli_cmd(*args),
        env=fu.env_for(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(fu.ROOT),
    )


def _finish(p: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out)


def test_two_processes_one_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    sid = str(first["session"])
    turns = [fu._turn_from(first, "Hello there")]
    for rnd in range(1):
        texts = [f"Question A{rnd}", f"Question B{rnd}"]
        procs = [_spawn(home, "ask", t, "--session", sid, "--json", *ASK) for t in texts]
        results = [_finish(p) for p in procs]
        for t, r in zip(texts, results, strict=False):
            assert r["reply"] and r["restore"]["refused"] == [], r
            turns.append(fu._turn_from(r, t))
    assert fu.check_invariants(home, turns) == []
    nodes = {n["id"]: n for n in fu.cli_json(home, "show", sid, "--json")["nodes"]}
    for t in turns[1:]:  # each concurrent turn continues a finished turn: siblings or later turns
        assert nodes[nodes[t.user_node]["parent"]]["role"] == "assistant"
    doc = fu.cli_json(home, "doctor", "--json")
    assert doc["damaged"] == [] and doc["missing"] == 0 and doc["integrity"] == "ok"


def test_two_processes_two_sessions_with_doctor_and_gc_running(tmp_path: Path) -> None:
    """Two chats on one data dir while doctor and gc (with room to spare) run in a loop:
    no lost turn, no refused or missing snapshot, no corrupt database."""
    home = tmp_path / "home"
    a = fu.cli_json(home, "ask", "Hello from A", "--json", *ASK)
    b = fu.cli_json(home, "ask", "Hello from B", "--json", *ASK)
    turns = [fu._turn_from(a, "Hello from A"), fu._turn_from(b, "Hello from B")]
    stop = threading.Event()
    errors: list[str] = []

    def housekeeping() -> None:
        while not stop.is_set():
            for args in (("doctor", "--json"), ("gc", "--budget", "1G", "--json")):
                p = fu.cli(home, *args)
                if p.returncode != 0:
                    errors.append(p.stderr)

    t = threading.Thread(target=housekeeping)
    t.start()
    try:
        for i in range(1):
            procs = [
                (f"A{i}", _spawn(home, "ask", f"A{i}", "--session", str(a["session"]), "--json", *ASK)),
                (f"B{i}", _spawn(home, "ask", f"B{i}", "--session", str(b["session"]), "--json", *ASK)),
            ]
            for text, p in procs:
                r = _finish(p)
                assert r["restore"]["refused"] == [], r["restore"]
                turns.append(fu._turn_from(r, text))
    finally:
        stop.set()
        t.join()
    assert errors == []
    assert fu.check_invariants(home, turns) == []
    ops = fu.log_ops(home)
    assert not [o for o in ops if o[0] == "refuse" or o[1] in ("missing", "quarantined")], ops


# ---------------------------------------------------------------------------- missing files
def test_snapshot_deleted_behind_the_index(tmp_path: Path) -> None:
    home = tmp_path / "home"
    r1 = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    for f in fu.seg_files(home):
        f.unlink()
    r2 = fu.cli_json(home, "ask", "Go on", "--continue", "--json", *ASK)
    assert r2["reply"] and r2["restore"]["tokens"] == 0
    assert r2["restore"]["refused"] and "missing" in r2["restore"]["refused"][0]["reason"]
    # doctor on a fresh deletion: rows dropped, named, logged
    for f in fu.seg_files(home):
        f.unlink()
    doc = fu.cli_json(home, "doctor", "--json")
    assert doc["missing"] >= 1 and doc["damaged"] == []
    assert any(r["op"] == "verify" and r["outcome"] == "missing" for r in doc["recent"])
    assert fu.check_invariants(home, [fu._turn_from(r1, "Hello there"), fu._turn_from(r2, "Go on")]) == []
    r3 = fu.cli_json(home, "ask", "More", "--continue", "--json", *ASK)
    assert r3["reply"] and r3["restore"]["refused"] == []


def test_model_moved_or_replaced(tmp_path: Path, model_path: Path) -> None:
    home = tmp_path / "home"
    copy = tmp_path / "model.gguf"
    shutil.copyfile(model_path, copy)
    r1 = fu.cli_json(home, "ask", "Hello there", "--json", "--model", str(copy), *ASK)
    # moved away: one line, exit 1, nothing lost
    moved = tmp_path / "elsewhere.gguf"
    copy.rename(moved)
    p = fu.cli(home, "ask", "Go on", "--continue", "--model", str(copy), *ASK)
    fu.assert_one_line_error(p, 1, "not found")
    p = fu.cli(home, "ask", "Go on", "--continue", "--model", "/nonexistent", *ASK)
    fu.assert_one_line_error(p, 1, "/nonexistent")
    # replaced by another model file at the same path (same size; its metadata differ: the
    # model's name, as a re-conversion would change it): its snapshots are not used
    moved.rename(copy)
    data = bytearray(copy.read_bytes()[: 4 << 20])
    at = data.find(b"Smollm2 135M")
    assert at > 0
    with copy.open("r+b") as f:
        f.seek(at)
        f.write(b"Smollm9 135M")
    r2 = fu.cli_json(home, "ask", "Go on", "--continue", "--json", "--model", str(copy), *ASK)
    assert r2["reply"] and r2["restore"]["tokens"] == 0 and r2["restore"]["refused"] == []
    assert fu.check_invariants(home, [fu._turn_from(r1, "Hello there")]) == []
    doc = fu.cli_json(home, "doctor", "--json", "--model", str(copy))
    assert doc["other_fingerprint"] >= 2 and doc["damaged"] == []
