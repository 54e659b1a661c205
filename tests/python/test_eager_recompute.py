"""The eager front end's planner (peakmem.step.eager_recompute): its plans
are run by PyTorch and measured. The truth is ``measure_step(...,
frontend="eager")`` of the planned model, the FLOPs its step runs
(sac_ilp_plans.step_flops, counted as the step runs) and the plain step's
loss and gradients, bit for bit. test_recompute_sac_ilp.py (long) compares
the plans with SAC ILP's on 4-block stacks.
"""

from __future__ import annotations

import functools

import pytest
import torch

import peakmem
from peakmem.step.eager_recompute import operator_flops, repeated_blocks
from recompute_frontier import loss_and_grads
from sac_ilp_plans import step_flops
from step_models import GPT, MLP, checkpoint_first


def _make():
    torch.manual_seed(0)
    return GPT(vocab=64, dim=32, layers=3, seq=16)


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 64, (2, 16), generator=g), torch.randint(0, 64, (2, 16), generator=g)


def _measured(model, inputs):
    return peakmem.measure_step(model, *inputs, frontend="eager").peak_bytes


def test_at_full_checkpointings_peak_the_plan_adds_fewer_flops_and_is_measured():
    inputs = _inputs()
    plain_flops = step_flops(_make(), inputs)
    checkpointing_peak = _measured(checkpoint_first(_make(), 3), inputs)
    checkpointing_flops = step_flops(checkpoint_first(_make(), 3), inputs) - plain_flops
    assert checkpointing_flops > 0

    report = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=checkpointing_peak)
    plan = report.recomputation
    assert plan.fits and plan.peak_after == report.peak_bytes <= checkpointing_peak
    assert plan.peak_before > checkpointing_peak  # the plain step does not fit
    # The plan run by PyTorch: the peak predicted, the FLOPs counted, the numbers the plain step's.
    assert _measured(plan.apply(_make()), inputs) == report.peak_bytes
    added = step_flops(plan.apply(_make()), inputs) - plain_flops
    assert added == plan.added_flops
    assert added < checkpointing_flops
    loss, grads = loss_and_grads(plan.apply(_make()), inputs)
    reference_loss, reference_grads = loss_and_grads(_make(), inputs)
    assert torch.equal(loss, reference_loss)
    assert all(torch.equal(a, b) for a, b in zip(grads, reference_grads))


def test_without_a_budget_the_plan_reaches_the_lowest_peak():
    inputs = _inputs()
    plan = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=True).recomputation
    assert plan.peak_after == plan.lowest_peak < plan.peak_before
    assert _measured(plan.apply(_make()), inputs) == plan.peak_after
    # Every block checkpointed recomputing everything is that low too, and
    # it is the lowest its candidates reach.
    everything = peakmem.step.eager_recompute.EagerRecomputation(
        blocks=plan.blocks, saved=tuple(() for _ in plan.blocks), operators=plan.operators, budget=None,
        peak_before=0, lowest_peak=0, peak_after=0, added_flops=0, simulations=0, fits=True)
    assert _measured(everything.apply(_make()), inputs) == plan.lowest_peak


def test_the_planned_step_exported_is_what_cli_simulates(tmp_path):
    """export_step(recompute=...) on the eager front end writes the planned
    step's recording: `peakmem step` simulates it to the plan's peak, the
    peak PyTorch measures running the plan. The CLI cannot plan a recording
    (one run of the step) and says how to."""
    import json
    import subprocess

    from conftest import cli

    inputs = _inputs()
    lowest = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=True).recomputation
    budget = (lowest.peak_before + lowest.peak_after) // 2  # between the plain step's peak and the lowest
    report = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=budget)
    assert report.recomputation.added_flops > 0 and report.peak_bytes <= budget
    path = tmp_path / "planned.json"
    peakmem.export_step(_make(), *inputs, frontend="eager", recompute=budget, path=str(path))
    run = subprocess.run([cli(), "step", str(path), "--format", "json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["peak_bytes"] == report.peak_bytes == _measured(
        report.recomputation.apply(_make()), inputs)
    replan = subprocess.run([cli(), "plan", str(path), "--recompute"], capture_output=True, text=True, timeout=300)
    assert replan.returncode == 1 and "a recorded eager step cannot be planned from its file" in replan.stderr


def test_a_budget_below_the_lowest_peak_does_not_fit():
    inputs = _inputs()
    lowest = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=True).recomputation.lowest_peak
    report = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=lowest - 1, budget=lowest - 1)
    plan = report.recomputation
    assert not plan.fits and plan.peak_after == lowest
    assert report.fits is False
    assert all(s == () for s in plan.saved)  # everything recomputed: the lowest it goes


def test_applying_a_plan_again_replaces_it():
    inputs = _inputs()
    plan = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=True).recomputation
    model = plan.apply(plan.apply(_make()))
    assert _measured(model, inputs) == plan.peak_after
    for block in model.blocks:
        assert not isinstance(block.forward.args[0], functools.partial)


def test_a_planned_model_saves_and_loads_with_its_plan():
    import io

    inputs = _inputs()
    plan = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=True).recomputation
    buffer = io.BytesIO()
    torch.save(plan.apply(_make()), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    # The plan came along: the loaded model's step is the planned one, not the plain one.
    assert _measured(loaded, inputs) == plan.peak_after < plan.peak_before
    loss, grads = loss_and_grads(loaded, inputs)
    reference_loss, reference_grads = loss_and_grads(_make(), inputs)
    assert torch.equal(loss, reference_loss)
    assert all(torch.equal(a, b) for a, b in zip(grads, reference_grads))


def test_the_blocks_are_the_outermost_repeated_layers():
    assert repeated_blocks(_make()) == ["blocks.0", "blocks.1", "blocks.2"]

    class Nested(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Sequential(MLP(8, 8), MLP(8, 8)) for _ in range(2))

    assert repeated_blocks(Nested()) == ["layers.0", "layers.1"]
    with pytest.raises(ValueError, match="MLP has no repeated blocks to checkpoint"):
        repeated_blocks(MLP(8, 8))


def test_mistakes_are_named():
    model, inputs = MLP(8, 8), (torch.randn(2, 8),)
    with pytest.raises(ValueError, match="MLP has no repeated blocks"):
        peakmem.estimate_step(model, *inputs, frontend="eager", recompute=True)
    with pytest.raises(ValueError, match="recompute: names are Thunder's"):
        peakmem.estimate_step(_make(), *_inputs(), frontend="eager", recompute=["t0"])


def test_operator_flops_by_hand():
    aten = torch.ops.aten
    a, b, bias = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)
    # addmm: 2·m·n·k = 2·3·5·4 = 120 (the bias add is not counted, as flop_counter counts it).
    assert operator_flops(aten.addmm.default, (bias, a, b), {}, aten.addmm.default(bias, a, b)) == 120
    # A pointwise op: one per output element; a view: none.
    assert operator_flops(aten.relu.default, (a,), {}, aten.relu.default(a)) == 12
    assert operator_flops(aten.view.default, (a, [12]), {}, aten.view.default(a, [12])) == 0
    # The CPU's flash attention: q·kᵀ and the weights·v, 2·b·h·s_q·s_k·(d_qk + d_v)
    # = 2·1·2·3·5·(4 + 4) = 480.
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    flash = aten._scaled_dot_product_flash_attention_for_cpu.default
    assert operator_flops(flash, (q, k, v), {}, flash(q, k, v)) == 480


def test_the_largest_batch_with_recomputation_is_measured_to_fit():
    # The budget: the plain step's measured peak at batch 8. Planned, a
    # larger batch fits; its planned step, measured, is within the budget.
    def make_inputs(n):
        g = torch.Generator().manual_seed(0)
        return torch.randint(0, 64, (n, 16), generator=g), torch.randint(0, 64, (n, 16), generator=g)

    budget = _measured(_make(), make_inputs(8))
    plain = peakmem.max_batch_size(_make(), make_inputs, budget, method="search", high=24, progress=False,
                                   frontend="eager")
    planned = peakmem.max_batch_size(_make(), make_inputs, budget, method="search", high=24, progress=False,
                                     frontend="eager", recompute=True)
    assert plain.batch_size == 8
    assert planned.batch_size > 8
    plan = planned.report.recomputation
    assert _measured(plan.apply(_make()), make_inputs(planned.batch_size)) <= budget


def test_measure_step_runs_the_plan_the_estimate_makes():
    inputs = _inputs()
    model = _make()
    lowest = peakmem.estimate_step(model, *inputs, frontend="eager", recompute=True)
    budget = (lowest.peak_bytes + lowest.recomputation.peak_before) // 2
    estimate = peakmem.estimate_step(model, *inputs, frontend="eager", recompute=budget)
    measured = peakmem.measure_step(model, *inputs, frontend="eager", recompute=budget)
    assert measured.peak_bytes == estimate.peak_bytes <= budget
    assert measured.recomputation.saved == estimate.recomputation.saved
    # The plan was installed for the run only: the blocks run as they did.
    assert all("forward" not in block.__dict__ for block in model.blocks)
    assert _measured(model, inputs) == lowest.recomputation.peak_before


class _DropoutBlocks(torch.nn.Module):
    """Three blocks with dropout: their recomputation must draw the same mask."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(*(torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.Dropout(0.5), torch.nn.GELU(), torch.nn.Linear(64, 32))
            for _ in range(3)))

    def forward(self, x):
        return self.blocks(x).pow(2).mean()


def test_random_operators_recompute_the_same_draws():
    def make():
        torch.manual_seed(0)
        return _DropoutBlocks()

    x = torch.randn(64, 32)
    plan = peakmem.estimate_step(make(), x, frontend="eager", recompute=True).recomputation
    assert any(s is not None for s in plan.saved)
    assert _measured(plan.apply(make()), (x,)) == plan.peak_after
    # The mask's operators (empty_like, bernoulli_, div_) are never saved,
    # yet their recomputation is counted.
    assert step_flops(plan.apply(make()), (x,)) - step_flops(make(), (x,)) == plan.added_flops

    def run(model):
        torch.manual_seed(1)
        return loss_and_grads(model, (x,))

    loss, grads = run(plan.apply(make()))
    reference_loss, reference_grads = run(make())
    assert torch.equal(loss, reference_loss)
    assert all(torch.equal(a, b) for a, b in zip(grads, reference_grads))


def test_a_plan_run_with_other_operators_stops_naming_the_call():
    # Planned in training mode, run in eval mode: dropout calls nothing, so
    # the block's calls are not the plan's.
    torch.manual_seed(0)
    model, x = _DropoutBlocks(), torch.randn(64, 32)
    plan = peakmem.estimate_step(model, x, frontend="eager", recompute=True).recomputation
    plan.apply(model).eval()
    checkpointed = next(name for name, saved in zip(plan.blocks, plan.saved) if saved is not None)
    with pytest.raises(RuntimeError, match=f"plan for block {checkpointed} does not fit this run: its call 2"):
        model(x.requires_grad_()).backward()


def test_a_step_that_keeps_its_gradients_is_planned_as_it_runs():
    # zero_grad=False: each recording must start without the last one's .grad.
    inputs = _inputs()
    report = peakmem.estimate_step(_make(), *inputs, frontend="eager", recompute=True, zero_grad=False, steps=2)
    plan = report.recomputation
    assert plan.peak_after == report.peak_bytes
    measured = peakmem.measure_step(_make(), *inputs, frontend="eager", recompute=True, zero_grad=False, steps=2)
    assert measured.peak_bytes == report.peak_bytes


def test_the_search_needs_a_simulation():
    with pytest.raises(ValueError, match="max_simulations must be a positive integer"):
        peakmem.estimate_step(_make(), *_inputs(), frontend="eager", recompute={"max_simulations": 0})
