"""estimate_step(strategy="fsdp", world_size=, rank=, frontend="eager"):
FSDP2's fully_shard on the step's model, one rank of it recorded in this
process (peakmem.step.fully_sharded), against the same ranks run for real as
gloo processes (tests/data/fsdp/measured.json, written by
scripts/measure_distributed_steps.py --strategy fsdp: the collectives moved
the data)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import peakmem
from fsdp_steps import STEPS, THREADS
from measured_ranks import estimate, intra_op_threads, table

MEASURED = table("fsdp")
ROWS = MEASURED["rows"]

def _in_ci(row: dict) -> bool:
    """The first and last rank of each step in CI; the ranks between are
    the long run's (every rank holds shards of one size here: each
    parameter's first dimension divides by 4)."""
    return row["rank"] in (0, row["world_size"] - 1)


@pytest.fixture
def threads():
    with intra_op_threads(MEASURED["threads_per_rank"]):
        yield


def _estimate(name: str, world_size: int, rank: int, on_meta: bool = False):
    return estimate(STEPS[name], "fsdp", world_size, rank, on_meta)


def test_the_table_covers_every_step_and_rank():
    assert MEASURED["threads_per_rank"] == THREADS and MEASURED["backend"] == "gloo"
    assert MEASURED["strategy"] == "fsdp"
    seen = {(r["name"], r["world_size"], r["rank"]) for r in ROWS}
    assert seen == {(n, w, r) for n in STEPS for w in (2, 4) for r in range(w)}


@pytest.mark.parametrize("row", [pytest.param(r, marks=() if _in_ci(r) else pytest.mark.long) for r in ROWS],
                         ids=lambda r: f"{r['name']}-{r['world_size']}-{r['rank']}")
def test_each_rank_is_estimated_as_the_gloo_rank_measured(threads, row):
    estimate = _estimate(row["name"], row["world_size"], row["rank"])
    assert (estimate.peak_bytes, estimate.final_bytes) == (row["peak_bytes"], row["final_bytes"])
    assert not dist.is_initialized()  # the group was the call's


def test_a_rank_holds_its_shards_of_the_parameters_and_the_optimizer_state(threads):
    # The MLP (fully_shard on the root only) on 2 ranks: 525,568 float
    # parameters (2,102,272 bytes), each rank 1,051,136 bytes of them, and at
    # the peak (in the backward) all of them gathered beside the shard; after
    # the step AdamW's exp_avg and exp_avg_sq of the shard (2 x 1,051,136)
    # and its four 4-byte step counters; the input 64 x 256 floats (65,536).
    estimate = _estimate("mlp_adamw", 2, 1)
    assert estimate.by_category["parameters"] == 1_051_136 + 2_102_272
    assert estimate.final_bytes == 3 * 1_051_136 + 4 * 4 + 65_536


def test_the_gathered_parameters_are_named_at_the_peak(threads):
    # GPT's blocks resharded after the forward: in its backward, one block's
    # parameters are gathered (and the next one's, prefetched).
    estimate = _estimate("gpt_lm_adamw", 2, 0)
    assert "FSDP all-gather buffer of blocks." in estimate.report.to_text()


def test_a_meta_model_is_estimated_as_the_real_one(threads):
    for name in ("mlp_adamw_3_steps", "gpt_lm_adamw_bf16_fp32"):
        real, meta = _estimate(name, 4, 3), _estimate(name, 4, 3, on_meta=True)
        assert (meta.peak_bytes, meta.final_bytes) == (real.peak_bytes, real.final_bytes)


def test_the_users_model_is_left_as_it_was(threads):
    # fully_shard changes the module it is given (its class, DTensor
    # parameters): the estimate and the measurement shard copies.
    model, inputs, options = STEPS["gpt_lm_adamw"]()
    before = {n: p.clone() for n, p in model.named_parameters()}
    peakmem.estimate_step(model, *inputs, **options, frontend="eager", strategy="fsdp", world_size=2)
    peakmem.measure_step(model, *inputs, **options, frontend="eager", strategy="fsdp", world_size=2)
    assert type(model).__name__ == "GPT"
    assert all(type(p) is torch.nn.Parameter and torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_measure_step_runs_the_rank_in_one_process_as_estimated(threads):
    # The instant group: FSDP2's own code on real tensors, no data moved;
    # its figures are the gloo rank's (the table's).
    model, inputs, options = STEPS["hf_llama_adamw_no_reshard"]()
    measured = peakmem.measure_step(model, *inputs, **options, frontend="eager", strategy="fsdp", world_size=2,
                                    rank=1)
    row = next(r for r in ROWS if (r["name"], r["world_size"], r["rank"]) == ("hf_llama_adamw_no_reshard", 2, 1))
    assert (measured.peak_bytes, measured.final_bytes) == (row["peak_bytes"], row["final_bytes"])


def _row(name: str, world_size: int) -> dict:
    return next(r for r in ROWS if (r["name"], r["world_size"], r["rank"]) == (name, world_size, 0))


def test_the_table_shows_what_each_setting_costs():
    # Measured, not estimated: keeping each block gathered from its forward
    # to its backward costs memory; bf16 parameters in the compute save it.
    for model in ("gpt_lm", "hf_llama"):
        base = _row(f"{model}_adamw", 4)["peak_bytes"]
        assert _row(f"{model}_adamw_no_reshard", 4)["peak_bytes"] > base
        assert _row(f"{model}_adamw_bf16_fp32", 4)["peak_bytes"] < base


@pytest.mark.parametrize("kwargs,message", [
    ({"strategy": "fsdp-zero3", "world_size": 2, "frontend": "eager"},
     "strategy='fsdp-zero3' on the 'eager' front end is not"),
    ({"strategy": "ddp", "world_size": 2, "frontend": "eager", "parallelize": print},
     "parallelize= is FSDP2's wrapping: it goes with strategy='fsdp'"),
    ({"parallelize": print, "frontend": "eager"}, "parallelize= shards the model for strategy='fsdp'"),
])
def test_what_fsdp_on_the_eager_front_end_does_not_take_is_an_error(kwargs, message):
    model, inputs, options = STEPS["mlp_adamw"]()
    with pytest.raises(ValueError, match=message):
        peakmem.estimate_step(model, *inputs, **options, **kwargs)


def test_the_largest_batch_of_a_rank(threads):
    # max_batch_size with strategy="fsdp": the largest batch whose rank's
    # step fits the budget; one more does not.
    model, inputs, options = STEPS["mlp_adamw"]()
    budget, rank = 8 * 2**20, {"frontend": "eager", "strategy": "fsdp", "world_size": 4, "rank": 0}

    def batch(n):
        return (torch.randn(n, 256, device="meta"),)

    found = peakmem.max_batch_size(model, batch, budget, **options, **rank, progress=False)
    peak = {n: peakmem.estimate_step(model, *batch(n), **options, **rank).peak_bytes
            for n in (found.batch_size, found.batch_size + 1)}
    assert peak[found.batch_size] <= budget < peak[found.batch_size + 1]
