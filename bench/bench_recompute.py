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
   (batch 4, seq 128) as Thunder runs them (tests/python/recompute_frontier.py):
   Thunder as is; activation checkpointing of the first k blocks, k = 1..4
   (torch.utils.checkpoint, which Thunder's checkpoint lookaside
   recomputes); PyTorch's SAC ILP's plans (torch.distributed._tools.sac_ilp,
   tests/python/sac_ilp_plans.py: its choices, made on the eager step, at
   budgets of SAC_SHARES of its own estimate of it, each distinct choice
   once), run by Thunder with peakmem's checkpoint lookaside
   (peakmem.step.thunder_checkpoint), which places the selective-checkpoint
   policies Thunder would otherwise ignore; and peakmem's plans (Thunder's
   front end, peakmem.recompute) for each of those steps' measured peaks as
   the budget, prefixes of one search (the whole search drawn as a line).
   Every step is run and measured, estimated, its FLOPs counted as it runs
   (sac_ilp_plans.step_flops), its loss and gradients compared bit for bit
   with the plain step's. SAC's estimators time operators with a roofline
   that reads the CUDA device's FLOP/s and bandwidth; here it runs with
   fixed CPU figures (sac_ilp_plans.CPU_FLOPS, CPU_BYTES_PER_S). Needs pulp
   and pwlf (bench/requirements-sac-ilp.txt, installed when missing).
   Printed as a table per model, drawn to --plot (a PNG) when matplotlib
   is installed.
6. The same on the steps as PyTorch runs them: peakmem's plans are the
   eager front end's (peakmem.step.eager_recompute: selective checkpointing
   searched with the eager estimate), SAC ILP's run with PyTorch's own
   selective checkpointing. Drawn to --plot with "-eager" added to its name.
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


def _sac_ilp_ready() -> None:
    """pulp and pwlf (SAC ILP's), installed from bench/requirements-sac-ilp.txt when missing."""
    import importlib.util
    import subprocess

    if all(importlib.util.find_spec(m) for m in ("pulp", "pwlf")):
        return
    print("installing bench/requirements-sac-ilp.txt (SAC ILP's pulp and pwlf)")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r",
                    str(ROOT / "bench" / "requirements-sac-ilp.txt")], check=True)


# SAC ILP's budgets: shares of its own estimate of the unplanned step's peak.
SAC_SHARES = (1.0, 0.9, 0.8, 0.75, 0.7, 0.65, 0.6)


def measured_pareto(args, frontend):
    """Parts 5 (frontend "thunder") and 6 ("eager")."""
    import torch

    _sac_ilp_ready()
    from recompute_frontier import Frontier
    from sac_ilp_plans import CPU_BYTES_PER_S, CPU_FLOPS
    from step_models import GPT, LlamaLM

    g = torch.Generator().manual_seed(0)
    inputs = (torch.randint(0, 512, (4, 128), generator=g), torch.randint(0, 512, (4, 128), generator=g))
    out = {}
    for name, cls in [("GPT x4", GPT), ("LlamaLM x4", LlamaLM)][: 1 if args.quick else None]:
        def make(cls=cls):
            torch.manual_seed(0)
            return cls(layers=4)

        start = time.perf_counter()
        f = Frontier(make, inputs, list(SAC_SHARES), frontend)
        print(f"\n| {name}, batch 4, {frontend} | budget | measured peak | estimated | added FLOPs | bit-identical |")
        print("|---|---:|---:|---:|---:|---|")
        for p in f.rows():
            budget = "" if p.budget is None else f"{p.budget:,}"
            what = p.kind if p.kind != "sac" else "sac " + ", ".join(
                f"{k.partition('.')[2]} {v:.2f}" for k, v in p.plan.items())
            print(f"| {what} | {budget} | {p.measured:,} | {p.estimated:,} | {p.added_flops:,} | {p.identical} |")
        print("\nat each budget, the FLOPs each plan adds (peakmem's plan for that budget beside it):")
        for p in (*f.checkpointing, *f.sac):
            q = f.peakmem_at(p.measured)
            print(f"  {p.kind} at {p.measured:,}: {p.added_flops:,}; peakmem {q.added_flops:,} at {q.measured:,}"
                  f"{'' if q.measured <= p.measured and q.added_flops <= p.added_flops else '  <- NOT BETTER'}")
        out[name] = {"seconds": time.perf_counter() - start, "search": f.search,
                     "points": [{k: v for k, v in vars(p).items() if k != "plan"}
                                | _plan_json(p, frontend) for p in f.rows()],
                     "sac_cpu_roofline": {"flops_per_s": CPU_FLOPS, "bytes_per_s": CPU_BYTES_PER_S}}
    if args.plot:
        _plot(out, args.plot if frontend == "thunder" else args.plot.with_name(
            args.plot.stem + "-eager" + args.plot.suffix), frontend)
    return out


def _plan_json(p, frontend):
    if p.kind == "sac":
        return {"choice": p.plan}
    return {"recomputed": list(p.plan)} if p.kind == "peakmem" and frontend == "thunder" else {}


def pareto(args):
    return measured_pareto(args, "thunder")


def eager_pareto(args):
    return measured_pareto(args, "eager")


def _figure(out, path, draw, xlabel, ylabel, title):
    """One panel per model of `out`, each drawn by draw(axes, result), to
    the PNG `path` (nothing without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib is not installed: no plot written to {path})")
        return
    fig, axes = plt.subplots(1, len(out), figsize=(6 * len(out), 4.5), squeeze=False)
    for ax, (name, r) in zip(axes[0], out.items()):
        draw(ax, r)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title.format(name=name))
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def _plot(out, path, frontend):
    marks = {"none": ("o", f"{frontend} as is"), "checkpoint": ("s", "checkpointing the first k blocks"),
             "sac": ("^", "SAC ILP's plans"), "peakmem": ("x", "peakmem's plans")}

    def draw(ax, r):
        if r["search"]:
            peaks, flops = zip(*r["search"])
            ax.step([f / 1e9 for f in flops], [p / 1e6 for p in peaks], where="post", label="peakmem's search")
        for kind, (mark, label) in marks.items():
            pts = [p for p in r["points"] if p["kind"].split()[0] == kind]
            ax.plot([p["added_flops"] / 1e9 for p in pts], [p["measured"] / 1e6 for p in pts], mark, label=label)

    _figure(out, path, draw, "added GFLOPs (counted as the step runs)", "step peak (MB, measured)",
            "{name}, batch 4, seq 128, " + frontend)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4, help="Llama blocks in part 2")
    ap.add_argument("--quick", action="store_true", help="a few corpus steps and models only")
    ap.add_argument("--only", nargs="*",
                    choices=["corpus", "llama_checkpointing", "budget_mode", "monotone", "pareto", "eager_pareto"],
                    help="run these parts only")
    ap.add_argument("--plot", type=Path, help="parts 5 and 6: draw the frontiers to this PNG (part 6 to its -eager twin)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.torch_threads)
    start = time.perf_counter()
    parts = {"corpus": corpus, "llama_checkpointing": llama_checkpointing, "budget_mode": budget_mode,
             "monotone": monotone, "pareto": pareto, "eager_pareto": eager_pareto}
    out = {name: run(args) for name, run in parts.items() if not args.only or name in args.only}
    print(f"\n{time.perf_counter() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
