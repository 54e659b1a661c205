"""The eager front end's step run for real: the truth its estimates are checked against.

``measure_step`` on the eager front end, and on a ``torch.compile``'d module
(whose warm-up step compiles it, so the measured steps run Inductor's
kernels), runs the step eager.py records, the user's own model on real
tensors.
"""

from __future__ import annotations

import contextlib
import copy
import gc
from typing import Any

from .data_parallel import wrapped_in_ddp
from .eager import _loss, _make_optimizer
from .fully_sharded import wrapped_in_fsdp
from .holdings import _held_by_module, _storage_bytes

__all__ = ["measure_eager_step"]


def measure_eager_step(model: Any, inputs: tuple, step: Any, device: Any) -> tuple[int, int, int, Any, int]:
    """Runs `step` (a peakmem.step.TrainingStep) eagerly for real (one
    warm-up step first, its own peak not measured, its gradients dropped and
    the optimizer made afresh) and measures it as measure_step does: (peak,
    final, input bytes, allocator stats, the bytes the model as run holds
    before the step: its parameters and buffers, a rank's shards of them
    under FSDP2). On the CPU what the warm-up left allocated is counted in
    both figures (the step holds it); on CUDA the figures are relative to
    the process after the warm-up. Under FSDP2 a copy of `model` is sharded
    and run (fully_shard changes the module it is given)."""
    from ..measure import _InputMaker, measure_region_cpu, measure_region_cuda
    from .holdings import _input_tensors

    if step.distributed is not None and device.type == "cuda":  # the allocator's figures of its buckets
        raise ValueError(f"measure_step with strategy={step.distributed!r} on the eager front end measures on the "
                         "CPU only: a CUDA rank's measurement is not written yet")
    kwargs, zero_grad = dict(step.kwargs or {}), step.zero_grad
    optimizer, optimizer_kwargs, steps = step.optimizer, step.optimizer_kwargs, step.measured_steps()
    maker = _InputMaker(device, 0)
    if step.distributed == "fsdp":
        model = wrapped_in_fsdp(copy.deepcopy(model), step.parallelize)
    parameters = list(model.parameters())
    held_by_model = _storage_bytes(_held_by_module(model))

    made: dict[str, Any] = {"model": model}

    def run_once(copies: tuple, kw: dict, opt: Any) -> None:
        loss = _micro_batches(made["model"], step, copies, kw)
        if opt is not None:
            opt.step()
        if zero_grad:
            (opt if opt is not None else made["model"]).zero_grad(set_to_none=True)
        del loss

    def make() -> Any:
        return maker.copy_given((inputs, kwargs), whole_storages=True)

    held = _settled_ddp(made, run_once, make, parameters) if step.distributed == "ddp" else 0

    def warm_up() -> None:
        run_once(*maker.copy_given((inputs, kwargs), whole_storages=True),
                 _make_optimizer(optimizer, optimizer_kwargs, parameters))
        for p in parameters:
            p.grad = None
        made["optimizer"] = _make_optimizer(optimizer, optimizer_kwargs, parameters)
        gc.collect()

    def run(copies):
        for _ in range(steps):
            run_once(*copies, made["optimizer"])

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if device.type == "cuda":
            # Figures relative to the warm process: what the warm-up left
            # (cuBLAS's workspaces among it) is the process's, which
            # scripts/gpu_check.py's workspaces row compares apart.
            warm_up()
            peak, final, copies, allocator = measure_region_cuda(device, make, run)
        else:
            # What the warm-up left (a module's cache made at its first
            # call) is held by the measured steps: counted.
            peak, final, copies, allocator = measure_region_cpu(device, make, run, warm_up)
        from torch.utils._pytree import tree_leaves

        input_bytes = sum({id(t.untyped_storage()): t.untyped_storage().nbytes()
                           for t in _input_tensors(tuple(tree_leaves(copies)))}.values())
        del copies
        made.clear()
    finally:
        if was_enabled:
            gc.enable()
    for p in parameters:
        p.grad = None
    return peak + held, final + held, input_bytes, allocator, held_by_model


def _micro_batches(model: Any, step: Any, copies: tuple, kw: dict) -> Any:
    """The step's forwards and backwards, ``accumulation_steps`` of them
    (as eager._run_iteration records them: each micro-batch's loss released
    after its backward, the gradient sync of DDP or FSDP2 off but for the
    last); returns the last micro-batch's loss."""
    from .running import _backward

    for i in range(1, step.accumulation_steps + 1):
        last = i == step.accumulation_steps
        if step.accumulation_steps > 1 and hasattr(model, "set_requires_gradient_sync"):
            model.set_requires_gradient_sync(last)
        sync = model.no_sync() if not last and hasattr(model, "no_sync") else contextlib.nullcontext()
        with sync:
            out = model(*step.model_call(copies), **kw)
            loss = _loss(out, step.loss_fn, copies, kw)
            del out
            _backward(loss, step.gradient)
        if not last:
            del loss
    return loss


def _settled_ddp(made: dict, run_once: Any, make: Any, parameters: list) -> int:
    """``made["model"]`` wrapped in DistributedDataParallel and run two
    steps before the profile starts (no optimizer, the gradients dropped):
    the second rebuilds the buckets in the gradients' order (reducer.cpp
    rebuild_buckets), broadcasting their layout, and a real group's worker
    threads (gloo's) drop the last reference to what a broadcast sent where
    the profiler does not see it. The measured steps are DDP's steady ones;
    returns the bytes of its buckets, which they hold (added to the figures,
    as the parameters are). A cache a module makes at its first call is made
    here too, and not counted."""
    made["model"] = wrapped_in_ddp(made["model"])[0]
    for _ in range(2):
        run_once(*make(), None)
    for p in parameters:
        p.grad = None
    return sum(b.buffer().untyped_storage().nbytes() for b in made["model"].reducer._get_zeros_like_grad_buckets())
