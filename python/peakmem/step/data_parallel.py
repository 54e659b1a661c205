"""Torch's DistributedDataParallel on the eager front end: one rank's step.

``estimate_step(model, x, strategy="ddp", world_size=N, rank=r,
frontend="eager")`` wraps the step's model (the meta replica the recording
runs; the real model ``measure_step`` runs) in
``torch.nn.parallel.DistributedDataParallel`` under rank `r` of a process
group of `N` (peakmem.distribution.instant_process_group: each collective
completes at once and moves no data, so the one process runs the reducer's
own code: its gradient buckets, the copies into them and out of them, the
division by the world size, the rebuild of the buckets in the gradients'
order at the second step). Every rank of a DDP step runs the same program on
its own batch: the ranks differ only where their batches do.

The buckets the wrapper makes (reducer.cpp ``initialize_buckets``: one flat
tensor per bucket, all of the trainable parameters' bytes between them) are
held before the step starts: returned for the recording to count as
gradients.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Iterator

__all__ = ["wrapped_in_ddp"]


@contextlib.contextmanager
def _shapes_taken_as_equal() -> Iterator[None]:
    """DDP's constructor checks that every rank's parameters have the same
    shapes (``_verify_param_shape_across_processes``, an all-gather of their
    sizes read back with ``.item()``). One process stands for every rank,
    so they do; and on meta stand-ins the sizes cannot be read back."""
    import torch.nn.parallel.distributed as ddp_module

    check = ddp_module._verify_param_shape_across_processes
    ddp_module._verify_param_shape_across_processes = lambda *args, **kwargs: None
    try:
        yield
    finally:
        ddp_module._verify_param_shape_across_processes = check


def wrapped_in_ddp(model: Any) -> tuple[Any, list]:
    """`model` wrapped in DistributedDataParallel under the current process
    group, and the tensors the wrapper made and keeps (its buckets), one per
    storage."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    made: list[Any] = []

    class Made(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            made.extend(weakref.ref(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor))
            return out

    held_before = {id(t.untyped_storage()) for t in [*model.parameters(), *model.buffers()]}
    with _shapes_taken_as_equal(), Made():
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
    kept: dict[int, Any] = {}
    for ref in made:
        t = ref()
        if t is None or t.untyped_storage().nbytes() == 0:
            continue
        key = id(t.untyped_storage())
        if key not in held_before:
            kept.setdefault(key, t)
    return wrapped, list(kept.values())
