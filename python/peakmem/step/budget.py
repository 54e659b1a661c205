"""The bytes a step is checked against (``budget``) and how the allocator
model prices it (``allocator``, ``alloc_conf``, ``device_memory``).

``budget`` is the limit ``fits`` and ``headroom_bytes`` are judged by;
``device_memory`` is the device's capacity the allocator model runs with
(what ``allocator="cuda-caching"`` runs out of). With an allocator model and
a budget but no device memory, the budget is the capacity."""

from __future__ import annotations

import re


def _with_unit(name: str, text: str) -> str:
    """`text` when it names its unit; ValueError for a bare number ("80" is
    80 bytes to the parser, rarely what was meant: bytes are an int)."""
    if re.fullmatch(r"\s*[\d.]+\s*", text):
        raise ValueError(f"{name}={text!r} has no unit: give a size such as '{text.strip()}GiB' (or '{text.strip()}B'), "
                         f"or the bytes as an int ({name}={text.strip().split('.')[0]})")
    return text


def _budget(budget: int | str | None) -> int | None:
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, (int, str)):
        raise TypeError(f"budget must be a number of bytes or a size such as '80GiB', got {budget!r}")
    if isinstance(budget, str):
        from .._core import parse_byte_size

        return parse_byte_size(_with_unit("budget", budget))
    if budget < 0:
        raise ValueError(f"budget must not be negative, got {budget}")
    return budget


def _pricing(allocator: str, alloc_conf: str | None, device_memory: str | int | None,
             budget: int | None) -> dict:
    """_core.simulate_step's allocator arguments: with an allocator model and
    a budget but no device memory, the budget is the device's capacity."""
    if allocator != "requested" and device_memory is None and budget is not None:
        device_memory = budget
    if isinstance(device_memory, int):
        device_memory = str(device_memory)
    elif isinstance(device_memory, str):
        device_memory = _with_unit("device_memory", device_memory)
    return {"allocator": allocator, "alloc_conf": alloc_conf, "device_memory": device_memory}
