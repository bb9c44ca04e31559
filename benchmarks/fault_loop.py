"""The long fault-injection run: kill -9 real `llmchat ask` processes, damage snapshots, check.

    .venv/bin/python benchmarks/fault_loop.py                  # 200 iterations, seed 1
    .venv/bin/python benchmarks/fault_loop.py --iterations 30 --seed 7 --home /tmp/fl

Each iteration starts `llmchat ask` (continuing the last session, branching, or a new one) and
SIGKILLs it at a random moment or at a chosen point (prefill/generation decode, mid snapshot
write, after the rename before the index row, before/during/after an SQLite COMMIT); then
checks the database directly (every finished turn there, unchanged; no half-stored reply;
integrity; every indexed snapshot whole), runs `llmchat doctor --json`, sometimes damages a
snapshot on the active path (flipped bytes, truncation, another model's or build's header,
deletion), and runs `llmchat ask --continue`, which must work and refuse exactly the damaged
snapshots. Prints the figures; exits 1 if any turn was lost or any check failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import faults_util as fu  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--home", help="data dir to use (default: a fresh temp dir)")
    ap.add_argument("--max-tokens", default="4,16", help="reply length range, e.g. 4,16")
    ap.add_argument(
        "--corrupt-every", type=int, default=4, help="damage a snapshot 1 in N iterations (0: never)"
    )
    ap.add_argument("--quiet", action="store_true", help="only the figures")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.max_tokens.split(","))
    home = Path(a.home) if a.home else Path(tempfile.mkdtemp(prefix="llmchat-faults-")) / "home"
    print(f"fault loop: {a.iterations} iterations, seed {a.seed}, data dir {home}", flush=True)
    st = fu.fault_loop(
        home,
        a.iterations,
        a.seed,
        log=(lambda m: None) if a.quiet else (lambda m: print(m, flush=True)),
        max_tokens=(lo, hi),
        corrupt_every=a.corrupt_every,
    )
    print()
    print(f"iterations            {st.iterations}")
    print(f"kills                 {st.kills}  (victims that finished first: {st.finished_runs})")
    print(f"kill modes            {', '.join(f'{k} {v}' for k, v in sorted(st.modes.items()))}")
    print(f"turns checked         {st.turns_checked}  (finished turns re-checked after every kill)")
    print(f"corruptions injected  {st.corruptions_injected}")
    print(f"corruptions refused   {st.corruptions_refused}  (refused by a restore or quarantined by doctor)")
    print(f"lost turns            {st.lost_turns}")
    print(f"problems              {len(st.problems)}")
    for p in st.problems:
        print(f"  {p}")
    print(f"time                  {st.seconds:.0f} s ({st.seconds / max(1, st.iterations):.1f} s/iteration)")
    ok = st.lost_turns == 0 and not st.problems and st.corruptions_refused == st.corruptions_injected
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
