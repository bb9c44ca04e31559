"""The headless CLI contract, run as real processes on the real model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

KEYS = {
    "session",
    "user_node",
    "node",
    "reply",
    "context_tokens",
    "restore",
    "prefill",
    "generate",
    "reprefill_estimate_ms",
}


def test_ask_twice_with_continue_restores_from_disk(_home: Path) -> None:
    r1 = run_cli("ask", "What is a lighthouse?", "--json", "--temp", "0", "--max-tokens", "40", home=_home)
    assert r1.returncode == 0, r1.stderr
    j1 = json.loads(r1.stdout)
    assert set(j1) >= KEYS and {"tokens", "ms", "segments", "refused"} <= set(j1["restore"])
    assert j1["reply"] and j1["restore"]["tokens"] == 0
    r2 = run_cli(
        "ask", "Who keeps it?", "--continue", "--json", "--temp", "0", "--max-tokens", "8", home=_home
    )
    assert r2.returncode == 0, r2.stderr
    j2 = json.loads(r2.stdout)
    assert j2["session"] == j1["session"]
    assert j2["restore"]["tokens"] == j1["context_tokens"]  # the first turn came back from disk
    assert j2["restore"]["refused"] == []
    assert j2["reprefill_estimate_ms"] > j2["restore"]["ms"]
    # branch from the first reply with --parent
    r3 = run_cli(
        "ask", "Another question", "--parent", str(j1["node"]), "--json", "--max-tokens", "4", home=_home
    )
    j3 = json.loads(r3.stdout)
    show = json.loads(run_cli("show", str(j1["session"]), "--json", home=_home).stdout)
    kids = [n["id"] for n in show["nodes"] if n["parent"] == j1["node"]]
    assert kids == [j2["user_node"], j3["user_node"]]


def test_streaming_and_session_commands(_home: Path, tmp_path: Path) -> None:
    r = run_cli("ask", "Say hi", "--max-tokens", "6", "--system", "Be nice.", home=_home)
    assert r.returncode == 0 and r.stdout.strip()
    assert "[session 1" in r.stderr
    ls = json.loads(run_cli("sessions", "--json", home=_home).stdout)
    assert ls[0]["id"] == 1 and ls[0]["turns"] == 1 and ls[0]["snapshot_bytes"] > 0
    tree = run_cli("show", "1", "--tree", home=_home).stdout
    assert "system: Be nice." in tree and "user: Say hi" in tree
    md = run_cli("export", "1", "--format", "md", home=_home).stdout
    assert "## You" in md and "Say hi" in md
    out = tmp_path / "s.json"
    assert run_cli("export", "1", "--format", "json", "-o", str(out), home=_home).returncode == 0
    imp = run_cli("import", str(out), home=_home)
    assert imp.returncode == 0 and "session 2" in imp.stdout
    found = run_cli("sessions", "--search", "hi", home=_home).stdout
    assert "Say hi" in found
    assert run_cli("rm", "2", home=_home).returncode == 0
    assert [s["id"] for s in json.loads(run_cli("sessions", "--json", home=_home).stdout)] == [1]
    doc = json.loads(run_cli("doctor", "--json", home=_home).stdout)
    assert doc["integrity"] == "ok" and doc["damaged"] == [] and doc["ok"] >= 3
    assert doc["log_summary"]["create"]["ok"] >= 3


def test_errors_are_one_line(_home: Path, tmp_path: Path) -> None:
    cases = [
        (("ask",), 2),
        (("show", "abc"), 2),
        (("bench", "--tokens", "x"), 2),
        (("show", "99"), 1),
        (("ask", "hi", "--model", str(tmp_path / "nope.gguf")), 1),
        (("ask", "hi", "--model", str(tmp_path)), 1),
        (("ask", "", "--max-tokens", "2"), 1),
        (("import", str(tmp_path / "missing.json")), 1),
    ]
    for args, code in cases:
        r = run_cli(*args, home=_home)
        assert r.returncode == code, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("llmchat: error:"), (args, r.stderr)
        assert "Traceback" not in r.stderr


def test_bench_json(_home: Path) -> None:
    r = run_cli("bench", "--tokens", "64,128", "--json", home=_home)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["model"] and [row["tokens"] for row in j["rows"]] == [64, 128]
    for row in j["rows"]:
        assert {"reprefill_ms", "restore_ms", "ratio", "capture_ms", "state_bytes"} <= set(row)
        assert row["exact"] is True and row["state_bytes"] > 0


def test_two_processes_append_to_one_session(_home: Path) -> None:
    assert run_cli("ask", "Start", "--max-tokens", "4", home=_home).returncode == 0
    env_cmd = [
        sys.executable,
        "-m",
        "llmchat.app.cli",
        "ask",
        "--session",
        "1",
        "--max-tokens",
        "6",
        "--json",
    ]
    import os

    env = {**os.environ, "LLMCHAT_HOME": str(_home)}
    procs = [
        subprocess.Popen(
            [*env_cmd[:4], f"concurrent {i}", *env_cmd[4:]],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    show = json.loads(run_cli("show", "1", "--json", home=_home).stdout)
    users = [n["content"] for n in show["nodes"] if n["role"] == "user"]
    assert sorted(users) == ["Start", "concurrent 0", "concurrent 1"]
    assert sum(n["role"] == "assistant" for n in show["nodes"]) == 3
    doc = json.loads(run_cli("doctor", "--json", home=_home).stdout)
    assert doc["integrity"] == "ok" and doc["damaged"] == []
