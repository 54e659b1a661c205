"""estimate_step(strategy="ddp", world_size=, rank=, frontend="eager"):
torch's DistributedDataParallel around the step's model, one rank of it
recorded in this process (peakmem.step.data_parallel), against the same
ranks run for real as gloo processes (tests/data/ddp/measured.json, written
by scripts/measure_distributed_steps.py --strategy ddp: the collectives moved the data)."""

from __future__ import annotations

import pytest
import torch.distributed as dist

import peakmem
from ddp_steps import STEPS, THREADS
from measured_ranks import estimate, intra_op_threads, table

MEASURED = table("ddp")
ROWS = MEASURED["rows"]


@pytest.fixture
def threads():
    with intra_op_threads(MEASURED["threads_per_rank"]):
        yield


def _estimate(name: str, world_size: int, rank: int, on_meta: bool = False):
    return estimate(STEPS[name], "ddp", world_size, rank, on_meta)


def test_the_table_covers_every_step_and_rank():
    assert MEASURED["threads_per_rank"] == THREADS and MEASURED["backend"] == "gloo"
    seen = {(r["name"], r["world_size"], r["rank"]) for r in ROWS}
    assert seen == {(n, w, r) for n in STEPS for w in (2, 4) for r in range(w)}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['name']}-{r['world_size']}-{r['rank']}")
def test_each_rank_is_estimated_as_the_gloo_rank_measured(threads, row):
    estimate = _estimate(row["name"], row["world_size"], row["rank"])
    assert (estimate.peak_bytes, estimate.final_bytes) == (row["peak_bytes"], row["final_bytes"])
    assert not dist.is_initialized()  # the group was the call's


def test_the_buckets_are_the_trainable_parameters_bytes_held_as_gradients(threads):
    # One flat bucket tensor per bucket, every trainable parameter in one
    # of them: the MLP's 525,568 floats (2,102,272 bytes) once more, beside
    # the gradients themselves after the backward.
    model, inputs, options = STEPS["mlp_adamw"]()
    trainable = sum(p.numel() * p.element_size() for p in model.parameters())
    assert trainable == 2_102_272
    ddp = _estimate("mlp_adamw", 2, 0)
    plain = peakmem.estimate_step(model, *inputs, **options, frontend="eager")
    assert ddp.by_category["gradients"] == plain.by_category["gradients"] + trainable
    assert ddp.peak_bytes == plain.peak_bytes + trainable
    assert "DDP gradient bucket 0" in ddp.report.to_text()  # named among what is alive at the peak


def test_a_meta_model_is_estimated_as_the_real_one(threads):
    for name in ("mlp_adamw_3_steps", "gpt_lm_adamw"):
        real, meta = _estimate(name, 4, 3), _estimate(name, 4, 3, on_meta=True)
        assert (meta.peak_bytes, meta.final_bytes) == (real.peak_bytes, real.final_bytes)


def test_measure_step_runs_the_rank_in_one_process_as_estimated(threads):
    # The instant group: the reducer's own code on real tensors, no data
    # moved; its figures are the gloo rank's (the table's).
    model, inputs, options = STEPS["mlp_adamw_3_steps"]()
    measured = peakmem.measure_step(model, *inputs, **options, frontend="eager", strategy="ddp", world_size=2,
                                    rank=1)
    row = next(r for r in ROWS if (r["name"], r["world_size"], r["rank"]) == ("mlp_adamw_3_steps", 2, 1))
    assert (measured.peak_bytes, measured.final_bytes) == (row["peak_bytes"], row["final_bytes"])


@pytest.mark.parametrize("kwargs,message", [
    ({"strategy": "fsdp-zero2", "world_size": 2, "frontend": "eager"},
     "strategy='fsdp-zero2' on the 'eager' front end is not"),
    ({"strategy": "ddp", "frontend": "eager"}, "strategy='ddp' needs world_size="),
    ({"strategy": "ddp", "world_size": 2, "rank": 2, "frontend": "eager"}, r"rank must be in \[0, 2\), got 2"),
])
def test_strategies_the_eager_front_end_does_not_model_are_errors(kwargs, message):
    model, inputs, options = STEPS["mlp_adamw"]()
    with pytest.raises(ValueError, match=message):
        peakmem.estimate_step(model, *inputs, **options, **kwargs)
