"""What a step holds: the storages behind a module's parameters and buffers
and behind the inputs, their bytes, and the rank the process runs as."""

from __future__ import annotations

from typing import Any

from ..measure import local_shard


def _rank_and_world_size() -> dict[str, int]:
    """The rank this process runs as (DTensor values are read as its shards)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return {"rank": dist.get_rank(), "world_size": dist.get_world_size()}
    return {"rank": 0, "world_size": 0}


def _storage_key(t: Any) -> Any:
    """What identifies a tensor's storage (on meta, where every address is 0,
    the storage object; a DTensor's is its local shard's)."""
    s = local_shard(t).untyped_storage()
    return (t.device.type, s.data_ptr()) if t.device.type != "meta" else id(s)


def _storage_nbytes(t: Any) -> int:
    return local_shard(t).untyped_storage().nbytes()


def _printed_device(t: Any) -> str:
    """A tensor's device as trace types print it ("cpu", "cuda:0", "meta")."""
    d = t.device
    return f"{d.type}:{d.index}" if d.type == "cuda" and d.index is not None else (
        "cuda:0" if d.type == "cuda" else d.type)


def _distinct_storages(tensors) -> list[int]:
    """Bytes of each distinct storage behind `tensors`, in order (a view counts its whole storage once)."""
    seen: dict[Any, int] = {}
    for t in tensors:
        seen[_storage_key(t)] = _storage_nbytes(t)
    return list(seen.values())


def _storage_bytes(tensors) -> int:
    return sum(_distinct_storages(tensors))


def _held_by_module(module: Any) -> list:
    return [*module.parameters(), *module.buffers()]


def _input_tensors(inputs: tuple) -> list:
    import torch

    return [x for x in inputs if isinstance(x, torch.Tensor)]
