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


def _pricing_requested() -> dict:
    """_core.simulate_step's allocator arguments for requested bytes alone."""
    return {"allocator": "requested", "alloc_conf": None, "device_memory": None}


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
    Judging, with a GPU model's defaults (the module docstring; the rule is
    C++'s ResolveBudgetTerms, which `peakmem step` applies too).
    `nccl_bytes`: a rank's NCCL buffers (peakmem.nccl_estimate), outside
    the allocator too, added to the context on a GPU model."""
    from .._core import budget_terms

    def size(name: str) -> int | None:
        value = options.get(name)
        return None if value is None else _size(name, value)

    device = target.name if target is not None and target.cuda else ""
    terms = budget_terms(device, _budget(budget), size("context_bytes"), options.get("allocator") or "",
                         size("device_memory"), nccl_bytes)
    capacity = terms["capacity"]
    pricing = {"allocator": terms["allocator"], "alloc_conf": options.get("alloc_conf"),
               "device_memory": None if capacity is None else f"{capacity}B"}
    return Judging(terms["budget"], pricing, terms["context_bytes"], options, budget)
