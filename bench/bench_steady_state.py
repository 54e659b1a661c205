"""The steady step's cost: ``estimate_step``'s default (steps until the
step's memory repeats) against the first step alone (``steps=1``), paired
in one process, on a Llama-2-7B-shaped model on ``meta`` (the README's
step: AdamW, sequence 2048, an H100), on the eager front end.

    python bench/bench_steady_state.py [--rounds 3] [--layers 32] [--json OUT]

Each round times both calls back to back, alternating which goes first; the
figure is the median of the rounds' ratios (steady / first step) of wall
seconds, with each side's median. The peaks are printed too: the steady
step's is the run's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _llama(layers: int):
    import torch
    import transformers

    config = transformers.LlamaConfig(num_hidden_layers=layers)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=32, help="Llama-2-7B has 32")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import torch

    import peakmem
    from provenance import write_rows

    model = _llama(args.layers)
    ids = torch.zeros(1, 2048, dtype=torch.int64, device="meta")
    options = {"kwinputs": {"input_ids": ids, "labels": ids}, "optimizer": torch.optim.AdamW,
               "device": "cuda:h100", "frontend": "eager"}

    def timed(**more) -> tuple[float, object]:
        start = time.perf_counter()
        report = peakmem.estimate_step(model, **options, **more)
        return time.perf_counter() - start, report

    timed(steps=1)  # warm: the first recording in a process imports what it needs
    first_s, steady_s, ratios = [], [], []
    for i in range(args.rounds):
        order = ["first", "steady"] if i % 2 == 0 else ["steady", "first"]
        got = {}
        for which in order:
            got[which] = timed(steps=1) if which == "first" else timed()
        first_s.append(got["first"][0])
        steady_s.append(got["steady"][0])
        ratios.append(got["steady"][0] / got["first"][0])
        first, steady = got["first"][1], got["steady"][1]
    row = {"model": f"Llama-2-7B shapes, {args.layers} layers, AdamW, sequence 2048, cuda:h100, eager",
           "first_step_s": statistics.median(first_s), "steady_s": statistics.median(steady_s),
           "ratio_median": statistics.median(ratios), "ratios": ratios,
           "first_step_peak_bytes": first.peak_bytes, "steady_peak_bytes": steady.peak_bytes,
           "steady_steps": steady.steps, "steady_step_at_peak": steady.step_at_peak}
    print(f"{row['model']}: steps=1 {row['first_step_s']:.1f} s, steady ({steady.steps} steps) "
          f"{row['steady_s']:.1f} s: ratio {row['ratio_median']:.2f} (median of {args.rounds}); peak "
          f"{first.peak_bytes:,} -> {steady.peak_bytes:,} bytes (step {steady.step_at_peak})")
    write_rows(args.json, [row])


if __name__ == "__main__":
    main()
