#!/usr/bin/env python3
"""peakmem.estimate_step on models too large for this machine, on ``meta``.

    .venv/bin/python bench/bench_step.py [--model llama7b|stack] [--json OUT]

llama7b: tests/python/step_models.py's LlamaLM.seven_b() (Llama-2-7B's
shapes: 32 layers, dim 4096, 32 heads, SwiGLU 11008, vocab 32000; 6.74e9
parameters), bf16, batch --batch, sequence --seq, AdamW with its defaults,
--steps steps (the second has AdamW's state). Everything is on ``meta``:
nothing of the model's 13.5 GB is allocated, and the process's peak RSS is
reported to show it.

stack: bench_python.py's residual MLP stack (--layers 400: a 20,805-bsym
forward and a 50,007-bsym backward) as a module with a sum loss, on real
CPU tensors.

Reported: the step's peak and final bytes, the phase at the peak, the
breakdown, and the wall time split into Thunder's tracing (the baseline:
what any Thunder user pays to get the traces) and peakmem's own part (the
simulation of both traces, the optimizer's program and the join), with
peakmem's share of the total, and the runtime model's own time on the two
traces (read from the live TraceCtx, with the full report) in statements/s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))


def llama7b(args):
    import torch

    from step_models import LlamaLM

    with torch.device("meta"):
        model = LlamaLM.seven_b(seq=args.seq).to(torch.bfloat16)
        idx = torch.randint(0, 32000, (args.batch, args.seq))
        targets = torch.randint(0, 32000, (args.batch, args.seq))
    return model, (idx, targets), None, {"optimizer": torch.optim.AdamW}


def stack(args):
    import torch
    import torch.nn.functional as F

    layers, width = args.layers, 8

    class Stack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.Ws = torch.nn.Parameter(torch.randn(layers, width, width))
            self.Bs = torch.nn.Parameter(torch.randn(layers, width))
            self.Gs = torch.nn.Parameter(torch.randn(layers, width))

        def forward(self, x):
            for i in range(layers):
                h = F.layer_norm(x, (width,), self.Gs[i], None)
                x = x + F.gelu(F.linear(h, self.Ws[i], self.Bs[i]))
            return x.sum()

    torch.manual_seed(0)
    return Stack(), (torch.randn(4, width),), None, {
        "optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.01}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("llama7b", "stack"), default="llama7b")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--layers", type=int, default=400)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--budget", default="80GiB")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--export", metavar="DIR",
                    help="also write the step as a step file for peakmem_bench --step_traces and "
                         "`peakmem step`: DIR/<model>.step.json (peakmem.export_step)")
    args = ap.parse_args(argv)

    import peakmem

    model, inputs, loss_fn, setup = (llama7b if args.model == "llama7b" else stack)(args)
    parameters = sum(p.numel() for p in model.parameters())
    start = time.perf_counter()
    r = peakmem.estimate_step(model, *inputs, loss_fn=loss_fn, steps=args.steps,
                              budget=args.budget, **setup, frontend="thunder")
    wall = time.perf_counter() - start
    share = r.seconds["peakmem"] / wall
    out = {
        "model": args.model, "parameters": parameters, "steps": args.steps,
        "forward_bsyms": len(r.forward.statements), "backward_bsyms": len(r.backward.statements),
        "peak_bytes": r.peak_bytes, "final_bytes": r.final_bytes,
        "phase_at_peak": r.phase_at_peak, "step_at_peak": r.step_at_peak,
        "by_category": r.by_category, "budget": r.budget, "fits": r.fits,
        "wall_s": wall, "thunder_s": r.seconds["thunder"], "peakmem_s": r.seconds["peakmem"],
        "peakmem_share": share, "simulate_s": r.seconds["simulate"],
        "simulated_statements_per_s": (len(r.forward.statements) + len(r.backward.statements)) / r.seconds["simulate"],
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    gib = 1 << 30
    print(f"{args.model}: {parameters / 1e9:.2f}e9 parameters, {out['forward_bsyms']} forward and "
          f"{out['backward_bsyms']} backward statements")
    print(f"  peak {r.peak_bytes} bytes ({r.peak_bytes / gib:.2f} GiB) in the {r.phase_at_peak} of "
          f"step {r.step_at_peak}; final {r.final_bytes / gib:.2f} GiB; fits {args.budget}: {r.fits}")
    for k, v in r.by_category.items():
        print(f"    {k:16} {v / gib:8.2f} GiB")
    print(f"  wall {wall:.2f} s: Thunder {r.seconds['thunder']:.2f} s, peakmem "
          f"{r.seconds['peakmem']:.2f} s ({100 * share:.1f} %); max RSS "
          f"{out['max_rss_bytes'] / gib:.2f} GiB")
    print(f"  the runtime model on both traces (read live): {r.seconds['simulate']:.3f} s, "
          f"{out['simulated_statements_per_s'] / 1e6:.2f} M statements/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    if args.export:
        export(args, model, inputs, loss_fn, setup)
    return 0


def export(args, model, inputs, loss_fn, setup) -> None:
    """The step as a step file (peakmem.export_step), for peakmem_bench
    --step_traces."""
    import peakmem

    os.makedirs(args.export, exist_ok=True)
    path = os.path.join(args.export, f"{args.model}.step.json")
    peakmem.export_step(model, *inputs, path=path, loss_fn=loss_fn, steps=args.steps, **setup, frontend="thunder")
    print(f"  exported {path}")


if __name__ == "__main__":
    sys.exit(main())
