#!/usr/bin/env python3
"""max_batch_size by formula (a few Thunder traces, then C++ simulations
only) against the search (a Thunder trace per size), on ``meta``.

    .venv/bin/python bench/bench_batch_formula.py [--json OUT]
    .venv/bin/python bench/bench_batch_formula.py --7b [--seq 2048] [--budget 80GiB] [--verify]

Default: the step corpus's GPT LM (tests/python/step_models.py's GPT, 2
layers, sequence 128, AdamW, 2 steps) and Llama stack (LlamaLM, 3 layers,
sequence 128, AdamW, 2 steps), each under a fixed budget (--gpt-budget,
--llama-budget), batch searched. Both methods run on the same model and
budget; the table gives each one's wall time, Thunder traces and answer,
and the search's time over the formula's. The two answers must agree (exit
status 1 otherwise).

--7b: tests/python/step_models.py's LlamaLM.seven_b() (Llama-2-7B's
shapes, bf16, AdamW, 2 steps, sequence --seq), the formula only, traced at
--sizes (default 2 3, unverified: two traces; --verify adds the third size
4): the wall time and the largest batch for --budget, and the formula's
peak at each batch from the smallest traced size to the answer + 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))


def _tokens(vocab: int, seq: int):
    import torch

    def make(n: int) -> tuple:
        return (torch.randint(0, vocab, (n, seq), device="meta"),
                torch.randint(0, vocab, (n, seq), device="meta"))

    return make


def _timed(fn):
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = fn()
    return r, time.perf_counter() - start, [str(w.message) for w in caught if "max_batch_size" in str(w.message)]


def small(args) -> int:
    import torch

    import peakmem
    from step_models import GPT, LlamaLM

    cases = [("GPT LM (2 layers, seq 128)", GPT, args.gpt_budget),
             ("Llama stack (LlamaLM, 3 layers, seq 128)", lambda: LlamaLM(layers=3), args.llama_budget)]
    rows, ok = [], True
    for name, make_model, budget in cases:
        with torch.device("meta"):
            model = make_model()
        kwargs = {"optimizer": torch.optim.AdamW, "steps": 2}
        make = _tokens(512, 128)
        f, f_s, f_warn = _timed(lambda: peakmem.max_batch_size(model, make, budget, **kwargs, frontend="thunder"))
        s, s_s, _ = _timed(lambda: peakmem.max_batch_size(model, make, budget, method="search", **kwargs,
                                                          frontend="thunder"))
        ok &= f.batch_size == s.batch_size and f.report.peak_bytes == s.report.peak_bytes
        rows.append({"model": name, "budget": budget, "formula_s": f_s, "formula_traces": f.traces,
                     "formula_method": f.method, "formula_reason": f.reason, "formula_batch": f.batch_size,
                     "formula_simulated": len(f.tried), "search_s": s_s, "search_traces": s.traces,
                     "search_batch": s.batch_size, "peak_bytes": f.report.peak_bytes, "ratio": s_s / f_s,
                     "warnings": f_warn})
    print("| model | budget | answer (formula / search) | peak at the answer | formula: wall, traces, "
          "sizes simulated | search: wall, traces | search / formula |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['budget']} | {r['formula_batch']} / {r['search_batch']} | "
              f"{r['peak_bytes']:,} | {r['formula_s']:.1f} s, {r['formula_traces']}, {r['formula_simulated']} | "
              f"{r['search_s']:.1f} s, {r['search_traces']} | {r['ratio']:.2f}x |")
        if r["formula_method"] != "formula":
            print(f"  (formula fell back: {r['formula_reason']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if not ok:
        print("the two methods disagree", file=sys.stderr)
    return 0 if ok else 1


def seven_b(args) -> int:
    import resource

    import torch

    import peakmem
    from peakmem.step.budget import _budget
    from step_models import LlamaLM

    with torch.device("meta"):
        model = LlamaLM.seven_b(seq=args.seq).to(torch.bfloat16)
    sizes = tuple(args.sizes) + ((max(args.sizes) + 1,) if args.verify and len(args.sizes) == 2 else ())
    kwargs = {"optimizer": torch.optim.AdamW, "steps": 2}
    r, wall, warned = _timed(lambda: peakmem.max_batch_size(
        model, _tokens(32000, args.seq), args.budget, sizes=sizes, verify=args.verify, **kwargs, frontend="thunder"))
    gib = 1 << 30
    limit = _budget(args.budget)
    print(f"Llama-2-7B shapes on meta (bf16, AdamW, 2 steps, sequence {args.seq}); sizes traced {sizes}, "
          f"verify={args.verify}")
    print(f"  largest batch for {args.budget} ({limit:,} bytes): {r.batch_size}; peak there "
          f"{r.report.peak_bytes:,} bytes ({r.report.peak_bytes / gib:.2f} GiB) in the "
          f"{r.report.phase_at_peak} of step {r.report.step_at_peak}")
    print(f"  wall {wall:.1f} s ({wall / 60:.1f} min), {r.traces} Thunder traces, method {r.method}"
          + (f" ({r.reason})" if r.reason else ""))
    for n, peak in r.tried.items():
        print(f"    n={n}: peak {peak:,} bytes ({peak / gib:.2f} GiB){'  fits' if peak <= limit else ''}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  max RSS {rss / gib:.2f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seq": args.seq, "budget": args.budget, "sizes": sizes, "verify": args.verify,
                       "batch_size": r.batch_size, "peak_bytes": r.report.peak_bytes, "wall_s": wall,
                       "traces": r.traces, "method": r.method, "reason": r.reason,
                       "tried": r.tried, "warnings": warned, "max_rss_bytes": rss}, f, indent=2)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--7b", dest="seven_b", action="store_true", help="the 7B model, the formula only")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--budget", default="80GiB")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--verify", action="store_true", help="--7b: trace a third size to verify")
    ap.add_argument("--gpt-budget", default="128MiB")
    ap.add_argument("--llama-budget", default="128MiB")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    from peakmem._thunder_compat import import_thunder

    import_thunder()  # Thunder's import is not either method's time
    return seven_b(args) if args.seven_b else small(args)


if __name__ == "__main__":
    sys.exit(main())
