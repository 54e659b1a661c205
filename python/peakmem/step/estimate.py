"""``estimate_step``: the step predicted, on either front end."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Unpack

from ..distribution import with_strategy
from ..step_timeline import StepTimeline
from .budget import Judging, _budget, judging
from .frontend import records
from .options import EstimateOptions, takes
from .report import StepReport, _with_budget
from .report_assumptions import assumptions
from .tracing import _StepProgram, _traced_program
from .training_step import TrainingStep

__all__ = ["estimate_step"]


def _simulate(program: _StepProgram, pricing: dict | None = None) -> tuple[StepReport, float]:
    """The step simulated (models/training_step.h) as one event stream, its
    timeline read from it, priced by `pricing`'s allocator; and the seconds
    the simulation took."""
    from .._core import simulate_step

    start = time.perf_counter()
    r = simulate_step(program.forward, program.backward, program.optimizer_first,
                            program.optimizer_later, program.spec, events=True, **(pricing or {}))
    simulating = time.perf_counter() - start
    whole = r["step"]
    report = StepReport(
        peak_bytes=r["peak_bytes"], final_bytes=r["final_bytes"], phase_at_peak=r["phase_at_peak"],
        step_at_peak=r["step_at_peak"], by_category=r["by_category"], by_module=r["by_module"],
        forward=r["forward"], backward=r["backward"], optimizer_program=r["optimizer_first"],
        optimizer=program.optimizer or None, steps=program.spec.get("steps"),
        timeline=StepTimeline.from_report(whole), recomputation=program.recomputation,
        allocator=whole.allocator, report=whole, frontend="thunder")
    return report, simulating


def _estimate_eager(model: Any, inputs: tuple, step: TrainingStep, judged: Judging, target: Any,
                    start: float, nccl: dict | None = None) -> StepReport:
    """The eager front end's estimate (peakmem.step.eager): the step recorded and simulated."""
    from .eager import estimate_eager_step

    from ..step_checks import check_loss_fn_captures

    check_loss_fn_captures(step.loss_fn, model, (*inputs, *dict(step.kwargs or {}).values()), "eager")
    recomputation = None
    if step.recompute is not None:
        model, inputs, step, recomputation = _planned_eager(model, tuple(inputs), step, judged.pricing)
    r, recording, ran = estimate_eager_step(model, tuple(inputs), step, judged.pricing, target)
    whole = r["step"]
    report = StepReport(
        peak_bytes=r["peak_bytes"], final_bytes=r["final_bytes"], phase_at_peak=r["phase_at_peak"],
        step_at_peak=r["step_at_peak"], by_category=r["by_category"], by_module=r["by_module"],
        timeline=StepTimeline.from_report(whole), recomputation=recomputation, allocator=whole.allocator,
        report=whole, frontend=step.frontend, device=target.name, optimizer=ran.optimizer, steps=ran.steps,
        steady=step.steady, nccl_estimate=nccl)
    total = time.perf_counter() - start
    report = replace(_with_budget(report, judged.budget, judged.context_bytes),
                     seconds={"record": recording, "peakmem": total - recording})
    return replace(report, assumptions=assumptions(report, step, target, ran.precision, ran.attention))


def _eager_plan(model: Any, inputs: tuple, step: TrainingStep, pricing: dict) -> Any:
    """recompute= on the eager front end: the plan for the step
    (peakmem.step.eager_recompute)."""
    from .eager_recompute import plan_eager_recomputation

    options = dict(step.recompute)
    unknown = sorted(set(options) - {"budget", "max_simulations"})
    if unknown:
        raise ValueError(f"recompute: {', '.join(unknown)} are Thunder's (its traces' saved tensors by name, its "
                         "search's time); the eager front end plans selective checkpointing under a budget: "
                         "recompute=True, a budget or {'budget': ..., 'max_simulations': ...}")
    simulations = options.get("max_simulations", 5000)
    if not isinstance(simulations, int) or isinstance(simulations, bool) or simulations < 1:
        raise ValueError(f"recompute: max_simulations must be a positive integer, got {simulations!r}")
    return plan_eager_recomputation(model, inputs, step, _budget(options.get("budget")), pricing, simulations)


def _planned_eager(model: Any, inputs: tuple, step: TrainingStep, pricing: dict) -> tuple:
    """The plan (_eager_plan) installed on a meta replica of the model,
    which the estimate then records (the user's model is not touched).
    Returns the replica, its inputs, the step with its keyword inputs and
    the plan."""
    import copy

    from .meta_replica import meta_replica

    plan = _eager_plan(model, inputs, step, pricing)
    replica, meta_inputs, meta_kwargs = copy.deepcopy(meta_replica(model, inputs, dict(step.kwargs or {})))
    return plan.apply(replica), meta_inputs, replace(step, kwargs=meta_kwargs), plan


def _estimate_traced(model: Any, inputs: tuple, step: TrainingStep, judged: Judging, target: Any,
                     start: float) -> StepReport:
    """Thunder's estimate: the step traced and simulated, with NCCL's buffers
    for a rank of a distributed step."""
    program, thunder_s = _traced_program(model, inputs, step)
    if step.device is not None:
        program.spec["device"] = target.name
    world_size = program.spec.get("world_size", 0)
    nccl = None
    if world_size > 1:
        from ..distribution import nccl_estimate, traces_collectives

        collectives = traces_collectives(program.forward, program.backward)
        if collectives:
            nccl = nccl_estimate(world_size, collectives)
            judged = judging(judged.options, judged.given_budget, target, nccl["total_bytes"])
    report, simulating = _simulate(program, judged.pricing)
    report = replace(report, device=target.name, steady=step.steady, nccl_estimate=nccl)
    total = time.perf_counter() - start
    report = replace(_with_budget(report, judged.budget, judged.context_bytes), seconds={
        "thunder": thunder_s, "peakmem": total - thunder_s, "simulate": simulating})
    return replace(report, assumptions=assumptions(report, step, target, None, None))


# The collectives each eager strategy's wrapper runs (DDP: the module's
# broadcast at construction and the buckets' all-reduce, reducer.cpp;
# FSDP2: all-gather and reduce-scatter, _fsdp_collectives.py).
_STRATEGY_COLLECTIVES = {"ddp": ["broadcast", "all_reduce"], "fsdp": ["all_gather", "reduce_scatter"]}


def _eager_nccl(step: TrainingStep, target: Any) -> dict | None:
    """A GPU rank's NCCL buffers under an eager strategy (peakmem.nccl_estimate
    with its defaults), counted outside the allocator; None elsewhere."""
    import torch.distributed as dist

    if not target.cuda or step.distributed is None or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    from ..distribution import nccl_estimate

    return nccl_estimate(dist.get_world_size(), _STRATEGY_COLLECTIVES[step.distributed])


@takes(EstimateOptions)
@with_strategy
def estimate_step(model: Any, *inputs: Any, budget: int | str | None = None,
                  **options: Unpack[EstimateOptions]) -> StepReport:
    """Predicts the memory of a training run's steps of `model` on `inputs`
    (``steps``; by default until the step's memory repeats).

    `model` is an ``nn.Module`` called as ``model(*inputs)``. `inputs` may be
    real tensors or on the ``meta`` device (then nothing is allocated: the
    model's parameters should be on ``meta`` too). `budget`: bytes (or a
    size such as ``"80GiB"``) the step must fit in (``fits``,
    ``headroom_bytes``, ``verdict``: peakmem.step.budget); on a GPU model
    (``device=``) the card's memory unless given, judged by the caching
    allocator's reserved bytes plus the CUDA context. The keyword arguments
    below say the step; see the package's docstring (peakmem.step) for the
    step and how it is modelled.

    Raises ValueError for an optimizer or a loss peakmem cannot model, for
    inputs on another device than the parameters and for a `loss_fn` that
    reads a tensor that is not an input (targets in a closure);
    TypeError for an optimizer instance (pass its class and
    `optimizer_kwargs`) and for a keyword it does not take; RuntimeError
    when Thunder cannot trace the step.
    """
    from .device_target import device_target

    start = time.perf_counter()
    step, model = TrainingStep.of(options).resolved(model)
    target = device_target(step.device, model)
    if records(step.frontend):
        nccl = _eager_nccl(step, target)
        judged = judging(options, budget, target, nccl["total_bytes"] if nccl else 0)
        return _estimate_eager(model, inputs, step, judged, target, start, nccl)
    return _estimate_traced(model, inputs, step, judging(options, budget, target), target, start)
