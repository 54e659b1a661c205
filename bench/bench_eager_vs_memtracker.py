#!/usr/bin/env python3
"""peakmem's eager front end beside PyTorch's own MemTracker, on the same steps.

    .venv/bin/python bench/bench_eager_vs_memtracker.py [--json OUT]

For each tiny random ``transformers`` model of the test zoo
(tests/python/transformers_zoo.py: 27 families, causal and masked LMs,
encoder-decoders, a mixture of experts, vision, speech, contrastive) and
torchvision's ResNet-50 and a small U-Net (tests/python/vision_models.py),
one AdamW step on the CPU, and one SGD step for eager_models.py's five:

* truth: ``peakmem.measure_step(..., frontend="eager")``, the step run for
  real under the PyTorch profiler (after a warm-up step);
* peakmem: ``peakmem.estimate_step(..., frontend="eager")`` on the CPU
  model (it records on meta stand-ins);
* MemTracker: ``torch.distributed._tools.mem_tracker.MemTracker`` tracking
  the model and optimizer around the same step run for real (its own way
  of use: ``track_external``, then the step inside ``with tracker:``), its
  peak the ``Total`` of ``get_tracker_snapshot("peak")`` on the CPU.

Printed per step: each tool's bytes off the measured peak and its seconds;
a tool that raises is a miss, listed with its error.
The baseline is MemTracker in the same run: the point is to match its
accuracy and time, and to add what it lacks (reserved bytes, the peak's
tensors, the report formats, the CLI).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))


def memtracker_peak(model, loss_of, optimizer):
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker

    opt = optimizer(model.parameters())
    tracker = MemTracker()
    tracker.track_external(model, opt)
    start = time.perf_counter()
    with tracker:
        loss = loss_of(model)
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


def steps():
    """(name, model, peakmem's step arguments, the loss MemTracker's step
    takes from the model) for each step."""
    import torch
    import torch.nn.functional as F

    from eager_models import FAMILIES
    from transformers_zoo import ALL
    from vision_models import MODELS

    for family in sorted(ALL):
        for optimizer in (torch.optim.AdamW, torch.optim.SGD) if family in FAMILIES else (torch.optim.AdamW,):
            model, kwargs = ALL[family]("cpu")
            yield (f"{family} {optimizer.__name__}", model, {"kwinputs": kwargs, "optimizer": optimizer},
                   lambda m, kwargs=kwargs: m(**kwargs).loss)
    for name in sorted(MODELS):
        model, (x, y) = MODELS[name]("cpu")
        yield (f"{name} AdamW", model, {"inputs": (x, y), "model_inputs": 1, "optimizer": torch.optim.AdamW,
                                        "loss_fn": lambda out, x, y: F.cross_entropy(out, y)},
               lambda m, x=x, y=y: F.cross_entropy(m(x), y))


def _off(row: dict, tool: str) -> str:
    return f"{row[tool + '_off']:,}" if f"{tool}_off" in row else "raised"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    import peakmem

    rows = []
    print(f"{'step':<18} {'measured':>10} {'peakmem off':>12} {'s':>6} {'MemTracker off':>15} {'s':>6}")
    for name, model, step, loss_of in steps():
        inputs = step.pop("inputs", ())
        step["frontend"] = "eager"
        truth = peakmem.measure_step(model, *inputs, **step).peak_bytes
        row = {"step": name, "measured": truth}
        start = time.perf_counter()
        try:
            estimate = peakmem.estimate_step(model, *inputs, **step)
            row["peakmem_off"] = estimate.peak_bytes - truth
        except Exception as e:  # a miss, listed
            row["peakmem_error"] = f"{type(e).__name__}: {e}"[:200]
        row["peakmem_s"] = time.perf_counter() - start
        try:
            theirs, row["memtracker_s"] = memtracker_peak(model, loss_of, step["optimizer"])
            row["memtracker_off"] = theirs - truth
        except Exception as e:
            row["memtracker_error"] = f"{type(e).__name__}: {e}"[:200]
        rows.append(row)
        print(f"{name:<18} {truth:>10,} {_off(row, 'peakmem'):>12} {row['peakmem_s']:>6.2f} "
              f"{_off(row, 'memtracker'):>15} {row.get('memtracker_s', float('nan')):>6.2f}")
    from provenance import side_by_side_summary, write_rows

    side_by_side_summary(rows, "memtracker", "MemTracker")
    write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
