"""Issue 4, bad input: each gets one clear line on stderr (exit 1 runtime, 2 usage), never a
traceback, and nothing already stored is lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import faults_util as fu
import pytest

ASK = ("--max-tokens", "6", "--temp", "0", "--seed", "1")


@pytest.fixture(scope="module")
def chat_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A data dir holding one finished turn, shared by the tests that must not damage it
    (each checks it is intact afterwards)."""
    home = tmp_path_factory.mktemp("bad") / "home"
    return home, fu.cli_json(home, "ask", "Hello there", "--json", *ASK)


def _intact(home: Path, first: dict[str, Any]) -> None:
    assert fu.check_invariants(home, [fu._turn_from(first, "Hello there")]) == []


def _sessions(home: Path) -> list[dict[str, Any]]:
    return fu.cli_json(home, "sessions", "--json")


# ---------------------------------------------------------------------------- the model
@pytest.mark.parametrize("kind", ["missing", "directory", "text", "truncated-gguf"])
def test_bad_model_path(tmp_path: Path, chat_home: tuple[Path, dict[str, Any]], kind: str) -> None:
    home, first = chat_home
    if kind == "missing":
        model, want = "/nonexistent/model.gguf", "not found"
    elif kind == "directory":
        model, want = str(tmp_path), "directory"
    elif kind == "text":
        (tmp_path / "notes.gguf").write_text("just some text\n")
        model, want = str(tmp_path / "notes.gguf"), "not a gguf"
    else:
        (tmp_path / "cut.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
        model, want = str(tmp_path / "cut.gguf"), "could not load"
    for args in (
        ("ask", "hi", "--continue"),
        ("import", str(tmp_path / "x.json")),
        ("bench", "--tokens", "64"),
    ):
        if args[0] == "import":
            (tmp_path / "x.json").write_text(
                fu.cli(home, "export", str(first["session"]), "--format", "json").stdout
            )
        p = fu.cli(home, *args, "--model", model)
        fu.assert_one_line_error(p, 1, want)
    _intact(home, first)


def test_template_fallback_is_chatml() -> None:
    from llmchat.engine.template import ChatTemplate, Message

    t = ChatTemplate(None)
    assert t.is_fallback and "ChatML" in t.note
    msgs = [Message("system", "Be brief."), Message("user", "Hi")]
    assert t.render(msgs, add_generation_prompt=True) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert t.generation_prompt(msgs) == "<|im_start|>assistant\n"
    assert t.closing(msgs, "Hello!") == "<|im_end|>\n"
    assert ChatTemplate("").is_fallback


def test_broken_template_is_one_line_error() -> None:
    from llmchat.engine.errors import EngineError
    from llmchat.engine.template import ChatTemplate, Message

    with pytest.raises(EngineError) as e:
        ChatTemplate("{% for m in messages %}")
    assert "\n" not in str(e.value)
    t = ChatTemplate("{{ raise_exception('no system role') }}")
    with pytest.raises(EngineError) as e2:
        t.render([Message("user", "x")], add_generation_prompt=True)
    assert "no system role" in str(e2.value)


# ---------------------------------------------------------------------------- the message
def test_prompt_longer_than_context(chat_home: tuple[Path, dict[str, Any]]) -> None:
    home, first = chat_home
    before = _sessions(home)
    p = fu.cli(home, "ask", "word " * 2000, "--continue", "--n-ctx", "512", *ASK)
    fu.assert_one_line_error(p, 1, "context")
    assert _sessions(home) == before
    _intact(home, first)
    # the session still works afterwards
    res = fu.cli_json(home, "ask", "Still there?", "--continue", "--json", *ASK)
    assert res["reply"] and res["session"] == first["session"]


def test_refused_first_message_leaves_no_empty_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    for text, extra in (("", ()), ("   \n ", ()), ("word " * 2000, ("--n-ctx", "512"))):
        p = fu.cli(home, "ask", text, *extra, *ASK)
        fu.assert_one_line_error(p, 1)
    assert [s["messages"] for s in _sessions(home)] == [2]


@pytest.mark.parametrize("text", ["", "   ", "\n\t\n", "\x01\x02\x7f"])
def test_empty_message(chat_home: tuple[Path, dict[str, Any]], text: str) -> None:
    home, first = chat_home
    p = fu.cli(home, "ask", text, "--continue", *ASK)
    fu.assert_one_line_error(p, 1, "empty message")
    _intact(home, first)


@pytest.mark.parametrize("n_ctx", ["8", "300"])
def test_small_n_ctx_never_aborts(tmp_path: Path, n_ctx: str) -> None:
    home = tmp_path / "home"
    text = "Hello there" if n_ctx == "8" else "word " * 330  # fits 512 (the padded n_ctx), not n_batch 300
    p = fu.cli(home, "ask", text, "--n-ctx", n_ctx, *ASK)
    assert p.returncode in (0, 1, 2), p.stderr[-500:]
    if p.returncode:
        fu.assert_one_line_error(p, (1, 2))


def test_bad_n_ctx_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fu.assert_one_line_error(fu.cli(home, "ask", "hi", "--n-ctx", "-5", *ASK), (1, 2))
    fu.assert_one_line_error(fu.cli(home, "ask", "hi", "--n-ctx", "lots", *ASK), 2)
    fu.assert_one_line_error(fu.cli(home, "ask", "hi", "--kv-type", "q3", *ASK), 2)
    fu.assert_one_line_error(fu.cli(home, "ask", "hi", "--max-tokens", "0"), 2)


def test_one_megabyte_paste_in_process(engine: Any, tmp_path: Path) -> None:
    """1 MB of text (too big for a command line: through the service, as the TUI sends it)."""
    from llmchat.engine.runtime import Sampling
    from llmchat.sessions.chat import ChatError, ChatService
    from llmchat.sessions.snapshots import SnapshotStore
    from llmchat.sessions.store import Store

    engine.clear()
    home = tmp_path / "home"
    svc = ChatService(Store(home / "llmchat.db"), SnapshotStore(home / "snapshots"), engine)
    s = svc.new_session()
    first = svc.send(s.id, "Hello there", sampling=Sampling(temperature=0, max_tokens=6))
    paste = ("All work and no play makes Jack a dull boy.\n" * 24000)[: 1 << 20]
    assert len(paste) == 1 << 20
    with pytest.raises(ChatError) as e:
        svc.send(s.id, paste, sampling=Sampling(temperature=0, max_tokens=6))
    msg = str(e.value)
    assert "\n" not in msg and "context holds" in msg
    assert [n.id for n in svc.store.nodes(s.id)] == [first.user_node.id, first.reply_node.id]
    again = svc.send(s.id, "Still there?", sampling=Sampling(temperature=0, max_tokens=6))
    assert again.reply.strip()


def test_large_paste_on_the_command_line(chat_home: tuple[Path, dict[str, Any]]) -> None:
    """~120 KB (close to the kernel's 128 KB limit for one argument)."""
    home, first = chat_home
    p = fu.cli(home, "ask", "All work and no play. " * 5500, "--continue", *ASK)
    fu.assert_one_line_error(p, 1, "context holds")
    _intact(home, first)


def test_control_characters_and_invalid_utf8(tmp_path: Path) -> None:
    home = tmp_path / "home"
    raw = b"\xff\xfe bad \x01 \x1b[31mred\x1b[0m \xc3\x28 caf\xc3\xa9\r\nline2"
    env = fu.env_for(home)
    p = subprocess.run(
        [sys.executable, "-m", "llmchat.app.cli", "ask", raw, "--json", *ASK],
        env=env,
        capture_output=True,
        cwd=str(fu.ROOT),
    )
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    content = fu.rows(home, "SELECT content FROM nodes WHERE id = ?", (res["user_node"],))[0]["content"]
    content.encode("utf-8")  # valid UTF-8 (no surrogates)
    assert not any(ord(c) < 32 and c not in "\n\t" for c in content), repr(content)
    assert "bad" in content and "café" in content and "line2" in content and "\r" not in content
    shown = fu.cli(home, "show", str(res["session"]))
    assert shown.returncode == 0 and "café" in shown.stdout
    exp = fu.cli(home, "export", str(res["session"]), "--format", "json")
    assert exp.returncode == 0 and json.loads(exp.stdout)["nodes"][0]["content"] == content


# ---------------------------------------------------------------------------- import
@pytest.mark.parametrize(
    "data,want",
    [
        (b"{not json", "not valid json"),
        (b"", "not valid json"),
        (b"\xff\xfe\x00garbage", "not valid json"),
        (b"[1, 2, 3]", "not an llmchat export"),
        (b'{"title": "chat"}', "not an llmchat export"),
        (b'{"llmchat_export": 2, "nodes": []}', "not an llmchat export"),
        (b'{"llmchat_export": 1, "nodes": [{"id": 1, "role": "wizard", "content": "x"}]}', "role"),
        (b'{"llmchat_export": 1, "nodes": [{"id": "x", "role": "user"}]}', "not an llmchat export"),
    ],
)
def test_import_bad_files(
    tmp_path: Path, chat_home: tuple[Path, dict[str, Any]], data: bytes, want: str
) -> None:
    home, first = chat_home
    f = tmp_path / "in.json"
    f.write_bytes(data)
    before = _sessions(home)
    fu.assert_one_line_error(fu.cli(home, "import", str(f)), 1, want)
    assert _sessions(home) == before
    _intact(home, first)


def test_import_missing_file(chat_home: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    home, _ = chat_home
    fu.assert_one_line_error(fu.cli(home, "import", str(tmp_path / "nope.json")), 1, "cannot read")
    fu.assert_one_line_error(fu.cli(home, "import", str(tmp_path)), 1, "cannot read")


def test_import_too_long_is_all_or_nothing(tmp_path: Path, chat_home: tuple[Path, dict[str, Any]]) -> None:
    home, _ = chat_home
    doc = {
        "llmchat_export": 1,
        "session": {"title": "big"},
        "nodes": [
            {"id": 1, "parent": None, "role": "user", "content": "Hi"},
            {"id": 2, "parent": 1, "role": "assistant", "content": "Hello!"},
            {"id": 3, "parent": 2, "role": "user", "content": "word " * 9000},
        ],
    }
    f = tmp_path / "big.json"
    f.write_text(json.dumps(doc))
    before = _sessions(home)
    fu.assert_one_line_error(fu.cli(home, "import", str(f)), 1, "context")
    assert _sessions(home) == before


def test_import_roundtrip_still_works(chat_home: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    home, first = chat_home
    out = tmp_path / "e.json"
    assert fu.cli(home, "export", str(first["session"]), "--format", "json", "-o", str(out)).returncode == 0
    p = fu.cli(home, "import", str(out))
    assert p.returncode == 0 and "imported as session" in p.stdout, p.stderr


# ---------------------------------------------------------------------------- the data dir
def test_data_dir_under_a_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    home = f / "sub"
    for args in (("ask", "hi", *ASK), ("sessions",), ("doctor",), ("gc", "--budget", "1M"), ("show", "1")):
        fu.assert_one_line_error(fu.cli(home, *args), 1, "data dir")


@pytest.fixture
def readonly_home(tmp_path: Path) -> Any:
    """A data dir with a finished turn, then made read-only by a read-only bind mount."""
    home = tmp_path / "home"
    first = fu.cli_json(home, "ask", "Hello there", "--json", *ASK)
    p = subprocess.run(["mount", "--bind", str(home), str(home)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {p.stderr.decode().strip()}")
    try:
        p = subprocess.run(["mount", "-o", "remount,ro,bind", str(home)], capture_output=True)
        if p.returncode != 0:
            pytest.skip(f"cannot remount read-only: {p.stderr.decode().strip()}")
        yield home, first
    finally:
        subprocess.run(["umount", "-l", str(home)], capture_output=True)


def test_read_only_data_dir(readonly_home: tuple[Path, dict[str, Any]]) -> None:
    home, first = readonly_home
    for args in (("ask", "hi", "--continue", *ASK), ("ask", "hi", *ASK), ("gc", "--budget", "1M")):
        # "cannot open the session database <path>: ..." or "the data dir <path> is not writable"
        fu.assert_one_line_error(fu.cli(home, *args), 1, str(home))
    subprocess.run(["umount", "-l", str(home)], capture_output=True)  # SQLite cannot read a WAL db on ro
    _intact(home, first)


# ---------------------------------------------------------------------------- other usage errors
def test_usage_errors_exit_2_one_line(chat_home: tuple[Path, dict[str, Any]]) -> None:
    home, first = chat_home
    for args in (
        ("ask",),
        ("ask", "x", "--session", "abc"),
        ("ask", "x", "--session", "1", "--continue"),
        ("gc", "--budget", "lots"),
        ("frobnicate",),
        ("bench", "--tokens", "a,b"),
        ("export",),
    ):
        fu.assert_one_line_error(fu.cli(home, *args), 2)
    for args in (
        ("ask", "x", "--session", "999", *ASK),
        ("ask", "x", "--parent", "999", *ASK),
        ("show", "999"),
        ("export", "999"),
        ("rm", "999"),
    ):
        fu.assert_one_line_error(fu.cli(home, *args), 1, "999")
    _intact(home, first)
