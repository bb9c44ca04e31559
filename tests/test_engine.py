"""The engine on the real model: loading errors, templates, exact capture/restore."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from llmchat.engine.errors import ModelLoadError
from llmchat.engine.modelfile import check_gguf
from llmchat.engine.runtime import Sampling
from llmchat.engine.template import ChatTemplate, Message
from tests.conftest import new_engine

GREEDY = Sampling(temperature=0, repeat_penalty=1.0, max_tokens=24)
TEXT = (
    "A lighthouse keeper wrote the weather in a leather book every evening: the wind, the waves, "
    "the ships that passed and the birds that sheltered on the gallery. "
)


def long_prompt(engine, n: int) -> list[int]:
    text = "<|im_start|>user\n"
    while len(engine.tokenize(text)) < n:
        text += TEXT
    return engine.tokenize(text)[:n]


def test_model_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        check_gguf(tmp_path / "missing.gguf")
    with pytest.raises(ModelLoadError, match="directory"):
        check_gguf(tmp_path)
    bad = tmp_path / "notes.gguf"
    bad.write_text("hello")
    with pytest.raises(ModelLoadError, match="not a GGUF"):
        check_gguf(bad)
    trunc = tmp_path / "trunc.gguf"
    trunc.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ModelLoadError, match="could not load"):
        new_engine(trunc)


def test_template_prefix_property_and_pieces(engine) -> None:
    t = engine.template
    assert not t.is_fallback
    m1 = [Message("user", "hi")]
    m2 = [*m1, Message("assistant", "hello"), Message("user", "how are you?")]
    r1 = t.render(m1, add_generation_prompt=False)
    r2 = t.render(m2, add_generation_prompt=False)
    assert r2.startswith(r1)
    assert t.generation_prompt(m1) == "<|im_start|>assistant\n"
    assert t.closing(m1, "hello") == "<|im_end|>\n"


def test_chatml_fallback_says_so() -> None:
    t = ChatTemplate(None)
    assert t.is_fallback and "ChatML" in t.note
    assert (
        t.render([Message("user", "x")], add_generation_prompt=True)
        == "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    )


def test_tokenize_roundtrip(engine) -> None:
    text = "Hello, wörld! 🙂 <|im_end|>"
    toks = engine.tokenize(text)
    assert engine.detokenize(toks) == text
    assert engine.is_eog(engine.tokenize("<|im_end|>")[0])


def _state(engine) -> bytes:
    return bytes(engine._get_seq(0))[8:]  # without magic + seq id


def _continue(engine, extra: list[int]) -> list[int]:
    engine.prefill(extra)
    return list(engine.generate(GREEDY))


@pytest.mark.parametrize("n_prompt", [300, 2100])
def test_restored_equals_live_context(model_path, n_prompt: int) -> None:
    """Capture per-turn deltas of a context built by prefill + token-by-token generation,
    restore them into a fresh context: the KV is byte-identical to the live one, and greedy
    decoding continues exactly as the live context does."""
    live = new_engine(model_path, n_ctx=4096)
    prompt = long_prompt(live, n_prompt)
    live.prefill(prompt)
    list(live.generate(Sampling(temperature=0, max_tokens=40)))
    n = len(live.tokens)
    cuts = [0, n_prompt // 3, n_prompt, n]  # system-ish piece, user piece, reply piece
    blobs = [(bytes(live.capture(a, b)), live.tokens[a:b]) for a, b in itertools.pairwise(cuts)]
    saved_state = _state(live)
    tokens = list(live.tokens)
    follow = live.tokenize("<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n")
    want = _continue(live, follow)
    live.close()

    fresh = new_engine(model_path, n_ctx=4096)
    for blob, toks in blobs:
        fresh.restore(bytearray(blob), toks)
    assert fresh.tokens == tokens
    assert _state(fresh) == saved_state
    assert _continue(fresh, follow) == want
    fresh.close()


@pytest.mark.parametrize("n_ctx_tokens", [600, 2500])
def test_restored_equals_reprefilled(model_path, n_ctx_tokens: int) -> None:
    """A context computed by prefill, saved as turn segments and restored in a fresh context,
    equals a fresh re-prefill of the same tokens: same KV bytes, same greedy continuation."""
    a = new_engine(model_path, n_ctx=4096)
    toks = long_prompt(a, n_ctx_tokens)
    a.prefill(toks)
    cuts = [0, 37, 200, n_ctx_tokens // 2, n_ctx_tokens]
    blobs = [(bytes(a.capture(x, y)), toks[x:y]) for x, y in itertools.pairwise(cuts)]
    a.close()

    b = new_engine(model_path, n_ctx=4096)
    for blob, t in blobs:
        b.restore(bytearray(blob), t)
    restored = _state(b)
    follow = b.tokenize("<|im_end|>\n<|im_start|>assistant\n")
    got = _continue(b, follow)
    b.close()

    c = new_engine(model_path, n_ctx=4096)
    c.prefill(toks)
    assert _state(c) == restored
    assert _continue(c, follow) == got
    c.close()


def test_restore_keeps_prefix_and_rejects_garbage(engine) -> None:
    from llmchat.engine.errors import SnapshotRefused

    engine.clear()
    toks = long_prompt(engine, 120)
    engine.prefill(toks)
    tail = bytes(engine.capture(80, 120))
    assert engine.keep(80)
    assert len(engine.tokens) == 80
    engine.restore(bytearray(tail), toks[80:])
    assert engine.tokens == toks
    engine.keep(80)
    with pytest.raises(SnapshotRefused):
        engine.restore(bytearray(b"\0" * 100), toks[80:])
    assert engine.tokens == toks[:80]  # the live context is as it was
    engine.prefill(toks[80:])
    assert engine.tokens == toks


def test_generation_stops_on_request_and_keeps_partial(engine) -> None:
    engine.clear()
    engine.prefill(engine.tokenize("<|im_start|>user\nCount to fifty.<|im_end|>\n<|im_start|>assistant\n"))
    before = len(engine.tokens)
    got: list[int] = []
    for t in engine.generate(Sampling(temperature=0, max_tokens=100), should_stop=lambda: len(got) >= 5):
        got.append(t)
    assert len(got) == 5
    assert engine.tokens[before:] == got  # every yielded token is in the context


def test_calibrate_measures_without_touching_the_live_context(engine) -> None:
    engine.clear()
    toks = long_prompt(engine, 50)
    engine.prefill(toks)
    state = _state(engine)
    assert engine.calibrate() > 0
    assert engine.tokens == toks and _state(engine) == state


def test_model_identity_covers_every_byte(model_path, tmp_path: Path) -> None:
    import shutil

    from llmchat.engine.modelfile import file_identity

    copy = tmp_path / "m.gguf"
    shutil.copyfile(model_path, copy)
    cache = tmp_path / "ids.json"
    a = file_identity(copy, cache)
    assert file_identity(copy, cache) == a  # cached
    with copy.open("r+b") as f:  # one byte in the middle, same size
        f.seek(copy.stat().st_size // 2 + 12345)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    changed = file_identity(copy, cache)
    assert changed.size == a.size and changed.digest != a.digest
