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
   (batch 4, seq 128) as Thunder runs them: Thunder as is, activation
   checkpointing of the first k blocks, k = 1..4 (torch.utils.checkpoint,
   which Thunder's checkpoint lookaside recomputes; its added FLOPs at
   least those blocks' matmuls, tests/python/test_recompute_regions.py's
   lower bound), and peakmem's plans at every budget (one search below
   full checkpointing's peak: the choices do not depend on the budget, so
   each prefix of them is the plan for the budgets between its peak and
   the one before). The plan at each checkpointed step's peak and the
   lowest are run by Thunder and measured (measured = predicted, or the
   run stops with an error; so does a plan with no fewer FLOPs than the
   checkpointing). Printed as a table, and drawn to --plot (a PNG) when
   matplotlib is installed.
   Beside them, PyTorch's SAC ILP (torch.distributed._tools.sac_ilp,
   tests/python/sac_ilp_plans.py): its choices at budgets of 100, 90, ...,
   60 % of its own estimate of the unplanned step (each distinct choice
   once), applied with selective checkpointing and run eagerly by PyTorch
   (Thunder ignores checkpoint's context_fn), each measured
   (measure_step, frontend="eager") with its added FLOPs counted as
   peakmem counts them. Substituted for the CPU: the roofline SAC's
   estimators time operators with reads the CUDA device's FLOP/s and
   bandwidth; here it runs with fixed CPU figures (sac_ilp_plans.CPU_FLOPS,
   CPU_BYTES_PER_S). At each SAC plan's measured peak, peakmem's plan for
   that budget (a prefix of the one search) is run by Thunder and
   measured, and the two compared: "absolute", the same budget in bytes
   (each engine's step as it runs); "from its own step", the same bytes
   below each engine's unplanned step. Needs pulp and pwlf
   (bench/requirements-sac-ilp.txt, installed when missing).
6. The eager front end's planner (peakmem.step.eager_recompute: selective
   checkpointing searched with the eager estimate) on the same 4-block GPT
   and Llama stacks as PyTorch runs them, beside full per-block
   checkpointing (the first k blocks, k = 1..4) and SAC ILP's plans
   (SAC_SHARES): peakmem plans for each of their measured peaks as the
   budget (tests/python/eager_frontier.py). Every step is run and measured,
   its FLOPs counted as it runs, its loss and gradients compared bit for
   bit with the plain step's. Printed as a table per model, drawn to
   --plot with "-eager" added to its name.
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
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from step_models import GPT, LlamaLM
    from test_recompute_regions import gpt_checkpointing_flops, llama_checkpointing_flops

    return [("GPT x4", GPT, gpt_checkpointing_flops()), ("LlamaLM x4", LlamaLM, llama_checkpointing_flops())]


def _measured(peakmem, model, idx, targets, name, **kwargs):
    r = peakmem.estimate_step(model, idx, targets, frontend="thunder", **kwargs)
    m = peakmem.measure_step(model, idx, targets, frontend="thunder", **kwargs)
    if m.peak_bytes != r.peak_bytes:
        raise SystemExit(f"error: {name}: measured {m.peak_bytes}, predicted {r.peak_bytes}")
    return r


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


def _cheapest(frontier, budget):
    """The frontier's point (index, peak, FLOPs) with the fewest FLOPs at or
    under `budget`; None when none is."""
    fits = [(f, p, i) for i, (p, f) in enumerate(frontier) if p <= budget]
    if not fits:
        return None
    f, p, i = min(fits)
    return i, p, f


def _sac_comparison(peakmem, name, make, idx, targets, thunder_peak, frontier, names_at):
    """SAC ILP's measured plans beside peakmem's at the same budgets (the
    module docstring, part 5); each peakmem plan compared is measured."""
    from sac_ilp_plans import sac_points

    start = time.perf_counter()
    model, points = sac_points(make, (idx, targets), list(SAC_SHARES))
    seconds = time.perf_counter() - start
    eager_peak = next(p.measured for p in points if not p.choice)
    rows = []
    print(f"\n| {name}: SAC ILP's plan (eager) | measured peak | added FLOPs | peakmem at that budget "
          f"(Thunder): peak | measured | added FLOPs | no worse | from its own step: peakmem's FLOPs for as "
          f"many bytes | no worse |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---|")
    for p in points:
        at = _cheapest(frontier, p.measured)
        measured = None
        if at:
            r = _measured(peakmem, make(), idx, targets, f"{name} at {p.measured}", recompute=names_at(at[0]))
            measured = r.peak_bytes
        lowered = eager_peak - p.measured
        rel = _cheapest(frontier, thunder_peak - lowered)
        what = ", ".join(f"{k.partition('.')[2] or k} {v:.2f}" for k, v in p.choice.items()) or "nothing"
        worse = at is None or at[2] > p.added_flops
        rel_worse = rel is None or rel[2] > p.added_flops
        rows.append({"sac_budget": p.budget, "choice": p.choice, "sac_measured": p.measured,
                     "sac_added_flops": p.added_flops,
                     "peakmem": None if at is None else {"peak": at[1], "measured": measured, "added_flops": at[2],
                                                         "names": list(names_at(at[0]))},
                     "no_worse": not worse,
                     "from_own_step": {"bytes_lowered": lowered,
                                       "peakmem_added_flops": None if rel is None else rel[2],
                                       "no_worse": not rel_worse}})
        print(f"| {what} | {p.measured:,} | {p.added_flops:,} | "
              + (f"{at[1]:,} | {measured:,} | {at[2]:,} | " if at else "does not reach it | | | ")
              + f"{'yes' if not worse else 'NO'} | {'-' if rel is None else f'{rel[2]:,}'} | "
              f"{'yes' if not rel_worse else 'NO'} |")
    print(f"(SAC ILP: {len(points)} distinct plans from budgets at {', '.join(map(str, SAC_SHARES))} of its "
          f"estimate {model.baseline_bytes:,} of the unplanned step; eager PyTorch's step as is: {eager_peak:,}; "
          f"{seconds:.0f} s)")
    return {"eager_peak": eager_peak, "sac_estimate_of_unplanned": model.baseline_bytes, "points": rows,
            "seconds": seconds, "cpu_roofline": {"flops_per_s": _sac_figures()[0], "bytes_per_s": _sac_figures()[1]}}


def _sac_figures():
    from sac_ilp_plans import CPU_BYTES_PER_S, CPU_FLOPS

    return CPU_FLOPS, CPU_BYTES_PER_S


def pareto(args):
    import torch

    import peakmem

    _sac_ilp_ready()

    g = torch.Generator().manual_seed(0)
    idx, targets = torch.randint(0, 512, (4, 128), generator=g), torch.randint(0, 512, (4, 128), generator=g)
    from step_models import checkpoint_first

    out = {}
    for name, plain, ckpt_flops in _stack_models()[: 1 if args.quick else None]:
        def make(plain=plain):
            torch.manual_seed(0)
            return plain(layers=4)

        model = make()
        thunder_peak = _measured(peakmem, model, idx, targets, name).peak_bytes
        # The first k blocks checkpointed, k = 1..4: their added FLOPs at
        # least k quarters of every block's matmuls (ckpt_flops).
        checkpointing = [{"blocks": k, "flops_at_least": ckpt_flops * k // 4,
                          "peak": _measured(peakmem, checkpoint_first(make(), k), idx, targets,
                                            f"{name}, {k} blocks checkpointed").peak_bytes} for k in range(1, 5)]
        ckpt_peak = checkpointing[-1]["peak"]
        start = time.perf_counter()
        rc = peakmem.estimate_step(model, idx, targets, recompute=ckpt_peak * 3 // 4).recomputation
        seconds = time.perf_counter() - start
        frontier, flops = [(thunder_peak, 0)], 0
        for _, peak, added in rc.steps:
            flops += added
            frontier.append((peak, flops))
        chosen = [n for n, _, _ in rc.steps]
        measured = {}
        for c in checkpointing:
            at = _cheapest(frontier, c["peak"])
            c["peakmem"] = None if at is None else {"peak": at[1], "added_flops": at[2]}
            if at:
                r = _measured(peakmem, make(), idx, targets, f"{name} at {c['peak']}",
                              recompute=tuple(chosen[:at[0]]))
                measured[at[1]] = c["peakmem"]["measured"] = r.peak_bytes
        lowest = _measured(peakmem, make(), idx, targets, f"{name} lowest", recompute=tuple(chosen))
        measured[frontier[-1][0]] = lowest.peak_bytes
        print(f"\n| {name}, batch 4 (Thunder) | peak | added FLOPs | peakmem at that budget: peak | measured | "
              f"added FLOPs | fewer |")
        print("|---|---:|---:|---:|---:|---:|---|")
        print(f"| Thunder as is | {thunder_peak:,} | 0 | | | | |")
        for c in checkpointing:
            p = c["peakmem"]
            print(f"| checkpointing {c['blocks']} block{'s' if c['blocks'] > 1 else ''} | {c['peak']:,} | "
                  f">= {c['flops_at_least']:,} | "
                  + (f"{p['peak']:,} | {p['measured']:,} | {p['added_flops']:,} | "
                     f"{'yes' if p['added_flops'] < c['flops_at_least'] else 'NO'} |" if p else "does not reach it | | | NO |"))
        print(f"| peakmem, lowest ({len(rc.names)} choices, {rc.simulations} simulations, {seconds:.0f} s) | "
              f"{rc.peak_after:,} | {rc.added_flops:,} | | {lowest.peak_bytes:,} | | |")
        print("\nfrontier (peak bytes, added FLOPs): " + ", ".join(f"({p:,}, {f:,})" for p, f in frontier))
        if any(c["peakmem"] is None or c["peakmem"]["added_flops"] >= c["flops_at_least"] for c in checkpointing):
            raise SystemExit(f"error: {name}: peakmem's plan does not meet checkpointing with fewer FLOPs")
        sac = _sac_comparison(peakmem, name, make, idx, targets, thunder_peak, frontier,
                              lambda k: tuple(chosen[:k]))
        out[name] = {"thunder": thunder_peak, "checkpointing": checkpointing, "frontier": frontier, "measured": measured,
                     "search_seconds": seconds, "simulations": rc.simulations, "sac_ilp": sac}
    if args.plot:
        _plot(out, args.plot)
    return out


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


def _plot(out, path):
    def draw(ax, r):
        peaks, flops = zip(*r["frontier"])
        ax.step([f / 1e9 for f in flops], [p / 1e6 for p in peaks], where="post", label="peakmem plans")
        ax.plot([0], [r["thunder"] / 1e6], "o", label="Thunder as is")
        ax.plot([c["flops_at_least"] / 1e9 for c in r["checkpointing"]], [c["peak"] / 1e6 for c in r["checkpointing"]],
                "s", label="checkpointing the first k blocks (FLOPs: their matmuls)")
        if "sac_ilp" in r:
            pts = r["sac_ilp"]["points"]
            ax.plot([p["sac_added_flops"] / 1e9 for p in pts], [p["sac_measured"] / 1e6 for p in pts], "^",
                    label="SAC ILP's plans (eager PyTorch)")

    _figure(out, path, draw, "added GFLOPs", "step peak (MB)", "{name}, batch 4, seq 128")


def eager_pareto(args):
    import torch

    _sac_ilp_ready()
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from eager_frontier import Frontier
    from step_models import GPT, LlamaLM

    g = torch.Generator().manual_seed(0)
    inputs = (torch.randint(0, 512, (4, 128), generator=g), torch.randint(0, 512, (4, 128), generator=g))
    out = {}
    for name, cls in [("GPT x4", GPT), ("LlamaLM x4", LlamaLM)][: 1 if args.quick else None]:
        def make(cls=cls):
            torch.manual_seed(0)
            return cls(layers=4)

        start = time.perf_counter()
        f = Frontier(make, inputs, list(SAC_SHARES))
        print(f"\n| {name}, batch 4, eager | budget | measured peak | estimated | added FLOPs | bit-identical |")
        print("|---|---:|---:|---:|---:|---|")
        for p in f.rows():
            budget = "" if p.budget is None else f"{p.budget:,}"
            print(f"| {p.kind} | {budget} | {p.measured:,} | {p.estimated:,} | {p.added_flops:,} | {p.identical} |")
        print("\nat each budget, the FLOPs each plan adds (peakmem's plan for that budget beside it):")
        for p in (*f.checkpointing, *f.sac):
            q = f.peakmem_at(p.measured)
            print(f"  {p.kind} at {p.measured:,}: {p.added_flops:,}; peakmem {q.added_flops:,} at {q.measured:,}"
                  f"{'' if q.measured <= p.measured and q.added_flops <= p.added_flops else '  <- NOT BETTER'}")
        out[name] = {"seconds": time.perf_counter() - start,
                     "points": [{k: v for k, v in vars(p).items() if k != "plan"} for p in f.rows()]}
    if args.plot:
        _plot_eager(out, args.plot.with_name(args.plot.stem + "-eager" + args.plot.suffix))
    return out


def _plot_eager(out, path):
    marks = {"none": ("o", "eager PyTorch as is"), "checkpoint": ("s", "checkpointing the first k blocks"),
             "sac": ("^", "SAC ILP's plans"), "peakmem": ("x", "peakmem's plans")}

    def draw(ax, r):
        for kind, (mark, label) in marks.items():
            pts = [p for p in r["points"] if p["kind"].split()[0] == kind]
            ax.plot([p["added_flops"] / 1e9 for p in pts], [p["measured"] / 1e6 for p in pts], mark, label=label)

    _figure(out, path, draw, "added GFLOPs (measured)", "step peak (MB, measured)",
            "{name}, batch 4, seq 128, eager")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4, help="Llama blocks in part 2")
    ap.add_argument("--quick", action="store_true", help="a few corpus steps and models only")
    ap.add_argument("--only", nargs="*",
                    choices=["corpus", "llama_checkpointing", "budget_mode", "monotone", "pareto", "eager_pareto"],
                    help="run these parts only")
    ap.add_argument("--plot", type=Path, help="parts 5 and 6: draw the frontiers to this PNG (and its -eager twin)")
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
