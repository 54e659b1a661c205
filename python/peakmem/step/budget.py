"""The bytes a step is checked against (``budget``), what else the card
holds (``context_bytes``) and how the allocator model prices the step
(``allocator``, ``alloc_conf``, ``device_memory``): one verdict, the C++
``JudgeBudget`` (report/budget_verdict.h), for every output.

On a GPU model (``device="cuda:h100"``, semantics/execution_context.h's
catalog) a step fits when the caching allocator's reserved peak plus the
CUDA context fits the card's memory: ``budget`` defaults to the card's
``total_memory``, ``context_bytes`` to the catalog's CUDA context, the
allocator model to ``"cuda-caching"``, run with the budget less the context
as its capacity (``device_memory``). On the CPU the requested peak is
judged against the budget, and the report says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["Judging", "judging"]


def _size(name: str, value: int | str) -> int:
    """`value` in bytes: an int as it is, a string a size that names its
    unit (``_core.parse_size_with_unit``: ``"48"`` is refused, as in the CLI)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{name} must be a number of bytes or a size such as '80GiB', got {value!r}")
    if isinstance(value, str):
        from .._core import parse_size_with_unit

        try:
            return parse_size_with_unit(value)
        except ValueError as e:
            said = str(e)
            if said.startswith(repr(value)):  # "'80' has no unit: ..."
                bare = value.strip().split(".")[0]
                raise ValueError(f"{name}={said} (or the bytes as an int: {name}={bare})") from None
            raise ValueError(f"{name}: {said}") from None
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


def _budget(budget: int | str | None) -> int | None:
    return None if budget is None else _size("budget", budget)


def _pricing(allocator: str, alloc_conf: str | None, device_memory: str | int | None,
             budget: int | None, context_bytes: int = 0) -> dict:
    """_core.simulate_step's allocator arguments: with an allocator model and
    a budget but no device memory, the budget less what the card holds
    outside the allocator is the allocator's capacity."""
    if allocator != "requested" and device_memory is None and budget is not None:
        device_memory = max(budget - context_bytes, 1)  # a budget the context fills: nothing left
    if isinstance(device_memory, int):
        device_memory = f"{device_memory}B"
    elif isinstance(device_memory, str):
        device_memory = f"{_size('device_memory', device_memory)}B"
    return {"allocator": allocator, "alloc_conf": alloc_conf, "device_memory": device_memory}


@dataclass(frozen=True)
class Judging:
    """How a step's budget is judged: the budget (None: not asked), the
    simulation's allocator arguments (``pricing``) and the bytes the card
    holds outside the allocator (``context_bytes``)."""

    budget: int | None
    pricing: dict
    context_bytes: int = 0
    options: Mapping[str, Any] | None = None  # what it was made of, to make it again with NCCL's bytes
    given_budget: int | str | None = None


def judging(options: Mapping[str, Any], budget: int | str | None, target: Any = None,
            nccl_bytes: int = 0) -> Judging:
    """`options` (estimate_step's keywords), `budget` and the target device
    (peakmem.step.device_target.DeviceTarget; None: the CPU) made one
    Judging, with a GPU model's defaults (the module docstring).
    `nccl_bytes`: a rank's NCCL buffers (peakmem.nccl_estimate), outside
    the allocator too, added to the context on a GPU model."""
    gpu = target is not None and target.cuda and target.total_memory_bytes > 0
    limit = _budget(budget)
    if limit is None and gpu:
        limit = target.total_memory_bytes
    given = options.get("context_bytes")
    context = _size("context_bytes", given) if given is not None else (target.context_bytes if gpu else 0)
    context += nccl_bytes if gpu else 0
    allocator = options.get("allocator") or ("cuda-caching" if gpu else "requested")
    return Judging(limit, _pricing(allocator, options.get("alloc_conf"), options.get("device_memory"), limit,
                                   context), context, options, budget)
