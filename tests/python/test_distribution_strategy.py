"""estimate_step(strategy=, world_size=, rank=): Thunder's own FSDP or DDP
transform, run as that rank of a fake process group made for the call
(peakmem.distribution), in this process, one rank after another; equal to
measure_step with the same arguments to the byte, and the same on `meta`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def program(thunder):
    sys.path.insert(0, str(REPO / "scripts"))
    import make_distributed_corpus

    return make_distributed_corpus.load_program()


def sum_loss(output, x):
    return output.sum()


def test_each_rank_is_estimated_as_measured_in_one_process(program):
    import torch
    import torch.distributed as dist

    import peakmem

    (x,) = program.make_inputs()
    for strategy, world_size, rank in [("fsdp", 4, 3), ("ddp", 2, 1)]:
        common = dict(loss_fn=sum_loss, optimizer=torch.optim.AdamW, strategy=strategy, world_size=world_size,
                      rank=rank)
        estimate = peakmem.estimate_step(program.make_model(), x, **common, frontend="thunder")
        measured = peakmem.measure_step(program.make_model(), x, **common, frontend="thunder")
        assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
        # The rank's parameters: FSDP on 4 ranks holds a quarter of each
        # (the head's 30 rows padded to 32: 136,480 bytes,
        # tests/data/distributed/README.md); DDP all 544,888.
        assert estimate.by_category["parameters"] == {"fsdp": 136_480, "ddp": 544_888}[strategy]
        # NCCL's buffers, apart (docs/nccl-buffers.md, 16 channels on one
        # node): FSDP's all-gather and reduce-scatter connect the ring, 16 x
        # 12 MiB, with 16 x 6 + 4 MiB of channel structures: 292 MiB; DDP's
        # all-reduce the tree as well: 484 MiB. The measurement has none.
        assert estimate.nccl_estimate["total_bytes"] == {"fsdp": 292, "ddp": 484}[strategy] << 20
        assert measured.nccl_estimate is None
        assert not dist.is_initialized()  # the group was the call's
    with torch.device("meta"):
        meta_model = program.make_model()
    meta = peakmem.estimate_step(meta_model, x.to("meta"), loss_fn=sum_loss, optimizer=torch.optim.AdamW,
                                 strategy="fsdp", world_size=4, rank=3, frontend="thunder")
    fsdp = peakmem.estimate_step(program.make_model(), x, loss_fn=sum_loss, optimizer=torch.optim.AdamW,
                                 strategy="fsdp", world_size=4, rank=3, frontend="thunder")
    assert (meta.peak_bytes, meta.final_bytes) == (fsdp.peak_bytes, fsdp.final_bytes)


@pytest.mark.parametrize("kwargs,message", [
    ({"strategy": "fsdp"}, "strategy='fsdp' needs world_size="),
    ({"strategy": "tp", "world_size": 2}, "unknown strategy 'tp'"),
    ({"world_size": 2}, "world_size= and rank= go with strategy="),
    ({"strategy": "fsdp", "world_size": 2, "rank": 2}, r"rank must be in \[0, 2\), got 2"),
    ({"strategy": "fsdp", "world_size": 2, "transform": lambda jm: jm}, "pass strategy= or transform=, not both"),
])
def test_strategy_arguments_that_do_not_fit_are_errors(program, kwargs, message):
    import peakmem

    (x,) = program.make_inputs()
    with pytest.raises(ValueError, match=message):
        peakmem.estimate_step(program.make_model(), x, loss_fn=sum_loss, **kwargs, frontend="thunder")
