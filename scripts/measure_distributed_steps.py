#!/usr/bin/env python3
"""Measures distributed steps on the eager front end for real: every rank
of each step run as its own process of a gloo process group on the CPU,
measured by ``peakmem.measure_step`` (the PyTorch profiler), with the
collectives moving the data. The tables are the truth peakmem's one-process
estimates are checked against.

    ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python scripts/measure_distributed_steps.py --strategy ddp|fsdp [--out FILE]

``ddp``: torch's DistributedDataParallel, the steps of
tests/python/ddp_steps.py, FILE tests/data/ddp/measured.json (checked by
tests/python/test_data_parallel.py). ``fsdp``: FSDP2's fully_shard, the
steps and wrappings of tests/python/fsdp_steps.py, FILE
tests/data/fsdp/measured.json (tests/python/test_fully_sharded.py). Each
rank runs one intra-op thread (the steps module's THREADS); the script
prints a step whose ranks' figures differ.

The ranks' group is gloo with one worker thread, and each wait on a
collective is followed by a barrier on the group: gloo's worker drops its
reference to a finished collective's tensors after the waiting thread has
gone on, and a tensor whose last reference goes there is freed where the
profiler does not see it (FSDP2's all-gather and reduce-scatter buffers, at
every collective). The one worker takes the barrier only after it has let go
of the collective before it, so each tensor is freed by the program's own
thread, as in a process whose collectives do not run on a worker.

Each rank's step is measured REPEATS times and the smallest figures kept,
with how many runs were above them and how many the profiler's walk
refused (it saw an address allocated again with no free between: the free
was on a thread it does not follow); a rank with no run left has an
``error`` in place of its figures. gloo's worker threads hold each
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


STEPS_MODULES = {"ddp": "ddp_steps", "fsdp": "fsdp_steps"}
GLOO_ONE_WORKER = "gloo-one-worker"


def _gloo_with_one_worker(opts, _backend_options):
    """ProcessGroupGloo with one worker thread (its default is two)."""
    from torch._C._distributed_c10d import ProcessGroupGloo

    options = ProcessGroupGloo._Options()
    options._threads = 1
    options._timeout = opts.timeout
    options._devices = [ProcessGroupGloo.create_default_device()]
    return ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, options)


def _waits_until_the_worker_lets_go() -> None:
    """Each ``Work.wait()`` followed by a barrier (see the module docstring)."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import Work

    wait = Work.wait
    inside: list = []

    def wait_then_barrier(self, *args, **kwargs):
        out = wait(self, *args, **kwargs)
        if not inside:
            inside.append(True)
            try:
                dist.barrier()
            finally:
                inside.clear()
        return out

    Work.wait = wait_then_barrier


def _rank(strategy: str, rank: int, world_size: int, port: int, names: list, queue) -> None:
    sys.path.insert(0, TESTS)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import importlib

    import torch
    import torch.distributed as dist

    import peakmem

    steps = importlib.import_module(STEPS_MODULES[strategy])
    STEPS, THREADS = steps.STEPS, steps.THREADS

    torch.set_num_threads(THREADS)
    dist.Backend.register_backend(GLOO_ONE_WORKER, _gloo_with_one_worker, extended_api=True, devices=["cpu"])
    dist.init_process_group(GLOO_ONE_WORKER, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=120))
    _waits_until_the_worker_lets_go()
    rows = []
    for name in names:
        figures, unseen = [], []
        for _ in range(REPEATS):
            model, inputs, options = STEPS[name]()
            try:
                measured = peakmem.measure_step(model, *inputs, **options, frontend="eager", strategy=strategy,
                                                world_size=world_size, rank=rank)
            except RuntimeError as e:  # a free on a thread the profiler does not follow, seen by its address
                if "second allocation at live address" not in str(e):
                    raise
                unseen.append(str(e))
                continue
            figures.append((measured.peak_bytes, measured.final_bytes))
        row = {"name": name, "world_size": world_size, "rank": rank, "runs": REPEATS,
               "runs_with_an_unseen_free": len(unseen)}
        if figures:
            least = min(figures)
            row.update(peak_bytes=least[0], final_bytes=least[1], runs_above=sum(f != least for f in figures))
        else:
            row["error"] = unseen[0]
        rows.append(row)
    dist.destroy_process_group()
    queue.put(rows)


def _result(queue, ranks: list) -> list:
    """The next rank's rows; exits when a rank died without them."""
    import queue as queues

    while True:
        try:
            return queue.get(timeout=5)
        except queues.Empty:
            dead = [p.exitcode for p in ranks if p.exitcode not in (None, 0)]
            if dead:
                sys.exit(f"a rank failed (exit codes {dead}); its traceback is above")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategy", choices=sorted(STEPS_MODULES), required=True)
    parser.add_argument("--out", help="default: tests/data/<strategy>/measured.json")
    parser.add_argument("--port", type=int, default=29561)
    parser.add_argument("--only", nargs="*", help="these steps only (a trial: the table written has only them)")
    args = parser.parse_args()
    out = args.out or os.path.join(HERE, "..", "tests", "data", args.strategy, "measured.json")
    sys.path.insert(0, TESTS)
    import importlib

    import torch
    import torch.multiprocessing as mp

    steps = importlib.import_module(STEPS_MODULES[args.strategy])
    STEPS, THREADS, WORLD_SIZES = steps.STEPS, steps.THREADS, steps.WORLD_SIZES
    names = args.only or list(STEPS)

    context = mp.get_context("spawn")
    rows = []
    for k, world_size in enumerate(WORLD_SIZES):
        queue = context.Queue()
        ranks = [context.Process(target=_rank, args=(args.strategy, r, world_size, args.port + k, names, queue))
                 for r in range(world_size)]
        for p in ranks:
            p.start()
        got = [_result(queue, ranks) for _ in ranks]
        for p in ranks:
            p.join()
            if p.exitcode:
                sys.exit(f"a rank of world size {world_size} failed (exit code {p.exitcode})")
        rows += sorted((r for g in got for r in g), key=lambda r: (r["name"], r["rank"]))
    for name in names:
        for world_size in WORLD_SIZES:
            figures = {(r.get("peak_bytes"), r.get("final_bytes")) for r in rows
                       if r["name"] == name and r["world_size"] == world_size}
            if len(figures) > 1:
                print(f"{name} on {world_size} ranks: the ranks differ {sorted(figures)}")
    import transformers

    table = {"torch": torch.__version__, "transformers": transformers.__version__, "backend": "gloo",
             "gloo_worker_threads": 1, "barrier_after_each_wait": True,
             "strategy": args.strategy,
             "threads_per_rank": THREADS, "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
             "machine": platform.machine(), "rows": rows}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    for r in rows:
        print(f"{r['name']:24} {r['world_size']} ranks, rank {r['rank']}: " + (
            f"peak {r['peak_bytes']:,}, final {r['final_bytes']:,}" if "error" not in r else r["error"]))


if __name__ == "__main__":
    main()
