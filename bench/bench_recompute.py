"""Recomputation and budget mode (peakmem.recompute) on whole training steps.

    .venv/bin/python bench/bench_recompute.py [--torch-threads 2] [--json OUT] [--quick]

1. The training-step corpus (tests/python/step_models.py), each step as
   Thunder runs it (Thunder 0.2.6's CPU path saves every forward value the
   backward reads: it recomputes nothing) against peakmem's recomputation
   (``recompute=True``: as low as it goes): the peak before and
   after, the FLOPs added, the search's time, and the planned step run by
   Thunder with the rewritten traces and measured (measure_step): measured
   = predicted, or the run stops with an error.
2. Stacked Llama blocks (LlamaLM, 4 layers, batch 4): Thunder as is, full
   activation checkpointing of every block (torch.utils.checkpoint: the
   backward re-runs each block's forward, matmuls and attention included),
   and peakmem's recomputation (pointwise ops and views only); each step
   measured.
3. Budget mode: the largest batch whose step fits a fixed budget
   (max_batch_size, on ``meta``), without planning and with
   ``recompute=True`` (each size recomputes until it fits), with
   the FLOPs added at that size; the budget is the unplanned step's peak at
   batch 4, so the unplanned answer is 4.
4. Monotone in the budget: one step (GPT, batch 4) under budgets from the
   lowest recomputation reaches to the unplanned peak: the FLOPs added
   never grow as the budget does.
5. The frontier of (peak, added FLOPs) on 4-block GPT and Llama stacks
   (batch 4, seq 128): Thunder as is, full activation checkpointing of
   every block (torch.utils.checkpoint; its added FLOPs are its blocks'
   matmuls, tests/python/test_recompute_regions.py's lower bound), and
   peakmem's plans at every budget (one search below checkpointing's peak:
   the choices do not depend on the budget, so each prefix of them is the
   plan for the budgets between its peak and the one before). The plans at
   checkpointing's peak and a few between are run by Thunder and measured
   (measured = predicted, or the run stops with an error). Printed as a
   table, and drawn to --plot (a PNG) when matplotlib is installed.
   PyTorch's SAC ILP (torch.distributed._tools.sac_ilp) is not among them:
   its estimator needs CUDA.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))


def corpus(args):
    import torch

    import peakmem
    from step_models import ENTRIES

    rows = []
    print("| step | Thunder (no recomputation) | recomputed | measured | lower | values | FLOPs added | search s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for e in ENTRIES[: 6 if args.quick else None]:
        torch.manual_seed(0)
        model, inputs = e.make(), e.inputs()
        r = peakmem.estimate_step(model, *inputs, loss_fn=e.loss_fn, recompute=True, **e.setup)
        rc = r.recomputation
        m = peakmem.measure_step(model, *inputs, loss_fn=e.loss_fn, recompute=True, **e.setup)
        if (m.peak_bytes, m.final_bytes) != (r.peak_bytes, r.final_bytes):
            raise SystemExit(f"error: {e.name}: measured {m.peak_bytes}/{m.final_bytes}, "
                             f"predicted {r.peak_bytes}/{r.final_bytes}")
        lower = 1 - rc.peak_after / rc.peak_before
        rows.append({"step": e.name, "before": rc.peak_before, "after": rc.peak_after, "measured": m.peak_bytes,
                     "recomputed": len(rc.names), "added_flops": rc.added_flops, "seconds": rc.seconds,
                     "simulations": rc.simulations})
        print(f"| {e.name} | {rc.peak_before:,} | {rc.peak_after:,} | {m.peak_bytes:,} | {100 * lower:.1f}% | "
              f"{len(rc.names)} | {rc.added_flops:,} | {rc.seconds:.2f} |")
    if rows:
        mean = sum(1 - x["after"] / x["before"] for x in rows) / len(rows)
        best = max(rows, key=lambda x: 1 - x["after"] / x["before"])
        print(f"\nmean reduction {100 * mean:.1f}%, best {100 * (1 - best['after'] / best['before']):.1f}% "
              f"({best['step']})")
    return rows


def llama_checkpointing(args):
    import torch

    import peakmem
    from step_models import CheckpointedLlamaLM, LlamaLM

    g = torch.Generator().manual_seed(0)
    idx, targets = torch.randint(0, 512, (4, 128), generator=g), torch.randint(0, 512, (4, 128), generator=g)
    out = {}
    print(f"\n| LlamaLM x{args.layers}, batch 4, one step | peak | measured | what the backward recomputes |")
    print("|---|---:|---:|---|")
    for name, cls, recompute in (("Thunder as is", LlamaLM, False),
                                 ("full activation checkpointing", CheckpointedLlamaLM, False),
                                 ("peakmem recomputation", LlamaLM, True)):
        torch.manual_seed(0)
        model = cls(layers=args.layers)
        r = peakmem.estimate_step(model, idx, targets, recompute=recompute or None, frontend="thunder")
        m = peakmem.measure_step(model, idx, targets, recompute=recompute or None, frontend="thunder")
        if m.peak_bytes != r.peak_bytes:
            raise SystemExit(f"error: {name}: measured {m.peak_bytes}, predicted {r.peak_bytes}")
        what = {"Thunder as is": "nothing",
                "full activation checkpointing": "every block's forward (matmuls and attention included)"}.get(
            name, f"{len(r.recomputation.names) if r.recomputation else 0} pointwise values, "
                  f"{r.recomputation.added_flops if r.recomputation else 0:,} FLOPs")
        out[name] = {"peak": r.peak_bytes, "measured": m.peak_bytes, "recomputes": what}
        print(f"| {name} | {r.peak_bytes:,} | {m.peak_bytes:,} | {what} |")
    return out


def scalable_models():
    import torch

    from step_models import GPT, GPTBlock, LlamaLM, MixerBlock, mse_loss, sum_loss

    def tokens(b):
        return (torch.randint(0, 512, (b, 128), device="meta"), torch.randint(0, 512, (b, 128), device="meta"))

    return [
        ("GPT (2 blocks, dim 256)", lambda: GPT(), tokens, None),
        ("LlamaLM (2 blocks, dim 256)", lambda: LlamaLM(), tokens, None),
        ("GPT block, sum loss", lambda: GPTBlock(), lambda b: (torch.randn(b, 128, 256, device="meta"),), sum_loss),
        ("MLP-Mixer block, MSE", lambda: MixerBlock(), lambda b: (torch.randn(b, 128, 256, device="meta"),),
         mse_loss),
    ]


def budget_mode(args):
    import torch

    import peakmem

    rows = []
    print("\n| model (AdamW) | budget | largest batch, no planning | with recomputation | FLOPs added there |")
    print("|---|---:|---:|---:|---:|")
    for name, make, inputs, loss_fn in scalable_models()[: 2 if args.quick else None]:
        torch.manual_seed(0)
        model = make().to("meta")
        kw = {"loss_fn": loss_fn, "optimizer": torch.optim.AdamW, "frontend": "thunder"}
        budget = peakmem.estimate_step(model, *inputs(4), **kw).peak_bytes
        plain = peakmem.max_batch_size(model, inputs, budget, high=64, **kw)
        planned = peakmem.max_batch_size(model, inputs, budget, high=64, recompute=True, **kw)
        rc = planned.report.recomputation
        rows.append({"model": name, "budget": budget, "batch": plain.batch_size,
                     "batch_recomputed": planned.batch_size, "added_flops": rc.added_flops if rc else 0})
        print(f"| {name} | {budget:,} | {plain.batch_size} | {planned.batch_size} | "
              f"{rc.added_flops if rc else 0:,} |")
    return rows


def monotone(args):
    import torch

    import peakmem
    from step_models import GPT

    torch.manual_seed(0)
    model = GPT().to("meta")
    idx = torch.randint(0, 512, (4, 128), device="meta")
    targets = torch.randint(0, 512, (4, 128), device="meta")
    full = peakmem.estimate_step(model, idx, targets, recompute=True).recomputation
    lo, hi = full.peak_after, full.peak_before
    rows = []
    print("\n| GPT, batch 4: budget | peak | fits | values recomputed | FLOPs added |")
    print("|---:|---:|---|---:|---:|")
    for k in range(6):
        budget = lo + (hi - lo) * k // 5
        rc = peakmem.estimate_step(model, idx, targets, recompute=budget).recomputation
        rows.append({"budget": budget, "peak": rc.peak_after, "fits": rc.fits, "recomputed": len(rc.names),
                     "added_flops": rc.added_flops})
        print(f"| {budget:,} | {rc.peak_after:,} | {rc.fits} | {len(rc.names)} | {rc.added_flops:,} |")
    flops = [r["added_flops"] for r in rows]
    if flops != sorted(flops, reverse=True) or not all(r["fits"] for r in rows):
        raise SystemExit("error: budget mode is not monotone in the budget")
    return rows


def _stack_models():
    import torch.utils.checkpoint  # noqa: F401  (the checkpointed models call it)

    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from step_models import GPT, CheckpointedLlamaLM, LlamaLM
    from test_recompute_regions import CheckpointedGPT, gpt_checkpointing_flops, llama_checkpointing_flops

    return [("GPT x4", GPT, CheckpointedGPT, gpt_checkpointing_flops()),
            ("LlamaLM x4", LlamaLM, CheckpointedLlamaLM, llama_checkpointing_flops())]


def _measured(peakmem, model, idx, targets, name, **kwargs):
    r = peakmem.estimate_step(model, idx, targets, frontend="thunder", **kwargs)
    m = peakmem.measure_step(model, idx, targets, frontend="thunder", **kwargs)
    if m.peak_bytes != r.peak_bytes:
        raise SystemExit(f"error: {name}: measured {m.peak_bytes}, predicted {r.peak_bytes}")
    return r


def pareto(args):
    import torch

    import peakmem

    g = torch.Generator().manual_seed(0)
    idx, targets = torch.randint(0, 512, (4, 128), generator=g), torch.randint(0, 512, (4, 128), generator=g)
    out = {}
    for name, plain, checkpointed, ckpt_flops in _stack_models()[: 1 if args.quick else None]:
        torch.manual_seed(0)
        model = plain(layers=4)
        torch.manual_seed(0)
        thunder_peak = _measured(peakmem, model, idx, targets, name).peak_bytes
        ckpt_peak = _measured(peakmem, checkpointed(layers=4), idx, targets, name + " checkpointed").peak_bytes
        start = time.perf_counter()
        rc = peakmem.estimate_step(model, idx, targets, recompute=ckpt_peak * 3 // 4).recomputation
        seconds = time.perf_counter() - start
        frontier, flops = [(thunder_peak, 0)], 0
        for _, peak, added in rc.steps:
            flops += added
            frontier.append((peak, flops))
        at_ckpt = next((p, f) for p, f in frontier if p <= ckpt_peak) if frontier[-1][0] <= ckpt_peak else None
        checks = sorted({frontier[-1][0]} | ({at_ckpt[0]} if at_ckpt else set()))
        measured = {}
        for budget in checks:
            r = _measured(peakmem, model, idx, targets, f"{name} at {budget}", recompute=budget)
            measured[budget] = r.peak_bytes
        print(f"\n| {name}, batch 4 | peak | added FLOPs | measured |")
        print("|---|---:|---:|---:|")
        print(f"| Thunder as is | {thunder_peak:,} | 0 | {thunder_peak:,} |")
        print(f"| full activation checkpointing | {ckpt_peak:,} | >= {ckpt_flops:,} | {ckpt_peak:,} |")
        if at_ckpt:
            print(f"| peakmem at checkpointing's peak | {at_ckpt[0]:,} | {at_ckpt[1]:,} | {measured[at_ckpt[0]]:,} |")
        print(f"| peakmem, lowest ({len(rc.names)} choices, {rc.simulations} simulations, {seconds:.0f} s) | "
              f"{rc.peak_after:,} | {rc.added_flops:,} | {measured[frontier[-1][0]]:,} |")
        print("\nfrontier (peak bytes, added FLOPs): " + ", ".join(f"({p:,}, {f:,})" for p, f in frontier))
        out[name] = {"thunder": thunder_peak, "checkpointing": {"peak": ckpt_peak, "flops_at_least": ckpt_flops},
                     "frontier": frontier, "at_checkpointing_peak": at_ckpt, "measured": measured,
                     "search_seconds": seconds, "simulations": rc.simulations}
    if args.plot:
        _plot(out, args.plot)
    return out


def _plot(out, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib is not installed: no plot written to {path})")
        return
    fig, axes = plt.subplots(1, len(out), figsize=(6 * len(out), 4.5), squeeze=False)
    for ax, (name, r) in zip(axes[0], out.items()):
        peaks, flops = zip(*r["frontier"])
        ax.step([f / 1e9 for f in flops], [p / 1e6 for p in peaks], where="post", label="peakmem plans")
        ax.plot([0], [r["thunder"] / 1e6], "o", label="Thunder as is")
        ax.plot([r["checkpointing"]["flops_at_least"] / 1e9], [r["checkpointing"]["peak"] / 1e6], "s",
                label="full checkpointing (FLOPs: its matmuls)")
        ax.set_xlabel("added GFLOPs")
        ax.set_ylabel("step peak (MB)")
        ax.set_title(f"{name}, batch 4, seq 128")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4, help="Llama blocks in part 2")
    ap.add_argument("--quick", action="store_true", help="a few corpus steps and models only")
    ap.add_argument("--only", nargs="*",
                    choices=["corpus", "llama_checkpointing", "budget_mode", "monotone", "pareto"],
                    help="run these parts only")
    ap.add_argument("--plot", type=Path, help="part 5: draw the frontier to this PNG")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.torch_threads)
    start = time.perf_counter()
    parts = {"corpus": corpus, "llama_checkpointing": llama_checkpointing, "budget_mode": budget_mode,
             "monotone": monotone, "pareto": pareto}
    out = {name: run(args) for name, run in parts.items() if not args.only or name in args.only}
    print(f"\n{time.perf_counter() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
