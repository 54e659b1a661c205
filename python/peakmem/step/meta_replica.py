"""Meta stand-ins for a model and its inputs: what the eager recording
runs on, so that nothing of the model's size is allocated. Each real tensor
becomes a meta tensor of its storage's bytes, views of one storage staying
views of one; tensors already on meta are used as they are."""
from __future__ import annotations

import copy
from typing import Any

from .shadow_values import ShadowValues


def _meta_stand_ins(tensors: list, made: dict) -> None:
    """A meta tensor for each of `tensors` (by id into `made`), views of one
    storage where the originals share one, of the originals' storage bytes."""
    import torch

    storages: dict[Any, Any] = {}
    for t in tensors:
        if id(t) in made or t.device.type == "meta":
            continue
        st = t.untyped_storage()
        key = (st.data_ptr(), st.nbytes()) if st.data_ptr() else id(st)
        meta = storages.setdefault(key, torch.UntypedStorage(st.nbytes(), device="meta"))
        m = torch.empty(0, dtype=t.dtype, device="meta").set_(meta, t.storage_offset(), t.size(), t.stride())
        if isinstance(t, torch.nn.Parameter):
            m = torch.nn.Parameter(m, requires_grad=t.requires_grad)
        elif t.requires_grad:
            m.requires_grad_(True)
        made[id(t)] = m


def meta_replica(model: Any, inputs: tuple, kwargs: dict,
                 shadows: ShadowValues | None = None) -> tuple[Any, tuple, dict]:
    """The model, inputs and keyword inputs with every tensor a meta stand-in
    (deep copies of the containers, the tensors' data not copied); those
    already on meta are used as they are. `shadows`, when given, keeps the
    real integer and boolean tensors' values beside their stand-ins
    (peakmem.step.shadow_values)."""
    import torch
    from torch.utils._pytree import tree_leaves

    given = [*model.parameters(), *model.buffers(),
             *(x for x in tree_leaves((inputs, kwargs)) if isinstance(x, torch.Tensor))]
    if all(t.device.type == "meta" for t in given):
        return model, inputs, kwargs
    made: dict[int, Any] = {}
    _meta_stand_ins(given, made)
    if shadows is not None:
        shadows.give_inputs([(made[id(t)], t) for t in given if id(t) in made])
    memo = {k: v for k, v in made.items()}
    return copy.deepcopy((model, inputs, kwargs), memo)
