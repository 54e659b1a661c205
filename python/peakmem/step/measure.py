"""``measure_step``: the step run for real and measured, the truth estimates are checked against."""

from __future__ import annotations

import gc
from typing import Any, Unpack

from ..distribution import with_strategy
from .budget import _budget, _pricing_requested
from .frontend import records
from .options import RunOptions, takes
from .holdings import _held_by_module, _input_tensors, _storage_bytes
from .report import StepReport, _with_budget
from .running import _import_torch_and_thunder, _run_step, _step_failure
from .tracing import _jit, _step_module, _traced_program
from .training_step import TrainingStep

__all__ = ["measure_step"]


def _step_device(torch: Any, tensors: list) -> Any:
    """The one device a measured step runs on: the CPU or a CUDA device."""
    devices = sorted({str(x.device) for x in tensors})
    if len(devices) > 1:
        raise ValueError(f"measure_step runs on one device; the model and inputs are on {', '.join(devices)}")
    device = torch.device(devices[0] if devices else "cpu")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"measure_step runs on the CPU or a CUDA device; a tensor is on {device}")
    return device


def _measure_eager(model: Any, inputs: tuple, step: TrainingStep) -> StepReport:
    """The eager front end's step run for real (peakmem.step.eager_measure.measure_eager_step).
    With a recomputation asked for, the estimate's plan is what runs
    (installed on the model for the run, then taken off)."""
    import torch
    from torch.utils._pytree import tree_leaves

    from .eager_measure import measure_eager_step
    from .eager_recompute import installed
    from .estimate import _eager_plan

    given = [x for x in tree_leaves((tuple(inputs), dict(step.kwargs or {}))) if isinstance(x, torch.Tensor)]
    device = _step_device(torch, given + _held_by_module(model))
    plan = None
    if step.recompute is not None:
        plan = _eager_plan(model, tuple(inputs), step, _pricing_requested())
    with installed(model, plan):
        peak, final, input_bytes, allocator, parameters = measure_eager_step(model, tuple(inputs), step, device)
    return StepReport(
        peak_bytes=parameters + peak, final_bytes=parameters + final, phase_at_peak="measured",
        step_at_peak=0, by_category={"parameters": parameters, "inputs": input_bytes},
        recomputation=plan, measured=True, allocator=allocator, frontend=step.frontend,
        steps=step.measured_steps(), steady=step.steady)


def _warmed_up(thunder: Any, model: Any, given: tuple, step: TrainingStep, maker: Any) -> tuple[Any, Any, Any]:
    """The jitted step module, what holds its parameters, and a fresh
    optimizer over them, after one unmeasured step (Thunder compiles there)
    whose gradients are dropped. With a recomputation asked for, the
    estimate's choice is what Thunder runs: the names given
    (``recompute=[...]``) as they are, else the search's, run again."""
    names: tuple[str, ...] = ()
    if step.recompute is not None:
        names = step.recompute.get("names")
        if names is None:
            names = _traced_program(model, given, step)[0].recomputation.names
    module = _step_module(model, step.loss_fn, step.model_inputs)
    jm, holder = _jit(thunder, module, step.transform, step.plan, names)
    kwargs = dict(step.optimizer_kwargs or {})

    def make_optimizer():
        return None if step.optimizer is None else step.optimizer(holder.parameters(), **kwargs)

    try:
        _run_step(jm, maker.copy_given(given, whole_storages=True), make_optimizer(), zero_grad=True,
                  gradient=step.gradient)
    except ValueError:
        raise
    except Exception as e:
        raise _step_failure(e, module, given) from e
    for p in holder.parameters():
        p.grad = None
    return jm, holder, make_optimizer()


def _measure_traced(model: Any, inputs: tuple, step: TrainingStep) -> StepReport:
    """Thunder's step run for real: ``steps`` steps of the jitted module,
    measured on the CPU (the profiler's events) or a CUDA device."""
    step.optimizer_spec()  # an optimizer Thunder's front end does not model is refused, as by the estimate
    torch, thunder = _import_torch_and_thunder()

    from ..measure import _InputMaker, measure_region_cpu, measure_region_cuda

    given = tuple(inputs)
    device = _step_device(torch, _input_tensors(given) + _held_by_module(model))
    maker = _InputMaker(device, 0)
    jm, holder, opt = _warmed_up(thunder, model, given, step, maker)
    parameters = _storage_bytes(_held_by_module(holder))

    def run(copies):
        for _ in range(step.measured_steps()):
            _run_step(jm, copies, opt, step.zero_grad, step.gradient)

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        measured = measure_region_cuda if device.type == "cuda" else measure_region_cpu
        peak, final, copies, allocator = measured(device, lambda: maker.copy_given(given, whole_storages=True), run)
        input_bytes = _storage_bytes(_input_tensors(copies))
        del copies, opt
    finally:
        if was_enabled:
            gc.enable()
    for p in holder.parameters():
        p.grad = None
    return StepReport(
        peak_bytes=parameters + peak, final_bytes=parameters + final, phase_at_peak="measured",
        step_at_peak=0, by_category={"parameters": parameters, "inputs": input_bytes},
        measured=True, allocator=allocator, frontend="thunder", steps=step.measured_steps(), steady=step.steady)


@takes(RunOptions)
@with_strategy
def measure_step(model: Any, *inputs: Any, budget: int | str | None = None,
                 **options: Unpack[RunOptions]) -> StepReport:
    """Runs ``steps`` training steps of `model` for real and measures them:
    the truth ``estimate_step`` is checked against. ``steps=None`` (the
    default, the steady state) runs three steps (TrainingStep.measured_steps:
    the least the estimate's steady state takes and one more), so the
    measured peak covers a step that repeats.

    The step of ``estimate_step``, with its keyword arguments but the
    pricing (a measurement has no use for it), on real tensors, all on the
    CPU or all on one CUDA device; `budget` as estimate_step's. One warm-up
    step runs first, unmeasured (Thunder compiles on the first call; on
    CUDA, cuBLAS makes its workspace); its gradients are dropped and the
    optimizer is made afresh, so the measured steps start as the estimate's do: no ``.grad``,
    no optimizer state. The inputs are copied inside the measured region;
    the parameters and buffers, made before it, are added to every figure.
    On the CPU the profiler's events are walked (peakmem.measure's walk,
    which counts requested bytes); on CUDA ``torch.cuda.memory_stats``'s
    ``requested_bytes`` give the figures, and ``allocator`` the allocated and
    reserved bytes. ``phase_at_peak`` is ``"measured"`` and ``by_category``
    holds the parameters and inputs only (neither source says what a block
    is). ``routing=`` is a ValueError: the real step routes as it does.
    """
    step, model = TrainingStep.of(options).resolved(model)
    if step.routing is not None:
        raise ValueError("routing= assumes a mixture-of-experts router's choice for an estimate; measure_step runs "
                         "the model's own router")
    limit = _budget(budget)
    run = _measure_eager if records(step.frontend) else _measure_traced
    return _with_budget(run(model, inputs, step), limit)
