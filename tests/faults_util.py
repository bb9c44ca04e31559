"""Fault-injection helpers shared by tests/test_faults.py, tests/test_bad_input.py,
tests/test_housekeeping.py and benchmarks/fault_loop.py.

Three kinds of helpers:

* running the real CLI in a subprocess on a given data dir (`cli`, `cli_json`,
  `assert_one_line_error`);
* damaging snapshot files (`flip_byte`, `truncate`, `rewrite_header`) and checking the
  database directly (`check_invariants`);
* a fault runner: `python tests/faults_util.py ARGS...` runs `llmchat ARGS...` with a
  kill point armed by the environment variable LLMCHAT_FAULT="POINT:K" — the process
  SIGKILLs itself at the K-th occurrence of POINT (see FAULT_POINTS) — and `fault_loop`,
  the seeded kill -9 loop of real `llmchat ask` processes.

Nothing here edits the code under test; the runner only wraps functions from outside.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
_FIXED = struct.Struct("<8sIIQ")
MAGIC = b"LLMCSEG\x00"

# Where the runner can kill its own process (SIGKILL, no clean-up of any kind):
FAULT_POINTS = {
    "decode": "before the K-th llama_decode batch (prefill chunks first, then one per generated token)",
    "seg-write": "in the K-th snapshot write, after half its bytes reached the temp file",
    "seg-renamed": "after the K-th snapshot file was renamed into place, before its index row",
    "sql-commit": "just before the K-th COMMIT of a write transaction",
    "sql-mid-commit": "from another thread, a few microseconds into the K-th COMMIT",
    "sql-committed": "just after the K-th COMMIT",
}


# ---------------------------------------------------------------------------- running the CLI
def env_for(home: Path | str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LLMCHAT_DEBUG", "LLMCHAT_FAULT")}
    env["LLMCHAT_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def cli_cmd(*args: str, fault: str | None = None) -> list[str]:
    if fault:
        return [sys.executable, str(HERE), *args]
    return [sys.executable, "-m", "llmchat.app.cli", *args]


def cli(
    home: Path | str,
    *args: str,
    timeout: float = 300,
    fault: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    e = env_for(home, **({"LLMCHAT_FAULT": fault} if fault else {}))
    if env:
        e.update(env)
    return subprocess.run(
        cli_cmd(*args, fault=fault),
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
        errors="replace",
    )


def cli_json(home: Path | str, *args: str, timeout: float = 300) -> Any:
    p = cli(home, *args, timeout=timeout)
    assert p.returncode == 0, f"llmchat {' '.join(args)[:200]} -> {p.returncode}: {p.stderr[-2000:]}"
    return json.loads(p.stdout)


def assert_one_line_error(
    p: subprocess.CompletedProcess[str], code: int | tuple[int, ...] = 1, contains: str | Sequence[str] = ()
) -> str:
    """The CLI failed the documented way: exit `code`, one line on stderr, no traceback."""
    codes = (code,) if isinstance(code, int) else code
    err = p.stderr
    assert p.returncode in codes, f"exit {p.returncode} (want {codes}); stderr: {err[-1500:]}"
    assert "Traceback" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"want one line on stderr, got {len(lines)}: {err[-1500:]}"
    assert lines[0].startswith("llmchat: error:"), lines[0]
    for c in [contains] if isinstance(contains, str) else contains:
        assert c.lower() in lines[0].lower(), f"{c!r} not in {lines[0]!r}"
    return lines[0]


# ---------------------------------------------------------------------------- snapshot files
def seg_files(home: Path | str) -> list[Path]:
    root = Path(home) / "snapshots"
    return sorted(root.glob("*/*/*.seg")) if root.is_dir() else []


def temp_files(home: Path | str) -> list[Path]:
    root = Path(home) / "snapshots"
    return sorted(root.glob("*/*/.*.tmp")) if root.is_dir() else []


def quarantined(home: Path | str) -> list[Path]:
    q = Path(home) / "snapshots" / "quarantine"
    return sorted(q.iterdir()) if q.is_dir() else []


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    data = path.read_bytes()
    magic, _v, hlen, _sum = _FIXED.unpack_from(data)
    assert magic == MAGIC
    return json.loads(data[_FIXED.size : _FIXED.size + hlen]), _FIXED.size + hlen


def flip_byte(path: Path, where: str = "payload", rng: random.Random | None = None) -> int:
    """Flip one byte of the payload (or header JSON, or magic); returns its offset."""
    rng = rng or random.Random(0)
    _header, off = read_header(path)
    size = path.stat().st_size
    if where == "payload":
        pos = rng.randrange(off, size)
    elif where == "header":
        pos = rng.randrange(_FIXED.size, off)
    else:
        pos = rng.randrange(0, 8)
    with path.open("r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))
    return pos


def truncate(path: Path, keep: float | int = 0.5) -> int:
    size = path.stat().st_size
    n = int(size * keep) if isinstance(keep, float) else keep
    with path.open("r+b") as f:
        f.truncate(n)
    return n


def rewrite_header(path: Path, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Edit the header JSON and re-seal it with a valid header checksum, payload untouched:
    the file is well-formed, only what it claims differs."""
    data = path.read_bytes()
    magic, version, hlen, _ = _FIXED.unpack_from(data)
    header = json.loads(data[_FIXED.size : _FIXED.size + hlen])
    change(header)
    hjson = json.dumps(header, separators=(",", ":")).encode()
    fixed = _FIXED.pack(magic, version, len(hjson), xxhash.xxh3_64_intdigest(hjson))
    tmp = path.with_name(path.name + ".edit")
    tmp.write_bytes(fixed + hjson + data[_FIXED.size + hlen :])
    os.replace(tmp, path)
    return header


def foreign_fingerprint(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A header change that makes the file look made under another model/build/setting,
    consistently (fingerprint and its id both changed, as a real foreign file would be)."""
    import hashlib

    def change(h: dict[str, Any]) -> None:
        fp = dict(h["fingerprint"])
        fp[key] = value
        h["fingerprint"] = fp
        h["fingerprint_id"] = hashlib.sha256(
            json.dumps(fp, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()

    return change


# ---------------------------------------------------------------------------- the database
def connect(home: Path | str) -> sqlite3.Connection:
    db = sqlite3.connect(str(Path(home) / "llmchat.db"), timeout=30)
    db.row_factory = sqlite3.Row
    return db


def rows(home: Path | str, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
    db = connect(home)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def log_ops(home: Path | str) -> list[tuple[str, str, str | None, str]]:
    return [
        (r["op"], r["outcome"], r["segment_id"], r["detail"])
        for r in rows(home, "SELECT * FROM snapshot_log ORDER BY id")
    ]


@dataclass
class Turn:
    """A turn the CLI reported finished (exit 0, --json): it must never be lost."""

    session: int
    user_node: int
    node: int
    user_text: str
    reply: str


def check_invariants(
    home: Path | str,
    turns: Sequence[Turn] = (),
    *,
    verify_files: bool = True,
    known_damaged: Collection[str] = (),
) -> list[str]:
    """Everything that must hold in a data dir at any moment, even right after a kill -9.
    Returns the problems found (empty: all good). Reads the database directly.
    `known_damaged`: segments the test damaged itself that no restore has read yet (a restore
    stops at the first segment it lacks, so one damaged further along the path can wait
    for doctor or a later restore)."""
    from llmchat.sessions.models import unpack_tokens
    from llmchat.sessions.snapshots import SnapshotStore

    home = Path(home)
    problems: list[str] = []
    db = connect(home)
    try:
        ic = db.execute("PRAGMA integrity_check").fetchone()[0]
        if ic != "ok":
            problems.append(f"integrity_check: {ic}")
        fk = db.execute("PRAGMA foreign_key_check").fetchall()
        if fk:
            problems.append(f"foreign_key_check: {[tuple(r) for r in fk][:5]}")
        nodes = {r["id"]: r for r in db.execute("SELECT * FROM nodes")}
        for nid, r in nodes.items():
            if r["role"] == "assistant":
                p = nodes.get(r["parent_id"])
                if p is None or p["role"] != "user" or p["session_id"] != r["session_id"]:
                    problems.append(f"reply {nid} has no user message as parent")
                if r["status"] not in ("done", "stopped", "partial"):
                    problems.append(f"reply {nid} has status {r['status']!r}")
            base = nodes.get(r["base_id"]) if r["base_id"] is not None else None
            if r["base_id"] is not None and base is None:
                problems.append(f"node {nid} has a missing base {r['base_id']}")
            ntok = len(unpack_tokens(r["tokens"]))
            want = (base["ctx_len"] if base is not None else 0) + ntok
            if r["ctx_len"] != want:
                problems.append(f"node {nid} ctx_len {r['ctx_len']} != base + tokens {want}")
        for s in db.execute("SELECT id, active_leaf FROM sessions"):
            leaf = s["active_leaf"]
            if leaf is not None and (leaf not in nodes or nodes[leaf]["session_id"] != s["id"]):
                problems.append(f"session {s['id']} active leaf {leaf} is not one of its nodes")
        for t in turns:
            r = nodes.get(t.node)
            u = nodes.get(t.user_node)
            if r is None or u is None:
                problems.append(f"LOST finished turn: session {t.session} node {t.node}")
                continue
            if r["content"] != t.reply or r["parent_id"] != t.user_node or r["session_id"] != t.session:
                problems.append(f"finished turn {t.node} changed: {r['content']!r} != {t.reply!r}")
        snaps = SnapshotStore(home / "snapshots")
        segs = {r["id"]: r for r in db.execute("SELECT * FROM segments")}
        for sid, s in segs.items():
            path = snaps.abs_path(s["file"])
            if not path.exists():
                problems.append(f"segment {sid[:12]} indexed but its file is missing")
                continue
            if verify_files and sid not in known_damaged:
                why = snaps.verify(s["file"])
                if why is not None:
                    problems.append(f"segment {sid[:12]} indexed but damaged: {why}")
        for r in db.execute("SELECT node_id, segment_id FROM node_segments"):
            if r["segment_id"] not in segs:
                problems.append(
                    f"node {r['node_id']} links a segment not in the index {r['segment_id'][:12]}"
                )
            if r["node_id"] not in nodes:
                problems.append(f"a node_segments row names a missing node {r['node_id']}")
    finally:
        db.close()
    return problems


# ---------------------------------------------------------------------------- the fault runner
def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)


def arm(spec: str) -> None:
    """Install the kill point `spec` ("POINT:K") in this process (the CLI runs afterwards)."""
    point, _, k = spec.partition(":")
    target = int(k or 1)
    if point not in FAULT_POINTS:
        raise SystemExit(f"unknown fault point {point!r}; known: {', '.join(FAULT_POINTS)}")
    count = [0]

    def hit() -> bool:
        count[0] += 1
        return count[0] == target

    if point == "decode":
        from llmchat.engine.runtime import Engine

        orig_decode = Engine._decode

        def _decode(self: Any, chunk: Any, *, logits_last: bool) -> None:
            if hit():
                _die()
            orig_decode(self, chunk, logits_last=logits_last)

        Engine._decode = _decode  # type: ignore[method-assign]
    elif point in ("seg-write", "seg-renamed"):
        from llmchat.sessions import snapshots

        if point == "seg-write":
            orig_write_all = snapshots._write_all
            calls = [0]

            def _write_all(fd: int, data: Any) -> None:
                calls[0] += 1
                if calls[0] % 3 == 0 and hit():  # the payload part of a write
                    view = memoryview(data)
                    os.write(fd, view[: max(1, len(view) // 2)])
                    os.fsync(fd)
                    _die()
                orig_write_all(fd, data)

            snapshots._write_all = _write_all
        else:
            orig_replace = os.replace

            def replace(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
                orig_replace(src, dst, *a, **kw)
                if str(dst).endswith(".seg") and hit():
                    _die()

            snapshots.os.replace = replace  # type: ignore[attr-defined]  # only the CLI runs here
    elif point == "sql-mid-commit":
        from llmchat.sessions.store import Store

        orig_init = Store.__init__

        def __init__(self: Any, path: Any) -> None:
            orig_init(self, path)

            def trace(sql: str) -> None:
                if sql.strip().upper() == "COMMIT" and hit():
                    delay = random.uniform(0, 0.0003)

                    def later() -> None:
                        t = time.perf_counter() + delay
                        while time.perf_counter() < t:
                            pass
                        _die()

                    threading.Thread(target=later, daemon=True).start()

            self.db.set_trace_callback(trace)

        Store.__init__ = __init__  # type: ignore[method-assign]
    else:  # sql-commit, sql-committed: around the outermost transaction of Store.tx
        from llmchat.sessions.store import Store

        orig_tx = Store.tx

        @contextlib.contextmanager
        def tx(self: Any) -> Any:
            outer = not self.db.in_transaction
            with orig_tx(self) as db:
                yield db
                if outer and point == "sql-commit" and hit():
                    _die()
            if outer and point == "sql-committed" and hit():
                _die()

        Store.tx = tx  # type: ignore[method-assign]


def _runner_main() -> int:
    sys.path.insert(0, str(ROOT))
    spec = os.environ.get("LLMCHAT_FAULT", "")
    if spec:
        arm(spec)
    from llmchat.app.cli import main

    return main(sys.argv[1:])


# ---------------------------------------------------------------------------- the kill loop
PROMPTS = [
    "Hi! Tell me something about the sea.",
    "What is 2 + 2?",
    "Name three colours.",
    "Write one short sentence about cats.",
    "Why is the sky blue? Answer briefly.",
    "Continue the story.",
    "Say hello in French.",
    "List two prime numbers.",
    "What did I ask first?",
    "Give me a haiku about autumn.",
]
LONG_PROMPT = " ".join(f"Item {i}: the quick brown fox jumps over the lazy dog." for i in range(60))
MODES = (
    "random",
    "random",
    "decode",
    "seg-write",
    "seg-renamed",
    "sql-commit",
    "sql-mid-commit",
    "sql-committed",
)
CORRUPTIONS = ("flip-payload", "flip-header", "truncate", "foreign-model", "foreign-build", "delete")


@dataclass
class LoopStats:
    iterations: int = 0
    kills: int = 0
    finished_runs: int = 0  # victims that finished before their kill point
    turns_checked: int = 0
    corruptions_injected: int = 0
    corruptions_refused: int = 0  # refused by a restore, or quarantined/dropped by doctor
    lost_turns: int = 0
    problems: list[str] = field(default_factory=list)
    modes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"iterations {self.iterations}, kills {self.kills} (finished before the kill {self.finished_runs}), "
            f"turns checked {self.turns_checked}, corruptions injected {self.corruptions_injected} / refused "
            f"{self.corruptions_refused}, lost turns {self.lost_turns}, problems {len(self.problems)}, "
            f"{self.seconds:.0f} s; modes {self.modes}"
        )


def _turn_from(res: dict[str, Any], text: str) -> Turn:
    return Turn(
        session=res["session"],
        user_node=res["user_node"],
        node=res["node"],
        user_text=text,
        reply=res["reply"],
    )


def _active_path_segments(home: Path) -> list[str]:
    """Files of the segments on the most recent session's active path, root first."""
    db = connect(home)
    try:
        s = db.execute(
            "SELECT id, active_leaf FROM sessions ORDER BY updated DESC, id DESC LIMIT 1"
        ).fetchone()
        if s is None or s["active_leaf"] is None:
            return []
        path = []
        nid = s["active_leaf"]
        while nid is not None:
            r = db.execute("SELECT id, base_id FROM nodes WHERE id = ?", (nid,)).fetchone()
            if r is None:
                break
            path.append(r["id"])
            nid = r["base_id"]
        files = []
        for nid in reversed(path):
            for r in db.execute(
                "SELECT s.file FROM node_segments ns JOIN segments s ON s.id = ns.segment_id "
                "WHERE ns.node_id = ?",
                (nid,),
            ):
                files.append(r["file"])
        return files
    finally:
        db.close()


def corrupt_one(home: Path, kind: str, rng: random.Random) -> str | None:
    """Damage one snapshot on the active path; returns its segment id (None if none exists)."""
    files = _active_path_segments(home)
    if not files:
        return None
    rel = files[0] if rng.random() < 0.6 else rng.choice(files)  # the first one is always read
    path = home / "snapshots" / rel
    if not path.exists():
        return None
    seg_id = path.stem
    if kind == "flip-payload":
        flip_byte(path, "payload", rng)
    elif kind == "flip-header":
        flip_byte(path, "header", rng)
    elif kind == "truncate":
        truncate(path, rng.uniform(0.05, 0.95))
    elif kind == "foreign-model":
        rewrite_header(path, foreign_fingerprint("model_digest", "0" * 64))
    elif kind == "foreign-build":
        rewrite_header(path, foreign_fingerprint("llama_build", "another-build"))
    elif kind == "delete":
        path.unlink()
    return seg_id


def fault_loop(
    home: Path | str,
    iterations: int,
    seed: int,
    *,
    log: Callable[[str], None] = lambda m: None,
    max_tokens: tuple[int, int] = (4, 20),
    corrupt_every: int = 4,
    doctor_every: int = 1,
    extra_args: Sequence[str] = (),
) -> LoopStats:
    """kill -9 real `llmchat ask` processes at random and at chosen points, then check that
    every finished turn is still there, the database and snapshots are whole, doctor finds
    nothing it cannot name, and the next `ask --continue` works."""
    home = Path(home)
    rng = random.Random(seed)
    st = LoopStats()
    t_start = time.perf_counter()
    turns: list[Turn] = []
    corrupted: set[str] = set()
    durations: list[float] = []

    def ask(text: str, *args: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        res = cli_json(
            home,
            "ask",
            text,
            "--json",
            "--max-tokens",
            str(rng.randint(*max_tokens)),
            "--seed",
            str(rng.randrange(1 << 20)),
            *extra_args,
            *args,
        )
        durations.append(time.perf_counter() - t0)
        turns.append(_turn_from(res, text))
        return res

    ask(rng.choice(PROMPTS))
    for it in range(iterations):
        st.iterations += 1
        mode = MODES[it] if it < len(MODES) else rng.choice(MODES)  # every kill point at least once
        st.modes[mode] = st.modes.get(mode, 0) + 1
        text = LONG_PROMPT if rng.random() < 0.2 else rng.choice(PROMPTS)
        where: list[str] = ["--continue"]
        r = rng.random()
        if r < 0.1:
            where = []  # a new session
        elif r < 0.25:
            ids = [t.user_node for t in turns] + [t.node for t in turns]
            where = ["--parent", str(rng.choice(ids))]  # a branch
        args = [
            "ask",
            text,
            "--json",
            "--max-tokens",
            str(rng.randint(*max_tokens)),
            "--seed",
            str(rng.randrange(1 << 20)),
            *extra_args,
            *where,
        ]
        if mode == "random":
            typical = sum(durations[-5:]) / len(durations[-5:])
            delay = rng.uniform(0.0, typical * 1.1)
            p = subprocess.Popen(
                cli_cmd(*args),
                env=env_for(home),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=str(ROOT),
            )
            try:
                p.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
            out, err = p.communicate(timeout=120)
            rc = p.returncode
            what = f"random kill at {delay:.2f}s"
        else:
            if mode == "decode":
                k = rng.randint(1, 12)
            elif mode in ("seg-write", "seg-renamed"):
                k = rng.randint(1, 4)
            else:
                k = rng.randint(1, 10)
            fault = f"{mode}:{k}"
            p2 = cli(home, *args, fault=fault, timeout=300)
            out, err, rc = p2.stdout, p2.stderr, p2.returncode
            what = f"kill point {fault}"
        if rc == 0:
            st.finished_runs += 1
            turns.append(_turn_from(json.loads(out), text))
        elif rc == -signal.SIGKILL:
            st.kills += 1
        else:
            st.problems.append(f"iteration {it}: victim exited {rc}: {err.strip()[-300:]}")
        # 1. the database and the index, directly
        probs = check_invariants(home, turns, known_damaged=corrupted)
        # 2. doctor: finds no damage, or only what we damaged on purpose
        if doctor_every and it % doctor_every == 0:
            d = cli(home, "doctor", "--json", *extra_args)
            if d.returncode != 0:
                probs.append(f"doctor exited {d.returncode}: {d.stderr.strip()[-300:]}")
            else:
                rep = json.loads(d.stdout)
                if rep["integrity"] != "ok":
                    probs.append(f"doctor integrity: {rep['integrity']}")
                for dmg in rep["damaged"]:
                    if dmg["segment"] in corrupted:
                        st.corruptions_refused += 1
                        corrupted.discard(dmg["segment"])
                    else:
                        probs.append(f"doctor found unexplained damage: {dmg}")
                if rep["missing"] and not corrupted:
                    probs.append(f"doctor found {rep['missing']} missing file(s) nobody deleted")
                if temp_files(home):
                    probs.append(f"doctor left temp files: {temp_files(home)}")
        # 3. sometimes damage a snapshot the next turn will read
        kind = None
        if corrupt_every and rng.randrange(corrupt_every) == 0:
            kind = rng.choice(CORRUPTIONS)
            sid = corrupt_one(home, kind, rng)
            if sid is not None:
                st.corruptions_injected += 1
                corrupted.add(sid)
            else:
                kind = None
        # 4. the next turn works, restoring what can be trusted and re-prefilling the rest
        last_log = rows(home, "SELECT COALESCE(MAX(id), 0) FROM snapshot_log")[0][0]
        try:
            res = ask(rng.choice(PROMPTS), "--continue")
        except AssertionError as e:
            probs.append(f"ask --continue failed: {e}")
            res = None
        refused_now = {
            r["segment_id"]
            for r in rows(
                home, "SELECT segment_id FROM snapshot_log WHERE op = 'refuse' AND id > ?", (last_log,)
            )
        }
        for sid in refused_now:
            if sid in corrupted:
                st.corruptions_refused += 1
                corrupted.discard(sid)
            else:
                probs.append(f"segment {sid[:12]} refused though nobody damaged it")
        if res is not None:
            for ref in res["restore"]["refused"]:
                if ref["segment"] not in refused_now:
                    probs.append(f"refusal not in snapshot_log: {ref}")
        st.turns_checked += len(turns)
        lost = [p for p in probs if p.startswith("LOST")]
        st.lost_turns += len(lost)
        for p in probs:
            st.problems.append(f"iteration {it} ({what}{', ' + kind if kind else ''}): {p}")
        log(
            f"[{it + 1}/{iterations}] {what}: rc {rc}{', corrupted ' + kind if kind else ''}"
            f"{'' if not probs else ' PROBLEMS: ' + '; '.join(probs)}"
        )
    # the end: doctor once more; every damaged file must now be refused or quarantined
    d = cli(home, "doctor", "--json", *extra_args)
    if d.returncode == 0:
        rep = json.loads(d.stdout)
        for dmg in rep["damaged"]:
            if dmg["segment"] in corrupted:
                st.corruptions_refused += 1
                corrupted.discard(dmg["segment"])
    # deleted or damaged segments that no later turn read and doctor cannot see any more
    # (dropped from the index as "missing" by doctor, or refused as missing) count as handled
    # when the index no longer names them
    indexed = {r["id"] for r in rows(home, "SELECT id FROM segments")}
    for sid in list(corrupted):
        if sid not in indexed:
            st.corruptions_refused += 1
            corrupted.discard(sid)
    for sid in corrupted:
        st.problems.append(f"damaged segment {sid[:12]} still indexed and never refused")
    probs = check_invariants(home, turns)
    st.problems += [f"final: {p}" for p in probs]
    st.lost_turns += sum(1 for p in probs if p.startswith("LOST"))
    st.seconds = time.perf_counter() - t_start
    return st


if __name__ == "__main__":
    sys.exit(_runner_main())
