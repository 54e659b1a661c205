"""One rank's whole training step under Thunder's FSDP, DDP and tensor
parallelism, estimated by
peakmem.estimate_step(transform=...) and measured by measure_step in the same
process under torch's fake process group (tests/python/distributed_steps.py,
one process per rank): equal to the byte, peak and final, for no optimizer,
SGD with momentum and AdamW over 1 and 2 steps, and the estimate on `meta`
inputs equal to it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# program.py's parameters: 544,888 bytes in f32 (tests/data/distributed).
UNSHARDED = 544_888


def run(strategy: str, world_size: int, rank: int) -> list[dict]:
    done = subprocess.run([sys.executable, str(HERE / "distributed_steps.py"), strategy, str(world_size), str(rank)],
                          check=True, capture_output=True, text=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


# Two pairs here (DDP's step is in test_distribution_strategy.py); every
# pair of the corpus: `python tests/python/distributed_steps.py STRATEGY W R`.
@pytest.mark.parametrize("strategy,world_size,rank", [("fsdp-zero2", 4, 3), ("tp-row", 2, 1)])
def test_a_ranks_step_is_estimated_to_the_byte(strategy, world_size, rank):
    results = run(strategy, world_size, rank)
    assert len(results) == 6
    for r in results:
        assert r["estimate"] == r["measured"], r
        assert r["meta"] == r["estimate"], r
    # FSDP holds the rank's shards (the head's 30 rows padded to 32: 136,480
    # bytes on 4 ranks, tests/data/distributed/README.md); DDP every parameter.
    # Tensor parallel shards each block's layer: column-wise fc1 (256 x 128
    # weight and 256 bias, 132,096 bytes) to a quarter on 4 ranks, 99,072
    # fewer bytes a block; row-wise fc2's weight (128 x 256, 131,072 bytes;
    # its bias is not sharded) to a half on 2 ranks, 65,536 fewer a block.
    held = {r["parameters"] for r in results}
    want = {"fsdp-zero2": 136_480, "ddp": UNSHARDED, "tp-column": UNSHARDED - 2 * 99_072,
            "tp-row": UNSHARDED - 2 * 65_536}[strategy]
    assert held == {want}


def test_a_world_size_that_does_not_divide_a_sharded_layer_is_an_error_naming_it():
    # Tensor parallelism splits fc1's 256 rows over the ranks without padding
    # (thunder/distributed/__init__.py _shard_tensor, allow_padding_for_fsdp=False):
    # 3 ranks cannot, and the estimate says which parameter and why.
    script = f"""
import sys, torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
sys.path.insert(0, {str(HERE.parents[1] / "scripts")!r})
import make_distributed_corpus as m
m.make_corpus.import_thunder()
import peakmem
dist.init_process_group("fake", rank=0, world_size=3, store=FakeStore())
program = m.load_program()
try:
    peakmem.estimate_step(program.make_model(), *program.make_inputs(), loss_fn=lambda o, x: o.sum(),
                          transform=lambda jm: program.STRATEGIES["tp-column"](jm, torch.device("cpu")),
                          frontend="thunder")
except RuntimeError as e:
    print(e)
"""
    done = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    assert "the transform failed" in done.stdout
    assert "'model.blocks.0.fc1.weight' (256) to be divisible by the world size (3)" in done.stdout
