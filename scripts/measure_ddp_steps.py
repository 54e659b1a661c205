#!/usr/bin/env python3
"""Measures DistributedDataParallel steps for real: every rank of each step
in tests/python/ddp_steps.py run as its own process of a gloo process group
on the CPU, measured by ``peakmem.measure_step`` (the PyTorch profiler), with
the collectives moving the data. The table is the truth
tests/python/test_data_parallel.py checks peakmem's one-process estimates
against.

    ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python scripts/measure_ddp_steps.py [--out FILE]

FILE defaults to tests/data/ddp/measured.json. Each rank runs one intra-op
thread (ddp_steps.THREADS); the script prints a step whose ranks' figures
differ.

Each rank's step is measured REPEATS times and the smallest figures kept,
with how many runs were above them: gloo's worker threads hold each
collective's tensors until they take the next one, and a tensor whose last
reference goes there (the flat tensor DDP broadcasts a module's buffers in,
every forward) is freed where the profiler does not see it, which can only
make a figure larger.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests", "python")
REPEATS = 3


def _rank(rank: int, world_size: int, port: int, names: list, queue) -> None:
    sys.path.insert(0, TESTS)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist

    import peakmem
    from ddp_steps import STEPS, THREADS

    torch.set_num_threads(THREADS)
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=120))
    rows = []
    for name in names:
        figures = []
        for _ in range(REPEATS):
            model, inputs, options = STEPS[name]()
            measured = peakmem.measure_step(model, *inputs, **options, frontend="eager", strategy="ddp",
                                            world_size=world_size, rank=rank)
            figures.append((measured.peak_bytes, measured.final_bytes))
        least = min(figures)
        rows.append({"name": name, "world_size": world_size, "rank": rank, "peak_bytes": least[0],
                     "final_bytes": least[1], "runs": REPEATS,
                     "runs_above": sum(f != least for f in figures)})
    dist.destroy_process_group()
    queue.put(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "ddp", "measured.json"))
    parser.add_argument("--port", type=int, default=29561)
    args = parser.parse_args()
    sys.path.insert(0, TESTS)
    import torch
    import torch.multiprocessing as mp

    from ddp_steps import STEPS, THREADS, WORLD_SIZES

    context = mp.get_context("spawn")
    rows = []
    for k, world_size in enumerate(WORLD_SIZES):
        queue = context.Queue()
        ranks = [context.Process(target=_rank, args=(r, world_size, args.port + k, list(STEPS), queue))
                 for r in range(world_size)]
        for p in ranks:
            p.start()
        got = [queue.get(timeout=900) for _ in ranks]
        for p in ranks:
            p.join()
            if p.exitcode:
                sys.exit(f"a rank of world size {world_size} failed (exit code {p.exitcode})")
        rows += sorted((r for g in got for r in g), key=lambda r: (r["name"], r["rank"]))
    for name in STEPS:
        for world_size in WORLD_SIZES:
            figures = {(r["peak_bytes"], r["final_bytes"]) for r in rows
                       if r["name"] == name and r["world_size"] == world_size}
            if len(figures) > 1:
                print(f"{name} on {world_size} ranks: the ranks differ {sorted(figures)}")
    import transformers

    table = {"torch": torch.__version__, "transformers": transformers.__version__, "backend": "gloo",
             "threads_per_rank": THREADS, "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
             "machine": platform.machine(), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    for r in rows:
        print(f"{r['name']:24} {r['world_size']} ranks, rank {r['rank']}: peak {r['peak_bytes']:,}, "
              f"final {r['final_bytes']:,}")


if __name__ == "__main__":
    main()
