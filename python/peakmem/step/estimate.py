"""``estimate_step``: the step predicted, on either front end."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable

from ..api import Allocator
from ..distribution import Strategy, with_strategy
from ..step_timeline import StepTimeline
from .budget import _budget, _pricing
from .frontend import Frontend
from .report import StepReport, _with_budget
from .tracing import _StepProgram, _traced_program
from .training_step import Gradient, Recompute, TrainingStep

__all__ = ["estimate_step"]


def _simulate(program: _StepProgram, pricing: dict | None = None) -> tuple[StepReport, float]:
    """The step simulated (models/training_step.h) as one event stream, its
    timeline read from it, priced by `pricing`'s allocator; and the seconds
    the simulation took."""
    from .. import _core

    start = time.perf_counter()
    r = _core.simulate_step(program.forward, program.backward, program.optimizer_first,
                            program.optimizer_later, program.spec, events=True, **(pricing or {}))
    simulating = time.perf_counter() - start
    whole = r["step"]
    report = StepReport(
        peak_bytes=r["peak_bytes"], final_bytes=r["final_bytes"], phase_at_peak=r["phase_at_peak"],
        step_at_peak=r["step_at_peak"], by_category=r["by_category"], by_module=r["by_module"],
        forward=r["forward"], backward=r["backward"], optimizer=r["optimizer_first"],
        timeline=StepTimeline.from_report(whole), recomputation=program.recomputation,
        allocator=whole.allocator, report=whole, frontend="thunder")
    return report, simulating


def _estimate_eager(model: Any, inputs: tuple, step: TrainingStep, limit: int | None, pricing: dict,
                    start: float) -> StepReport:
    """The eager front end's estimate (peakmem.step.eager): the step recorded and simulated."""
    from .eager import estimate_eager_step

    r, recording = estimate_eager_step(model, tuple(inputs), step, pricing)
    whole = r["step"]
    report = StepReport(
        peak_bytes=r["peak_bytes"], final_bytes=r["final_bytes"], phase_at_peak=r["phase_at_peak"],
        step_at_peak=r["step_at_peak"], by_category=r["by_category"], by_module=r["by_module"],
        timeline=StepTimeline.from_report(whole), allocator=whole.allocator, report=whole, frontend="eager")
    total = time.perf_counter() - start
    return replace(_with_budget(report, limit), seconds={"record": recording, "peakmem": total - recording})


def _estimate_traced(model: Any, inputs: tuple, step: TrainingStep, limit: int | None, pricing: dict,
                     start: float) -> StepReport:
    """Thunder's estimate: the step traced and simulated, with NCCL's buffers
    for a rank of a distributed step."""
    program, thunder_s = _traced_program(model, inputs, step)
    report, simulating = _simulate(program, pricing)
    world_size = program.spec.get("world_size", 0)
    if world_size > 1:
        from ..distribution import nccl_estimate, traces_collectives

        collectives = traces_collectives(program.forward, program.backward)
        if collectives:
            report = replace(report, nccl_estimate=nccl_estimate(world_size, collectives))
    total = time.perf_counter() - start
    return replace(_with_budget(report, limit), seconds={
        "thunder": thunder_s, "peakmem": total - thunder_s, "simulate": simulating})


@with_strategy
def estimate_step(
    model: Any,
    *inputs: Any,
    loss_fn: Callable | None = None,
    gradient: Gradient | None = None,
    optimizer: Any = None,
    optimizer_kwargs: dict | None = None,
    steps: int = 1,
    zero_grad: bool = True,
    budget: int | str | None = None,
    transform: Callable | None = None,
    plan: bool | dict = False,
    recompute: Recompute | None = None,
    allocator: Allocator = "requested",
    alloc_conf: str | None = None,
    device_memory: str | int | None = None,
    strategy: Strategy | None = None,  # these three: distribution.with_strategy's
    world_size: int | None = None,
    rank: int = 0,
    kwargs: dict | None = None,
    frontend: Frontend | None = None,
) -> StepReport:
    """Predicts the memory of ``steps`` training steps of `model` on `inputs`.

    `model` is an ``nn.Module`` called as ``model(*inputs)``; ``loss_fn(output,
    *inputs)`` returns the scalar loss (``None``: the model returns it).
    ``gradient="ones"`` instead runs ``loss.backward(torch.ones_like(loss))``
    on a loss of any shape (a DTensor program's output, say: Thunder 0.2.6
    has no DTensor reduction to make a scalar with).
    `inputs` may be real tensors or on the ``meta`` device (then nothing is
    allocated: the model's parameters should be on ``meta`` too). `optimizer`
    is a class (``torch.optim.SGD``, ``Adam`` or ``AdamW``, with their own
    defaults) with `optimizer_kwargs`; `budget` bytes
    (or a size such as ``"80GiB"``) to check the peak against. See the
    package's docstring (peakmem.step) for the step and how it is modelled.

    `transform` (default None) is applied to the ``thunder.jit`` module
    before it runs: a distributed transform such as
    ``lambda jm: thunder.distributed.fsdp(jm, device=...)`` or
    ``thunder.distributed.ddp``, which makes the estimate one rank's step
    (its shards of parameters, gradients and optimizer state). The caller
    initialises the process group; torch's fake process group
    (``torch.testing._internal.distributed.fake_pg``) is rank r of any world
    size in one process, so a cluster's rank is estimated on a laptop.
    ``strategy="fsdp"`` (``"fsdp-zero3"``, ``"ddp"``) with ``world_size=``
    and ``rank=`` does that itself: Thunder's transform for the strategy,
    run as that rank of a fake process group made for the call
    (peakmem.distribution).

    `plan` (default False): True (or a dict of ``peakmem.plan``'s options)
    has Thunder run peakmem's planned forward and backward
    (``peakmem.plan_transform``), so the estimate is the planned step's.
    Each trace is planned on its own, under its usual calling convention.

    `recompute` (default None): recompute saved tensors in the backward
    instead of keeping them, where that lowers the step's peak:
    ``recompute=True`` as low as it goes, ``recompute="24GiB"`` (or bytes)
    until the step fits, or a dict of ``"budget"``, ``"max_simulations"``
    (5000 by default) and ``"time_budget"`` (seconds, none by default: a
    search bounded by wall time can differ between machines).
    peakmem.recompute's search, judged by this step's simulation; the
    report's ``recomputation`` says what was chosen and the FLOPs it adds.
    ``recompute=report.recomputation.names`` (a list or tuple, or the
    dict's ``"names"``) recomputes those as they are, without searching
    again: how ``measure_step`` runs a plan already chosen. Not with `plan`. Its old spellings, ``plan={"recompute": True}`` and
    ``plan={"budget": ...}``, still work and warn (DeprecationWarning).

    `allocator` (default ``"requested"``): ``"cuda-caching"`` also runs
    PyTorch's CUDA caching allocator over the whole step's allocation
    stream (the parameters and inputs allocated first, then every phase's
    storages in the order the step makes and frees them) and fills
    ``report.allocator``: allocated and reserved bytes. `alloc_conf` is
    ``PYTORCH_CUDA_ALLOC_CONF``'s syntax (``None``: that environment
    variable's value) and `device_memory` the device's capacity
    (``"80GiB"``); with a `budget` and no `device_memory`, the budget is
    the capacity. Then ``fits`` says whether the step runs without the
    allocator running out of memory (what a GPU user runs out of is
    reserved bytes, not requested ones), and ``headroom_bytes`` is the
    capacity less the reserved peak.

    `frontend` (default None: the step as the model runs, a ``thunder.jit``
    module under Thunder and any other eagerly; a Thunder-only option,
    `transform`, `plan`, `recompute` or `strategy`, makes it Thunder's; see
    peakmem.step.frontend): ``"thunder"`` traces the step with Thunder (a
    ``thunder.jit`` module stands for the module it wraps), ``"eager"``
    records the step as eager PyTorch runs it
    (peakmem.step.eager): any model PyTorch runs (``transformers`` models
    included), any ``torch.optim`` optimizer class (or a callable taking
    the parameters), keyword inputs in `kwargs` (``model(*inputs,
    **kwargs)``), and a model output with a ``.loss`` (a ``transformers``
    ModelOutput given ``labels``) taken as the loss. Real tensors are
    replaced by ``meta`` stand-ins for the recording, so the user's model
    is not run or changed. `transform`, `plan`, `recompute` and `strategy`
    need Thunder.

    Raises ValueError for an optimizer or a loss peakmem cannot model, for
    inputs on another device than the parameters and for a `loss_fn` that
    reads a tensor that is not an input (targets in a closure);
    TypeError for an optimizer instance (pass its class and
    `optimizer_kwargs`); RuntimeError when Thunder cannot trace the step.
    """
    start = time.perf_counter()
    step, model = TrainingStep(
        loss_fn=loss_fn, gradient=gradient, optimizer=optimizer, optimizer_kwargs=optimizer_kwargs, steps=steps,
        zero_grad=zero_grad, kwargs=kwargs, transform=transform, plan=plan, recompute=recompute,
        frontend=frontend).resolved(model)
    limit = _budget(budget)
    pricing = _pricing(allocator, alloc_conf, device_memory, limit)
    run = _estimate_eager if step.frontend == "eager" else _estimate_traced
    return run(model, inputs, step, limit, pricing, start)
