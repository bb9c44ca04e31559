"""The real app in a real terminal (tmux): chat, quit, `llmchat --continue`, restore badge."""

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("tmux_e2e.sh")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_tmux_end_to_end() -> None:
    out = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "PASS" in out.stdout
