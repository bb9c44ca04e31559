"""Run the full llmchat benchmark suite (issue 5) and keep its JSON.

    .venv/bin/python benchmarks/bench_full.py [--tokens 512,2048,4096,8000] [--kv-type f16|q8_0]
                                             [--model PATH] [--sections restore,capture,...]

Prints the table (`llmchat.app.bench_full.print_full`) and writes the whole result to
benchmarks/results/latest.json (and a timestamped copy). Same code as `llmchat bench --full`,
without re-running the basic `llmchat bench` table first.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from llmchat.app.bench_full import SECTIONS, print_full, run_full

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", default="512,2048,4096,8000", help="context lengths, comma-separated")
    p.add_argument("--model", default=None)
    p.add_argument("--kv-type", choices=["f16", "q8_0"], default="f16")
    p.add_argument("--n-ctx", type=int, default=0)
    p.add_argument("--sections", default=",".join(SECTIONS))
    p.add_argument("--quick", action="store_true", help="small conversations (a smoke run)")
    p.add_argument("--out", default=str(Path(__file__).parent / "results"))
    a = p.parse_args(argv)
    lengths = [int(x) for x in a.tokens.split(",") if x.strip()]
    opts = {"n_ctx": a.n_ctx, "type_k": a.kv_type, "type_v": a.kv_type, "flash_attn": True}
    result = run_full(
        a.model,
        lengths,
        engine_options=opts,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
        quick=a.quick,
        sections=[s for s in a.sections.split(",") if s],
    )
    result["command"] = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    print_full(result)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=1, default=str)
    (out / "latest.json").write_text(text)
    (out / time.strftime("full-%Y%m%dT%H%M%S.json", time.gmtime())).write_text(text)
    print(f"\n(JSON: {out / 'latest.json'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
