"""Package layout and the Textual-free core."""

import subprocess
import sys


def test_core_imports_no_textual() -> None:
    code = (
        "import sys\n"
        "import llmchat.engine, llmchat.engine.runtime, llmchat.engine.template, llmchat.engine.modelfile\n"
        "import llmchat.sessions, llmchat.sessions.chat, llmchat.sessions.store, llmchat.sessions.snapshots\n"
        "import llmchat.sessions.housekeeping, llmchat.sessions.locations, llmchat.app.cli, llmchat.app.runtime\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_namespace_layout() -> None:
    code = (
        "import importlib.util, llmchat.app, llmchat.sessions, llmchat.engine, llmchat.widgets, llmchat.themes\n"
        "assert importlib.util.find_spec('sessions') is None or 'site-packages' not in str(importlib.util.find_spec('sessions').origin)\n"
        "print(llmchat.sessions.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "llmchat.sessions"


def test_locations_have_no_side_effects(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LLMCHAT_HOME", str(tmp_path / "nowhere"))
    from llmchat.sessions import locations

    assert locations.database_path() == tmp_path / "nowhere" / "llmchat.db"
    assert not (tmp_path / "nowhere").exists()
    locations.ensure()
    assert (tmp_path / "nowhere" / "snapshots").is_dir()
