"""peakmem.plan, proven by running the plans.

Every corpus and zoo program (tests/data/{corpus,zoo}), forward and backward,
re-traced with thunder.jit now, is planned; the planned TraceCtx is run on
the CPU under the profiler (peakmem.measure) and on the same inputs as the
original (peakmem.measure.call):
- its outputs are torch.equal to the original's (same dtypes and shapes; NaN
  where the original has NaN);
- its measured peak and final bytes equal the plan's prediction to the byte;
- its peak is no higher than the original's measured peak, nor than any
  baseline order's (the trace's own and Inductor's LPMF, BFS and DFS, each
  simulated by the same exact model, whose numbers the corpus tests check
  against measurement).
The printed-text path is checked too: the planned text of a stored trace
reads back with the planned peak.
"""

from __future__ import annotations

import pytest
import torch

import peakmem
from peakmem.measure import call
from conftest import corpus_programs, program_dir

PROGRAMS = corpus_programs()


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        # Bit for bit, NaN where NaN (random inputs can make some).
        if not (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        if a.is_floating_point() or a.is_complex():
            nan = torch.isnan(a)
            return torch.equal(nan, torch.isnan(b)) and torch.equal(a[~nan], b[~nan])
        return torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("program", PROGRAMS)
def test_planned_traces_run_equal_and_measure_as_predicted(program, live_corpus, thunder):
    for kind, trace in live_corpus(program).items():
        plan = peakmem.plan(trace, time_budget=30.0, max_simulations=2000)
        where = f"{program}/{kind}"
        measured = peakmem.measure(plan.trace)
        original = peakmem.measure(trace)
        assert (measured.peak_bytes, measured.final_bytes) == (plan.planned_peak_bytes, plan.planned_final_bytes), (
            f"{where}: planned trace measured {measured.peak_bytes}/{measured.final_bytes}, "
            f"predicted {plan.planned_peak_bytes}/{plan.planned_final_bytes}"
        )
        assert original.peak_bytes == plan.original_peak_bytes, where
        assert plan.planned_peak_bytes <= original.peak_bytes, where
        assert plan.planned_peak_bytes <= min(plan.baselines.values()), (where, plan.baselines)
        assert same(call(trace), call(plan.trace)), f"{where}: the planned trace computes something else"
        if plan.unchanged_reason:
            assert plan.planned_peak_bytes == plan.original_peak_bytes, where


def test_planned_text_reads_back_with_the_planned_peak():
    path = program_dir("resnet") / "bw.trace"
    plan = peakmem.plan(str(path), torch_threads=2)
    assert plan.trace is None
    assert plan.planned_peak_bytes < plan.original_peak_bytes
    again = peakmem.analyze(plan.text, torch_threads=2)
    assert again.peak_bytes == plan.planned_peak_bytes
    assert 0 < plan.lower_bound_bytes <= plan.planned_peak_bytes
    # The CUDA caching allocator's view of the same plan: it rounds every
    # block up to 512 bytes, so its allocated peak is at least the requested.
    priced = peakmem.plan(str(path), torch_threads=2, allocator="cuda-caching")
    assert priced.planned_peak_bytes == plan.planned_peak_bytes
    assert priced.allocated_peak_bytes[1] >= plan.planned_peak_bytes
    assert priced.allocated_peak_bytes[0] >= plan.original_peak_bytes
    # The input file is left as it was: planning reads it only.
    assert plan.original_peak_bytes == peakmem.analyze(str(path), torch_threads=2).peak_bytes


def test_a_trace_nothing_can_move_in_is_returned_with_the_reason():
    text = '''def fn(x):
  # x: "cpu f32[256]"
  a = torch.exp(x)  # a: "cpu f32[256]"
  t = frobnicate(x)  # t: "cpu f32[256]"
  b = torch.exp(x)  # b: "cpu f32[256]"
  return (a, t, b)
'''
    plan = peakmem.plan(text)
    assert plan.planned_peak_bytes == plan.original_peak_bytes
    assert "no statement can move" in plan.unchanged_reason
    assert "an op peakmem does not know" in plan.unchanged_reason
    assert "a = torch.exp(x)" in plan.text and "frobnicate(x)" in plan.text


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="TraceCtx, trace text or a path"):
        peakmem.plan(42)
    with pytest.raises(peakmem.TraceError):
        peakmem.plan("def fn(x):\n  y = torch.exp(x)\n  return y\n")  # x has no type


def test_the_thunder_transform_plans_forward_and_backward_and_training_is_unchanged(thunder):
    # The zoo's ResNet (batch norm in training mode, convolutions): its
    # backward is the trace the planner lowers most (tests/data/zoo). The
    # same model and input, jitted with and without the transform: the loss
    # and every gradient bit-identical, and the backward Thunder runs is the
    # plan, whose measured peak is the plan's prediction.
    import importlib.util

    spec = importlib.util.spec_from_file_location("resnet_program", program_dir("resnet") / "program.py")
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)

    def run(transforms):
        model = program.make_function()
        jm = thunder.jit(model, transforms=transforms)
        inputs = program.make_inputs()
        out = jm(*inputs)
        loss = out.float().sum() if isinstance(out, torch.Tensor) else out[0].float().sum()
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        return jm, loss.detach(), grads

    transform = peakmem.plan_transform(time_budget=30.0, max_simulations=2000)
    jm, loss, grads = run([transform])
    _, loss_ref, grads_ref = run([])
    assert torch.equal(loss, loss_ref)
    assert all(same(g, r) for g, r in zip(grads, grads_ref))
    assert len(transform.plans) == 2  # forward, backward
    backward_plan = transform.plans[1]
    assert backward_plan.planned_peak_bytes < backward_plan.original_peak_bytes
    backward = thunder.last_backward_traces(jm)[-1]
    assert "peakmem plan" in str(backward).splitlines()[0]
    assert peakmem.measure(backward).peak_bytes == backward_plan.planned_peak_bytes


def test_a_planned_training_step_is_estimated_exactly_and_fits_a_larger_batch(thunder, tmp_path):
    import functools
    import json
    import subprocess

    from conftest import cli

    # The training-step corpus's CNN (tests/python/step_models.py), SGD with
    # momentum, 2 steps: with plan=True Thunder runs the planned forward and
    # backward; the estimate equals the measured step to the byte and is
    # lower than the unplanned one (its peak is in the backward, which the
    # planner lowers). Under a budget between the two, the largest batch
    # that fits grows with planning, and a larger budget never fits fewer.
    from step_models import SmallCNN, class_zero_loss

    kwargs = dict(loss_fn=class_zero_loss, optimizer=torch.optim.SGD,
                  optimizer_kwargs={"lr": 0.01, "momentum": 0.9}, steps=2, frontend="thunder")

    def step(fn, batch, plan):
        torch.manual_seed(0)
        return fn(SmallCNN(), torch.randn(batch, 3, 32, 32), plan=plan, **kwargs)

    planned = step(peakmem.estimate_step, 8, True)
    measured = step(peakmem.measure_step, 8, True)
    unplanned = step(peakmem.estimate_step, 8, False)
    assert (planned.peak_bytes, planned.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    assert planned.peak_bytes < unplanned.peak_bytes
    assert planned.phase_at_peak == unplanned.phase_at_peak == "backward"
    # The planned step's file (export_step(plan=True)) simulates without Python to the measured peak.
    path = tmp_path / "planned.json"
    step(functools.partial(peakmem.export_step, path=str(path)), 8, True)
    run = subprocess.run([cli(), "step", str(path), "--format", "json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["peak_bytes"] == measured.peak_bytes

    def make_inputs(n):
        torch.manual_seed(0)
        return (torch.randn(n, 3, 32, 32),)

    # A budget between the planned and the unplanned peaks at batch 25.
    at_25 = step(peakmem.estimate_step, 25, False).peak_bytes, step(peakmem.estimate_step, 25, True).peak_bytes
    assert at_25[1] < at_25[0]
    budget = (at_25[0] + at_25[1]) // 2

    def largest(budget, plan):
        torch.manual_seed(0)
        return peakmem.max_batch_size(SmallCNN(), make_inputs, budget, low=20, high=28, plan=plan,
                                      **kwargs).batch_size
    without, with_plan = largest(budget, False), largest(budget, True)
    assert without < 25 <= with_plan
    assert largest(budget - 3_000_000, True) <= with_plan <= largest(budget + 3_000_000, True)
