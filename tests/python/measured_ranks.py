"""The tables of distributed steps measured as gloo ranks
(tests/data/<strategy>/measured.json, written by
scripts/measure_distributed_steps.py) and the estimate of one of their
ranks in this process, for test_data_parallel.py and test_fully_sharded.py."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Callable, Iterator

import torch

import peakmem

DATA = Path(__file__).resolve().parents[1] / "data"


def table(strategy: str) -> dict:
    return json.loads((DATA / strategy / "measured.json").read_text())


@contextlib.contextmanager
def intra_op_threads(n: int) -> Iterator[None]:
    """`n` intra-op threads, as each measured rank ran (the CPU kernels'
    scratch depends on them)."""
    was = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(was)


def estimate(make: Callable[[], tuple], strategy: str, world_size: int, rank: int, on_meta: bool = False):
    """The rank of the step `make()` gives, estimated in this process."""
    model, inputs, options = make()
    if on_meta:
        model = copy.deepcopy(model).to("meta")
    return peakmem.estimate_step(model, *inputs, **options, frontend="eager", strategy=strategy,
                                 world_size=world_size, rank=rank)
