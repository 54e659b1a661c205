"""The answer a training run acts on: the steady step (steps until the
step's memory repeats, the default) and one budget verdict, the same in
Python and in ``peakmem step`` (report/budget_verdict.h), judged on a GPU
model by the caching allocator's reserved bytes plus the CUDA context
against the card's memory.

Figures are measured (measure_step runs the step for real on the CPU) or
derived by hand in the comments; none is the estimate's own output.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

from conftest import cli
from step_models import ENTRIES, Entry


def _eight_linears() -> tuple[torch.nn.Module, torch.Tensor]:
    """8 x Linear(512, 512) with biases, batch 4096, float32."""
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]), torch.randn(4096, 512)


def _sum_loss(output, x):
    return output.sum()


@pytest.mark.parametrize("frontend", ["eager", "thunder"])
def test_the_steady_step_holds_adamws_state_through_the_second_steps_backward(thunder, frontend):
    import peakmem

    model, x = _eight_linears()
    options = {"loss_fn": _sum_loss, "optimizer": torch.optim.AdamW, "frontend": frontend}
    first = peakmem.estimate_step(model, x, steps=1, **options)
    steady = peakmem.estimate_step(model, x, **options)
    measured = peakmem.measure_step(model, x, **options)  # three steps: the least the steady state takes, and one
    assert measured.steps == 3 and steady.steps == 2 and steady.steady
    assert (steady.peak_bytes, steady.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    assert (first.peak_bytes, first.final_bytes) == (
        (m := peakmem.measure_step(model, x, steps=1, **options)).peak_bytes, m.final_bytes)
    # The first step alone and the run measured for real (eager: 93,339,656 and 110,149,704 bytes).
    assert steady.step_at_peak == 2 and steady.phase_at_peak == "backward"
    # By hand: from the second step on, AdamW's state is held through the
    # backward: two moments the size of the parameters, 8 x (512 x 512 +
    # 512) x 4 bytes = 8,404,992 each, and a 4-byte step counter for each of
    # the 16 parameters (a CPU float32 tensor each: torch/optim/adamw.py).
    parameters = 8 * (512 * 512 + 512) * 4
    assert steady.by_category["parameters"] == parameters
    assert steady.peak_bytes - first.peak_bytes == 2 * parameters + 16 * 4
    assert steady.by_category["optimizer_state"] == 2 * parameters + 16 * 4


def test_the_eager_steady_state_records_until_the_live_bytes_repeat():
    import peakmem

    model, x = _eight_linears()
    # No optimizer, zero_grad: the first step leaves nothing; one step is the run.
    plain = peakmem.estimate_step(model, x, loss_fn=_sum_loss, frontend="eager")
    assert plain.steps == 1
    # zero_grad=False keeps .grad: the second step holds it through its forward.
    kept = peakmem.estimate_step(model, x, loss_fn=_sum_loss, zero_grad=False, frontend="eager")
    measured = peakmem.measure_step(model, x, loss_fn=_sum_loss, zero_grad=False, frontend="eager")
    assert kept.steps == 2 and (kept.peak_bytes, kept.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    # steps=k still runs exactly k.
    assert peakmem.estimate_step(model, x, loss_fn=_sum_loss, optimizer=torch.optim.SGD,
                                 optimizer_kwargs={"lr": 0.1, "momentum": 0.9}, steps=4,
                                 frontend="eager").steps == 4


def test_the_printed_report_states_what_it_assumed():
    import peakmem

    model, x = _eight_linears()
    r = peakmem.estimate_step(model, x, loss_fn=_sum_loss, optimizer=torch.optim.AdamW, frontend="eager")
    text = repr(r)
    assert "steps: 2 (the steady state" in text and "the peak is in step 2" in text
    assert r.optimizer == "AdamW(), for-loop" and "optimizer: AdamW(), for-loop" in text
    assert "precision: parameters float32" in text
    assert f"diagnostics: {len(r.diagnostics)}" in text
    one = peakmem.estimate_step(model, x, loss_fn=_sum_loss, optimizer=torch.optim.AdamW, steps=1, frontend="eager")
    assert "steps: 1, as asked (steps=1)" in repr(one)
    on_gpu = peakmem.estimate_step(model.to("meta"), x.to("meta"), loss_fn=_sum_loss, optimizer=torch.optim.AdamW,
                                   device="cuda:h100", frontend="eager")
    assert on_gpu.optimizer == "AdamW(), foreach"  # torch's default for CUDA parameters
    assert "workspaces: 34,603,008 bytes: cuBLAS's" in repr(on_gpu)
    assert "device: cuda:h100, NVIDIA H100 80GB HBM3 (SXM)" in repr(on_gpu)


def test_the_categories_are_defined_once_and_sum_to_the_peak():
    import peakmem
    from peakmem import _core

    assert peakmem.step.CATEGORIES == tuple(_core.STEP_CATEGORIES)
    assert "workspaces" in peakmem.step.CATEGORIES
    model, x = _eight_linears()
    r = peakmem.estimate_step(model.to("meta"), x.to("meta"), loss_fn=_sum_loss, device="cuda:h100",
                              frontend="eager")
    assert tuple(r.by_category) == peakmem.step.CATEGORIES
    assert sum(r.by_category.values()) == r.peak_bytes


def test_a_gpu_models_budget_is_its_memory_less_the_context_and_reserved_bytes():
    import peakmem

    h100 = next(g for g in peakmem.gpu_catalog() if g["name"] == "cuda:h100")
    # deviceQuery on an H100 SXM: "81106 MBytes (85045477376 bytes)" (the catalog's source).
    assert h100["total_memory_bytes"] == 85_045_477_376 and h100["cuda_arch"] == 90
    model, x = _eight_linears()
    model, x = model.to("meta"), x.to("meta")
    r = peakmem.estimate_step(model, x, loss_fn=_sum_loss, optimizer=torch.optim.AdamW, device="cuda:h100")
    assert r.budget == 85_045_477_376 and r.verdict["budget_basis"] == "reserved"
    context = h100["context_bytes"]
    assert r.verdict["context_bytes"] == context
    reserved = r.allocator["reserved_peak_bytes"]
    assert reserved >= r.peak_bytes
    assert r.verdict["counted_bytes"] == reserved + context
    assert (r.fits, r.headroom_bytes) == (True, r.budget - reserved - context)
    # A card that holds the requested peak but not the reserved bytes and the context does not fit.
    tight = peakmem.estimate_step(model, x, loss_fn=_sum_loss, optimizer=torch.optim.AdamW, device="cuda:h100",
                                  budget=r.peak_bytes + context)
    assert tight.fits is False
    mine = peakmem.estimate_step(model, x, loss_fn=_sum_loss, optimizer=torch.optim.AdamW, device="cuda:h100",
                                 context_bytes="1GiB")
    assert mine.verdict["context_bytes"] == 1 << 30 and mine.headroom_bytes == r.budget - reserved - (1 << 30)
    # The CPU: the requested peak, no context, said so.
    cpu = peakmem.estimate_step(model, x, loss_fn=_sum_loss, budget="1GiB")
    assert cpu.verdict["budget_basis"] == "requested" and cpu.verdict["context_bytes"] == 0
    assert cpu.headroom_bytes == (1 << 30) - cpu.peak_bytes


def test_the_largest_batch_on_a_gpu_model_is_the_largest_whose_steady_step_fits():
    import peakmem

    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(4)]).to("meta")
    options = {"loss_fn": _sum_loss, "optimizer": torch.optim.AdamW, "device": "cuda:l4", "frontend": "eager"}
    found = peakmem.max_batch_size(model, lambda n: (torch.zeros(n, 512, device="meta"),), "1GiB", progress=False,
                                   **options)
    n = found.batch_size
    at = peakmem.estimate_step(model, torch.zeros(n, 512, device="meta"), budget="1GiB", **options)
    above = peakmem.estimate_step(model, torch.zeros(n + 1, 512, device="meta"), budget="1GiB", **options)
    assert at.steps == 2 and at.fits and not above.fits
    assert found.report.peak_bytes == at.peak_bytes
    # Without a budget, a GPU model's memory is the budget.
    whole = peakmem.max_batch_size(model, lambda n: (torch.zeros(n, 512, device="meta"),), progress=False,
                                   high=64, **options)
    assert whole.report.budget == next(g for g in peakmem.gpu_catalog() if g["name"] == "cuda:l4")[
        "total_memory_bytes"]


# 20 step files: ten of the step corpus, each exported by both front ends,
# each judged against a budget at its peak and one byte below (as requested
# bytes, and with the caching allocator).
_AGREEMENT = [e for e in ENTRIES if e.name in {
    "mlp", "gpt_block", "gpt_lm_loss_inside", "llama_block", "mixer_block", "mlp_adamw_3_steps",
    "gpt_lm_adamw_2_steps", "cnn_sgd_momentum_2_steps", "mixer_block_no_zero_grad", "vit_block"}]


# Thunder's half traces each step five times: three of its files in CI, all
# ten in the long run (pytest -m long).
_THUNDER_IN_CI = {"mlp", "mlp_adamw_3_steps", "mixer_block"}


@pytest.mark.parametrize("frontend, entry", [
    pytest.param(f, e, marks=() if f == "eager" or e.name in _THUNDER_IN_CI else pytest.mark.long,
                 id=f"{e.name}-{f}") for f in ("eager", "thunder") for e in _AGREEMENT])
def test_the_cli_and_python_give_one_verdict(thunder, tmp_path, entry: Entry, frontend: str):
    import peakmem

    assert len(_AGREEMENT) == 10
    torch.manual_seed(0)
    model, inputs = entry.make(), entry.inputs()
    options = {"loss_fn": entry.loss_fn, **entry.setup, "frontend": frontend}
    path = tmp_path / "step.json"
    peakmem.export_step(model, *inputs, path=str(path), **options)
    peak = peakmem.estimate_step(model, *inputs, **options).peak_bytes
    for budget in (peak, peak - 1):
        for allocator in ("requested", "cuda-caching"):
            python = peakmem.estimate_step(model, *inputs, budget=budget, allocator=allocator, **options).summary()
            out = subprocess.run([cli(), "step", str(path), "--format", "json", "--budget", f"{budget}B",
                                  "--allocator", allocator], capture_output=True, text=True, check=False)
            assert out.returncode == 0, out.stderr
            c = json.loads(out.stdout)
            keys = ("peak_bytes", "budget", "fits", "headroom_bytes", "budget_basis", "context_bytes",
                    "counted_bytes")
            assert {k: c[k] for k in keys} == {k: python[k] for k in keys}, (budget, allocator)


# Gradient accumulation: k micro-batches (forward and backward each, the
# gradients summed into .grad), then one optimizer step; the step run for
# real (measure_step) is the truth.
_ACCUMULATING = [e for e in ENTRIES if e.name in {
    "mlp", "gpt_block", "gpt_lm_loss_inside", "llama_block", "mlp_adamw_3_steps", "gpt_lm_adamw_2_steps",
    "cnn_sgd_momentum_2_steps", "mixer_block_no_zero_grad"}]


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("entry", _ACCUMULATING, ids=lambda e: e.name)
def test_gradient_accumulation_is_the_measured_step(entry: Entry, k: int):
    import peakmem

    torch.manual_seed(0)
    model, inputs = entry.make(), entry.inputs()
    options = {"loss_fn": entry.loss_fn, **entry.setup, "accumulation_steps": k, "frontend": "eager"}
    measured = peakmem.measure_step(model, *inputs, **options)
    estimated = peakmem.estimate_step(model, *inputs, **options)
    assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    phases = [(p.name, p.step) for p in estimated.timeline.phases]
    assert phases.count(("forward", 1)) == k  # one forward per micro-batch


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_gradient_accumulation_of_transformers_models_is_the_measured_step(family: str, k: int):
    import eager_models
    import peakmem

    model, kwargs = getattr(eager_models, family)("cpu")
    options = {"kwinputs": kwargs, "optimizer": torch.optim.AdamW, "accumulation_steps": k, "frontend": "eager"}
    measured = peakmem.measure_step(model, **options)
    estimated = peakmem.estimate_step(model, **options)
    assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_accumulation_is_refused_where_it_is_not_modelled(thunder):
    import peakmem

    model, x = _eight_linears()
    with pytest.raises(ValueError, match="accumulation_steps=2 is the eager front end's"):
        peakmem.estimate_step(model, x, loss_fn=_sum_loss, accumulation_steps=2, frontend="thunder")
    with pytest.raises(ValueError, match="accumulation_steps must be a positive integer"):
        peakmem.estimate_step(model, x, loss_fn=_sum_loss, accumulation_steps=0, frontend="eager")


@pytest.mark.long
@pytest.mark.parametrize("frontend", ["eager", "thunder"])
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_the_first_step_alone_is_still_the_measured_first_step(thunder, entry: Entry, frontend: str):
    """steps=1 is the step as it was before the steady default: the first
    step, measured for real."""
    import peakmem

    torch.manual_seed(0)
    model, inputs = entry.make(), entry.inputs()
    options = {"loss_fn": entry.loss_fn, **entry.setup, "frontend": frontend}
    options.setdefault("steps", 1)
    measured = peakmem.measure_step(model, *inputs, **options)
    estimated = peakmem.estimate_step(model, *inputs, **options)
    assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)
