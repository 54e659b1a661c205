#!/usr/bin/env python3
"""peakmem's eager front end beside PyTorch's own MemTracker, on the same steps.

    .venv/bin/python bench/bench_eager_vs_memtracker.py [--json OUT]

For each tiny random ``transformers`` model of tests/python/eager_models.py
(GPT-2, Llama, BERT, T5, ViT), one AdamW step and one SGD step on the CPU:

* truth: ``peakmem.measure_step(..., frontend="eager")``, the step run for
  real under the PyTorch profiler (after a warm-up step);
* peakmem: ``peakmem.estimate_step(..., frontend="eager")`` on the CPU
  model (it records on meta stand-ins);
* MemTracker: ``torch.distributed._tools.mem_tracker.MemTracker`` tracking
  the model and optimizer around the same step run for real (its own way
  of use: ``track_external``, then the step inside ``with tracker:``), its
  peak the ``Total`` of ``get_tracker_snapshot("peak")`` on the CPU.

Printed per step: each tool's bytes off the measured peak and its seconds.
The baseline is MemTracker in the same run: the point is to match its
accuracy and time, and to add what it lacks (reserved bytes, the peak's
tensors, the report formats, the CLI).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))


def memtracker_peak(model, kwargs, optimizer):
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker

    opt = optimizer(model.parameters())
    tracker = MemTracker()
    tracker.track_external(model, opt)
    start = time.perf_counter()
    with tracker:
        loss = model(**kwargs).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
    seconds = time.perf_counter() - start
    peak = tracker.get_tracker_snapshot("peak")
    total = sum(v.get("Total", 0) for d, v in peak.items() if torch.device(d).type == "cpu")
    for p in model.parameters():
        p.grad = None
    return total, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    import torch

    import peakmem
    from eager_models import FAMILIES

    rows = []
    print(f"{'step':<12} {'measured':>10} {'peakmem off':>12} {'s':>6} {'MemTracker off':>15} {'s':>6}")
    for family in sorted(FAMILIES):
        for optimizer in (torch.optim.AdamW, torch.optim.SGD):
            model, kwargs = FAMILIES[family]("cpu")
            truth = peakmem.measure_step(model, kwinputs=kwargs, optimizer=optimizer, frontend="eager").peak_bytes
            start = time.perf_counter()
            estimate = peakmem.estimate_step(model, kwinputs=kwargs, optimizer=optimizer, frontend="eager")
            ours = time.perf_counter() - start
            theirs, their_s = memtracker_peak(model, kwargs, optimizer)
            name = f"{family} {optimizer.__name__}"
            row = {"step": name, "measured": truth, "peakmem_off": estimate.peak_bytes - truth, "peakmem_s": ours,
                   "memtracker_off": theirs - truth, "memtracker_s": their_s}
            rows.append(row)
            print(f"{name:<12} {truth:>10,} {row['peakmem_off']:>12,} {ours:>6.2f} {row['memtracker_off']:>15,} "
                  f"{their_s:>6.2f}")
    exact = sum(r["peakmem_off"] == 0 for r in rows)
    print(f"peakmem exact on {exact} of {len(rows)} steps; MemTracker exact on "
          f"{sum(r['memtracker_off'] == 0 for r in rows)} of {len(rows)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
