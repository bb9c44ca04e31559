"""ChatService on the real model: turns, tokens per message, branches, shared segments, refusals."""

from __future__ import annotations

import pytest

from llmchat.engine.runtime import Sampling
from llmchat.engine.template import ChatTemplate, Message
from llmchat.sessions.chat import ChatError, ChatService

S = Sampling(temperature=0, max_tokens=12)


def _state(engine) -> bytes:
    return bytes(engine._get_seq(0))[8:]


def test_turn_stores_exact_tokens_and_context(service: ChatService) -> None:
    eng = service.engine
    s = service.new_session(system_prompt="Be brief.")
    r = service.send(s.id, "Name a colour.", sampling=S)
    nodes = service.store.path_to(r.reply_node.id)
    assert [n.role for n in nodes] == ["system", "user", "assistant"]
    ctx = service.context_tokens(r.reply_node)
    assert eng.tokens == ctx  # the live context is exactly the path's tokens
    # the reply stores the ids the model generated, after the generation prompt
    gp = eng.tokenize("<|im_start|>assistant\n")
    assert r.reply_node.tokens[: len(gp)] == gp
    assert eng.detokenize(r.reply_node.tokens[len(gp) :]).startswith(r.reply)
    # the whole context renders exactly as the model's template renders the conversation
    msgs = [Message(n.role, n.content) for n in nodes]
    assert eng.detokenize(ctx) == eng.template.render(msgs, add_generation_prompt=False)
    assert service.store.session(s.id).title == "Name a colour."


def test_resume_restores_from_snapshots_in_fresh_context(service: ChatService, model_path) -> None:
    from tests.conftest import new_engine

    s = service.new_session()
    service.send(s.id, "Hello!", sampling=S)
    r2 = service.send(s.id, "Tell me about owls.", sampling=S)
    live = _state(service.engine)
    other = ChatService(service.store, service.snaps, new_engine(model_path, n_ctx=4096))  # type: ignore[arg-type]
    rep = other.activate(s.id)
    assert rep.restored_tokens == r2.reply_node.ctx_len
    assert rep.prefilled_tokens == 0 and not rep.refused
    assert _state(other.engine) == live
    other.engine.close()  # type: ignore[attr-defined]


def test_branch_switch_restores_each_branch_exactly(service: ChatService) -> None:
    s = service.new_session()
    service.send(s.id, "Pick a fruit.", sampling=S)
    a = service.send(s.id, "Why that one?", sampling=S)
    state_a = _state(service.engine)
    b = service.edit(a.user_node.id, "Pick another.", sampling=S)
    assert b.user_node.parent_id == a.user_node.parent_id  # a sibling: a branch
    assert b.restore.kept_tokens >= a.user_node.ctx_start  # the shared prefix stayed live
    state_b = _state(service.engine)
    rep = service.activate(s.id, a.reply_node.id)
    assert rep.restored_tokens > 0 and rep.kept_tokens >= a.user_node.ctx_start
    assert _state(service.engine) == state_a
    rep = service.activate(s.id, b.reply_node.id)
    assert _state(service.engine) == state_b
    # the shared prefix is one set of segments: turn 1 is stored once
    refs = service.store.segment_refs()
    turn1 = service.store.path_to(a.user_node.parent_id)
    for n in turn1:
        seg = service._segment_for(n)
        assert seg is not None and refs[seg.id] == 1


def test_regenerate_makes_a_sibling_reply(service: ChatService) -> None:
    s = service.new_session()
    r1 = service.send(s.id, "Say a word.", sampling=S)
    r2 = service.regenerate(r1.reply_node.id, sampling=Sampling(temperature=1.0, seed=7, max_tokens=12))
    assert r2.user_node.id == r1.user_node.id
    assert r2.reply_node.id != r1.reply_node.id and r2.reply_node.parent_id == r1.user_node.id
    sibs = service.store.children(r1.user_node.id, s.id)
    assert [n.id for n in sibs] == [r1.reply_node.id, r2.reply_node.id]


def test_sessions_with_one_system_prompt_share_its_segment(service: ChatService) -> None:
    a = service.new_session(system_prompt="You are a pirate.")
    b = service.new_session(system_prompt="You are a pirate.")
    ra = service.send(a.id, "Ahoy?", sampling=S)
    rb = service.send(b.id, "Where is the treasure?", sampling=S)
    sa = service._segment_for(service.store.path_to(ra.reply_node.id)[0])
    sb = service._segment_for(service.store.path_to(rb.reply_node.id)[0])
    assert sa is not None and sb is not None and sa.id == sb.id
    assert rb.snapshots_written == 2  # user + reply; the system segment was reused


def test_two_branches_from_turn_three_store_turns_once(service: ChatService) -> None:
    s = service.new_session()
    for q in ("One?", "Two?", "Three?"):
        last = service.send(s.id, q, sampling=S)
    n_before = len(service.store.segments())
    service.send(s.id, "Four, branch A", parent_id=last.reply_node.id, sampling=S)
    service.send(s.id, "Four, branch B", parent_id=last.reply_node.id, sampling=S)
    assert len(service.store.segments()) == n_before + 4  # only each branch's own user + reply


def test_corrupt_snapshot_is_refused_and_reply_still_produced(service: ChatService, model_path) -> None:
    from tests.conftest import new_engine

    s = service.new_session()
    r = service.send(s.id, "Remember the number seven.", sampling=S)
    seg = service._segment_for(r.user_node)
    assert seg is not None
    p = service.snaps.abs_path(seg.file)
    data = bytearray(p.read_bytes())
    data[-100] ^= 0xFF
    p.write_bytes(bytes(data))
    other = ChatService(service.store, service.snaps, new_engine(model_path, n_ctx=4096))  # type: ignore[arg-type]
    r2 = other.send(s.id, "Which number?", sampling=S)
    assert r2.reply
    assert r2.restore.refused and "checksum" in r2.restore.refused[0]["reason"]
    assert r2.restore.prefilled_tokens > 0
    logged = [e for e in service.store.recent_log(50) if e["op"] == "refuse"]
    assert logged and "checksum" in logged[0]["detail"]
    assert list((service.snaps.root / "quarantine").iterdir())  # the bad file was quarantined
    assert service.snaps.verify(seg.file) is None  # and the segment was captured again, whole
    other.engine.close()  # type: ignore[attr-defined]


def test_foreign_fingerprint_is_never_loaded(service: ChatService, model_path) -> None:
    from tests.conftest import new_engine

    s = service.new_session()
    service.send(s.id, "Hi.", sampling=S)
    other_eng = new_engine(model_path, n_ctx=2048)  # another n_ctx: another fingerprint
    other = ChatService(service.store, service.snaps, other_eng)  # type: ignore[arg-type]
    rep = other.activate(s.id)
    assert rep.restored_tokens == 0 and rep.prefilled_tokens > 0  # not used, re-prefilled
    # a segment file swapped in under this fingerprint's index is refused with the reason
    seg_a = service._segment_for(service.store.path_to(service.store.session(s.id).active_leaf)[-1])
    other.send(s.id, "Again.", sampling=S)
    node = service.store.path_to(service.store.session(s.id).active_leaf)[0]
    seg_b = other._segment_for(node)
    assert seg_a is not None and seg_b is not None
    other.snaps.abs_path(seg_b.file).write_bytes(service.snaps.abs_path(seg_a.file).read_bytes())
    other_eng.clear()
    rep = other.activate(s.id)
    assert rep.refused and "another" in rep.refused[0]["reason"]
    other_eng.close()


def test_template_without_prefix_property_falls_back(service: ChatService) -> None:
    eng = service.engine
    saved = eng.template
    # a template whose system header counts the messages: every render changes earlier text
    eng.template = ChatTemplate(
        "<|im_start|>system\nmessages: {{ messages|length }}<|im_end|>\n"
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    try:
        s = service.new_session()
        service.send(s.id, "First.", sampling=S)
        r = service.send(s.id, "Second.", sampling=S)
        assert r.user_node.base_id is None and r.user_node.meta.get("rebased")
        msgs = [Message(n.role, n.content) for n in service.store.path_to(r.user_node.id)]
        assert eng.detokenize(service.context_tokens(r.user_node)) == eng.template.render(
            msgs, add_generation_prompt=False
        )
    finally:
        eng.template = saved


def test_bad_messages(service: ChatService) -> None:
    s = service.new_session()
    with pytest.raises(ChatError, match="empty"):
        service.send(s.id, "  \n ")
    with pytest.raises(ChatError, match="context holds"):
        service.send(s.id, "word " * 5000)
    assert service.store.nodes(s.id) == []  # nothing half-saved
    r = service.send(s.id, "bad \udcff bytes \x01\x07 here", sampling=S)
    assert r.user_node.content == "bad \ufffd bytes  here"


def test_export_import_roundtrip(service: ChatService) -> None:
    s = service.new_session(system_prompt="Terse.")
    r = service.send(s.id, "Hi there", sampling=S)
    data = service.export(s.id, "json")
    s2 = service.import_(data.encode())
    p1 = [(n.role, n.content) for n in service.store.path_to(r.reply_node.id)]
    p2 = [(n.role, n.content) for n in service.store.path_to(service.store.session(s2.id).active_leaf)]
    assert p1 == p2
    assert "## You" in service.export(s.id, "md")
    with pytest.raises(ChatError, match="not valid JSON"):
        service.import_(b"{nope")
    with pytest.raises(ChatError, match="not an llmchat export"):
        service.import_(b'{"hello": 1}')


def test_stop_during_a_long_prefill(service: ChatService) -> None:
    s = service.new_session()
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 1  # let the first 512-token chunk through, then stop

    with pytest.raises(ChatError, match="stopped while reading"):
        service.send(s.id, "word " * 1500, sampling=S, should_stop=stop)
    assert 0 < len(service.engine.tokens) < 1500
    # the user message is saved; the next turn branches beside it and works
    r = service.send(s.id, "Short one.", sampling=S)
    assert r.reply_node.status in ("done", "stopped")


def test_disk_budget_is_enforced_after_each_turn(service: ChatService) -> None:
    service.store.set_meta("snapshot_budget", str(1 << 20))  # 1 MB: about one turn
    s = service.new_session()
    for q in ("One?", "Two?", "Three?", "Four?"):
        last = service.send(s.id, q, sampling=S)
    total = sum(seg.bytes for seg in service.store.segments())
    assert 0 < total <= 1 << 20
    assert len(service.store.nodes(s.id)) == 8  # messages are never evicted
    assert any(e["op"] == "evict" for e in service.store.recent_log(100))
    assert service._segment_for(last.reply_node) is not None  # the newest survives
