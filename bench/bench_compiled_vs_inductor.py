#!/usr/bin/env python3
"""peakmem's compiled-step estimate beside Inductor's own peak estimate, on the same graphs.

    .venv/bin/python bench/bench_compiled_vs_inductor.py [--json OUT] [NAME ...]

For each entry of the step corpus (tests/python/step_models.py) and the
tiny ``transformers`` GPT-2 and Llama (tests/python/eager_models.py, one
AdamW step), the module compiled with ``torch.compile`` (default mode) on
the CPU:

* truth: ``peakmem.measure_step`` of the compiled module, the step run for
  real under the PyTorch profiler after a warm-up step (Inductor compiles
  there);
* peakmem: ``peakmem.estimate_step`` of the compiled module (it compiles a
  meta replica and records Inductor's programs);
* Inductor: the peak its scheduler scores for each graph it compiles in
  that warm-up (``torch._inductor.memory.estimate_peak_memory``, which
  ``reorder_for_peak_memory`` runs on each candidate order; the order it
  keeps is the lowest), the step's figure the largest over its graphs.
  Inductor scores a graph's own buffers: the parameters, the gradients
  held, the optimizer's state and the tensors the forward saves for the
  backward are outside any one graph, so its figure is below the step's.

Printed per step: each estimate's bytes off the measured peak, and its
seconds (Inductor's: the time of its scoring calls inside the compile).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))


class InductorScores:
    """Inductor's peak estimates, per graph, while installed: the lowest
    score each ``reorder_for_peak_memory`` call gives (its chosen order),
    and the seconds its scoring took."""

    def __init__(self) -> None:
        self.graphs: list[int] = []
        self.seconds = 0.0

    def __enter__(self):
        import torch._inductor.memory as memory

        self.memory = memory
        self.reorder, self.estimate = memory.reorder_for_peak_memory, memory.estimate_peak_memory
        scores: list[int] = []

        def estimate(*args, **kwargs):
            start = time.perf_counter()
            out = self.estimate(*args, **kwargs)
            self.seconds += time.perf_counter() - start
            scores.append(out[0])
            return out

        def reorder(*args, **kwargs):
            scores.clear()
            out = self.reorder(*args, **kwargs)
            if scores:
                self.graphs.append(min(scores))
            return out

        memory.reorder_for_peak_memory, memory.estimate_peak_memory = reorder, estimate
        return self

    def __exit__(self, *exc) -> None:
        self.memory.reorder_for_peak_memory = self.reorder
        self.memory.estimate_peak_memory = self.estimate


def cases():
    """(name, make, inputs, options) for each step benchmarked."""
    import torch

    import eager_models
    from step_models import ENTRIES

    for e in ENTRIES:
        yield e.name, e.make, e.inputs, {"loss_fn": e.loss_fn, **e.setup}
    for family in ("gpt2", "llama"):
        def make(family=family):
            return eager_models.FAMILIES[family]("cpu")[0]

        def inputs(family=family):
            return ()

        kwargs = eager_models.FAMILIES[family]("cpu")[1]
        yield f"transformers_{family}", make, inputs, {"kwinputs": kwargs, "optimizer": torch.optim.AdamW}


def run_case(name, make, inputs, options) -> dict:
    import torch
    import torch._dynamo

    import peakmem

    torch._dynamo.reset()
    torch.manual_seed(0)
    x = inputs()
    compiled = torch.compile(make())
    with torch._inductor.config.patch(fx_graph_cache=False), InductorScores() as inductor:
        measured = peakmem.measure_step(compiled, *x, **options)
    start = time.perf_counter()
    estimate = peakmem.estimate_step(compiled, *x, **options)
    seconds = time.perf_counter() - start
    inductor_peak = max(inductor.graphs) if inductor.graphs else None
    return {
        "name": name, "measured": measured.peak_bytes,
        "peakmem": estimate.peak_bytes, "peakmem_off": estimate.peak_bytes - measured.peak_bytes,
        "peakmem_seconds": round(seconds, 3),
        "inductor_graphs": inductor.graphs, "inductor": inductor_peak,
        "inductor_off": None if inductor_peak is None else inductor_peak - measured.peak_bytes,
        "inductor_seconds": round(inductor.seconds, 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("names", nargs="*", help="only these steps")
    args = parser.parse_args()
    rows = []
    for case in cases():
        if args.names and case[0] not in args.names:
            continue
        row = run_case(*case)
        rows.append(row)
        print(f"{row['name']:48s} measured {row['measured']:>12,}  peakmem {row['peakmem_off']:>+10,} "
              f"({row['peakmem_seconds']:.2f} s)  Inductor {row['inductor_off']:>+12,} "
              f"({row['inductor_seconds']:.3f} s, {len(row['inductor_graphs'])} graphs)", flush=True)
    exact = sum(1 for r in rows if r["peakmem_off"] == 0)
    print(f"peakmem exact on {exact}/{len(rows)}; Inductor's largest graph peak off by "
          f"{min(r['inductor_off'] for r in rows):,} to {max(r['inductor_off'] for r in rows):,} bytes")
    if args.json:
        from provenance import provenance

        with open(args.json, "w") as f:
            json.dump({**provenance(), "rows": rows}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
