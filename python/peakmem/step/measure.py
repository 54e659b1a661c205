"""``measure_step``: the step run for real and measured, the truth estimates are checked against."""

from __future__ import annotations

import gc
from typing import Any, Callable

from ..distribution import with_strategy
from .arguments import _budget, _check_arguments, _check_gradient
from .estimate import estimate_step
from .frontend import Frontend, resolve_frontend
from .holdings import _held_by_module, _input_tensors, _storage_bytes
from .report import StepReport, _with_budget
from .running import _import_torch_and_thunder, _run_step, _step_failure
from .tracing import _jit, _plan_options, _step_module

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


def _measure_eager(model: Any, inputs: tuple, *, kwargs: dict | None, loss_fn: Callable | None,
                   gradient: str | None, optimizer: Any, optimizer_kwargs: dict | None, steps: int,
                   zero_grad: bool, budget: int | str | None) -> StepReport:
    import torch
    from torch.utils._pytree import tree_leaves

    from ..eager_step import measure_eager_step

    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    _check_gradient(gradient)
    limit = _budget(budget)
    given = [x for x in tree_leaves((tuple(inputs), kwargs or {})) if isinstance(x, torch.Tensor)]
    device = _step_device(torch, given + _held_by_module(model))
    peak, final, input_bytes, allocator = measure_eager_step(
        model, tuple(inputs), kwargs=kwargs, loss_fn=loss_fn, gradient=gradient, optimizer=optimizer,
        optimizer_kwargs=optimizer_kwargs, steps=steps, zero_grad=zero_grad, device=device)
    parameters = _storage_bytes(_held_by_module(model))
    report = StepReport(
        peak_bytes=parameters + peak, final_bytes=parameters + final, phase_at_peak="measured",
        step_at_peak=0, by_category={"parameters": parameters, "inputs": input_bytes},
        measured=True, allocator=allocator, frontend="eager")
    return _with_budget(report, limit)


@with_strategy
def measure_step(
    model: Any,
    *inputs: Any,
    loss_fn: Callable | None = None,
    gradient: str | None = None,
    optimizer: Any = None,
    optimizer_kwargs: dict | None = None,
    steps: int = 1,
    zero_grad: bool = True,
    budget: int | str | None = None,
    transform: Callable | None = None,
    plan: bool | dict = False,
    strategy: str | None = None,  # these three: distribution.with_strategy's
    world_size: int | None = None,
    rank: int = 0,
    kwargs: dict | None = None,
    frontend: Frontend | None = None,
) -> StepReport:
    """Runs ``steps`` training steps of `model` for real and measures them:
    the truth ``estimate_step`` is checked against.

    Same arguments and step as ``estimate_step``, with real tensors, all on
    the CPU or all on one CUDA device. One warm-up step runs first,
    unmeasured (Thunder compiles on the first call; on CUDA, cuBLAS makes
    its workspace); its gradients are dropped and the optimizer is made
    afresh, so the measured steps start as the estimate's do: no ``.grad``,
    no optimizer state. The inputs are copied inside the measured region;
    the parameters and buffers, made before it, are added to every figure.
    On the CPU the profiler's events are walked (peakmem.measure's walk,
    which counts requested bytes); on CUDA ``torch.cuda.memory_stats``'s
    ``requested_bytes`` give the figures, and ``allocator`` the allocated and
    reserved bytes. ``phase_at_peak`` is ``"measured"`` and ``by_category``
    holds the parameters and inputs only (neither source says what a block
    is). `frontend` is ``estimate_step``'s (default None: a ``thunder.jit``
    module's step under Thunder, any other module's eagerly, without
    Thunder), and so is `kwargs`.
    """
    frontend, model = resolve_frontend(model, frontend, kwargs, transform=transform, plan=plan)
    if frontend == "eager":
        return _measure_eager(model, inputs, kwargs=kwargs, loss_fn=loss_fn, gradient=gradient,
                              optimizer=optimizer, optimizer_kwargs=optimizer_kwargs, steps=steps,
                              zero_grad=zero_grad, budget=budget)
    _, limit = _check_arguments(steps, optimizer, optimizer_kwargs, budget)
    _check_gradient(gradient)
    kwargs = dict(optimizer_kwargs or {})
    torch, thunder = _import_torch_and_thunder()

    from ..measure import _InputMaker, measure_region_cpu, measure_region_cuda

    given = tuple(inputs)
    device = _step_device(torch, _input_tensors(given) + _held_by_module(model))
    reorder, recompute = _plan_options(plan)
    names: tuple[str, ...] = ()
    if recompute is not None:  # the estimate's choice, then run
        names = estimate_step(model, *inputs, loss_fn=loss_fn, gradient=gradient, optimizer=optimizer,
                              optimizer_kwargs=optimizer_kwargs, steps=steps, zero_grad=zero_grad,
                              transform=transform, plan=plan, frontend="thunder").recomputation.names
    module = _step_module(model, loss_fn)
    jm, holder = _jit(thunder, module, transform, reorder, names)
    maker = _InputMaker(device, 0)

    def make_optimizer():
        return None if optimizer is None else optimizer(holder.parameters(), **kwargs)

    try:  # the warm-up: Thunder compiles here
        _run_step(jm, maker.copy_given(given, whole_storages=True), make_optimizer(), zero_grad=True,
                  gradient=gradient)
    except ValueError:
        raise
    except Exception as e:
        raise _step_failure(e, module, given) from e
    for p in holder.parameters():
        p.grad = None
    opt = make_optimizer()
    parameters = _storage_bytes(_held_by_module(holder))

    def make_copies():
        return maker.copy_given(given, whole_storages=True)

    def run(copies):
        for _ in range(steps):
            _run_step(jm, copies, opt, zero_grad, gradient)

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        measured = measure_region_cuda if device.type == "cuda" else measure_region_cpu
        peak, final, copies, allocator = measured(device, make_copies, run)
        input_bytes = _storage_bytes(_input_tensors(copies))
        del copies, opt
    finally:
        if was_enabled:
            gc.enable()
    for p in holder.parameters():
        p.grad = None
    report = StepReport(
        peak_bytes=parameters + peak, final_bytes=parameters + final, phase_at_peak="measured",
        step_at_peak=0, by_category={"parameters": parameters, "inputs": input_bytes},
        measured=True, allocator=allocator, frontend="thunder")
    return _with_budget(report, limit)
