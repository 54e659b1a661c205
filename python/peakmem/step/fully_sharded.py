"""Torch's FSDP2 (``fully_shard``) on the eager front end: one rank's step.

``estimate_step(model, x, strategy="fsdp", world_size=N, rank=r,
frontend="eager")`` shards the step's model with torch's own ``fully_shard``
under rank `r` of a process group of `N` (peakmem.distribution
.instant_process_group: each collective completes at once and moves no
data), so the one process runs FSDP2's own code: the sharded parameters
(DTensors whose local shards are the rank's), the all-gather buffers of
each unshard and the reshard that frees them, the reduce-scatter of each
group's gradients and the sharded gradients it leaves, the mixed-precision
casts, and the optimizer over the shards.

The wrapping is the user's: ``parallelize=fn`` calls ``fn(model)`` on the
replica under the group (``fully_shard`` per block and on the root, with
the user's ``reshard_after_forward`` and ``mp_policy``; tensor parallelism
by ``parallelize_module`` on a 2-D mesh beside it, whose DTensor
collectives the instant group completes too). Without it, every
block of each ``nn.ModuleList`` in the model (a transformer's layers) is
sharded, then the root, with fully_shard's defaults.

FSDP2 refuses parameters on meta (``FSDPParamGroup._validate_no_meta_params``:
a model initialised on meta must be materialised before training) and takes
its device from the mesh's. On the recording's meta stand-ins,
``meta_parameters_trained`` lets the check pass and gives the groups the
meta device, with the CPU's stream stand-ins (torch.cpu.Stream: no-ops)
where FSDP2 would take CUDA streams: the allocations are the same, made on
meta.

FSDP2 allocates and frees the unsharded parameters' all-gather buffers by
resizing their storages in place (_fsdp_param.py ``alloc_storage`` and
``free_storage``: ``UntypedStorage.resize_``), which is not an ATen call a
dispatch mode sees; ``meta_parameters_trained(resized)`` calls
``resized(tensors, name)`` after each, and after each parameter's buffers
are first made (``init_all_gather_outputs``), for the recording to count.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

__all__ = ["meta_parameters_trained", "sharded_by_default", "wrapped_in_fsdp"]


Resized = Callable[[list, str], None]


def _told(resized: Resized) -> list[tuple[Any, str, Any]]:
    """FSDP2's storage resizes and its all-gather buffers' making, each
    followed by `resized` (the patches meta_parameters_trained makes)."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group

    alloc, free = _fsdp_param.alloc_storage, _fsdp_param.free_storage
    init_outputs = _fsdp_param.FSDPParam.init_all_gather_outputs
    names: dict[int, str] = {}  # id(storage) -> the buffer's name, its parameter's

    def told(tensor: Any) -> None:
        resized([tensor], names.get(id(tensor.untyped_storage()), "FSDP all-gather buffer"))

    def alloc_storage(tensor: Any) -> None:
        alloc(tensor)
        told(tensor)

    def free_storage(tensor: Any) -> None:
        free(tensor)
        told(tensor)

    def init_all_gather_outputs(self: Any, *args: Any, **kwargs: Any) -> None:
        init_outputs(self, *args, **kwargs)
        for t in self.all_gather_outputs:
            names[id(t.untyped_storage())] = f"FSDP all-gather buffer of {self._param_fqn}"
            told(t)

    return [(_fsdp_param, "alloc_storage", alloc_storage), (_fsdp_param_group, "alloc_storage", alloc_storage),
            (_fsdp_param, "free_storage", free_storage),
            (_fsdp_param.FSDPParam, "init_all_gather_outputs", init_all_gather_outputs)]


@contextlib.contextmanager
def meta_parameters_trained(resized: Resized | None = None) -> Iterator[None]:
    """FSDP2 trains a model whose parameters are on meta (see the module
    docstring): the groups' device is meta, its streams the CPU's; its
    storage resizes told to `resized`."""
    import torch
    from torch.distributed.fsdp._fully_shard import (
        _fsdp_collectives,
        _fsdp_init,
        _fsdp_param_group,
        _fsdp_state,
        _fully_shard,
    )

    handle = _fsdp_init._get_device_handle

    def device_handle(device_type: str) -> Any:
        return torch.cpu if device_type == "meta" else handle(device_type)

    patched = [(m, "_get_device_handle", device_handle)
               for m in (_fsdp_collectives, _fsdp_init, _fsdp_param_group, _fsdp_state)]
    patched.append((_fully_shard, "_get_device_from_mesh", lambda mesh: torch.device("meta")))
    patched.append((_fsdp_param_group.FSDPParamGroup, "_validate_no_meta_params", lambda self: None))
    if resized is not None:
        patched.extend(_told(resized))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]
    for owner, name, value in patched:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def sharded_by_default(model: Any) -> None:
    """fully_shard on every block of each nn.ModuleList in `model`, then
    on `model` (torchtitan's and FSDP2's documented wrapping of a
    transformer), with fully_shard's defaults."""
    import torch
    from torch.distributed.fsdp import fully_shard

    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList):
            for block in module:
                fully_shard(block)
    fully_shard(model)


def wrapped_in_fsdp(model: Any, parallelize: Callable[[Any], Any] | None) -> Any:
    """`model` sharded by `parallelize` (or sharded_by_default) under the
    current process group: the model its call returns, else `model`."""
    shard = parallelize or sharded_by_default
    out = shard(model)
    return model if out is None else out
