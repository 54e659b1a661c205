"""The eager front end's step run for real: the truth its estimates are checked against.

``measure_step`` on the eager front end, and on a ``torch.compile``'d module
(whose warm-up step compiles it, so the measured steps run Inductor's
kernels), runs the step eager.py records, the user's own model on real
tensors.
"""

from __future__ import annotations

import gc
from typing import Any

from .eager import _loss, _make_optimizer

__all__ = ["measure_eager_step"]


def measure_eager_step(model: Any, inputs: tuple, step: Any, device: Any) -> tuple[int, int, int, Any]:
    """Runs `step` (a peakmem.step.TrainingStep) eagerly for real (one
    unmeasured warm-up step first, its gradients dropped and the optimizer
    made afresh) and measures it as measure_step does: (peak, final, input
    bytes, allocator stats)."""
    from ..measure import _InputMaker, measure_region_cpu, measure_region_cuda
    from .holdings import _input_tensors
    from .running import _backward

    kwargs, loss_fn, gradient, zero_grad = dict(step.kwargs or {}), step.loss_fn, step.gradient, step.zero_grad
    optimizer, optimizer_kwargs, steps = step.optimizer, step.optimizer_kwargs, step.steps
    maker = _InputMaker(device, 0)
    parameters = list(model.parameters())

    def run_once(copies: tuple, kw: dict, opt: Any) -> None:
        out = model(*step.model_call(copies), **kw)
        loss = _loss(out, loss_fn, copies, kw)
        del out
        _backward(loss, gradient)
        if opt is not None:
            opt.step()
        if zero_grad:
            (opt if opt is not None else model).zero_grad(set_to_none=True)
        del loss

    run_once(*maker.copy_given((inputs, kwargs), whole_storages=True),
             _make_optimizer(optimizer, optimizer_kwargs, parameters))
    for p in parameters:
        p.grad = None
    opt = _make_optimizer(optimizer, optimizer_kwargs, parameters)

    def run(copies):
        for _ in range(steps):
            run_once(*copies, opt)

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        measured = measure_region_cuda if device.type == "cuda" else measure_region_cpu
        peak, final, copies, allocator = measured(
            device, lambda: maker.copy_given((inputs, kwargs), whole_storages=True), run)
        from torch.utils._pytree import tree_leaves

        input_bytes = sum({id(t.untyped_storage()): t.untyped_storage().nbytes()
                           for t in _input_tensors(tuple(tree_leaves(copies)))}.values())
        del copies, opt
    finally:
        if was_enabled:
            gc.enable()
    for p in parameters:
        p.grad = None
    return peak, final, input_bytes, allocator
