"""The step's arguments checked and read: the optimizer, the gradient, the
budget and the allocator's pricing."""

from __future__ import annotations

from typing import Any


def _check_optimizer(optimizer: Any, optimizer_kwargs: dict | None):
    """The optimizer's OptimizerSpec (None: no optimizer); ValueError for one not modelled."""
    kwargs = dict(optimizer_kwargs or {})
    if optimizer is None:
        if kwargs:
            raise ValueError("optimizer_kwargs given without an optimizer")
        return None
    from ..optimizer_program import resolve_optimizer

    return resolve_optimizer(optimizer, kwargs)


def _check_gradient(gradient: str | None) -> None:
    if gradient not in (None, "ones"):
        raise ValueError(f"gradient must be None (a scalar loss) or 'ones' "
                         f"(loss.backward(torch.ones_like(loss))), got {gradient!r}")


def _budget(budget: int | str | None) -> int | None:
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, (int, str)):
        raise TypeError(f"budget must be a number of bytes or a size such as '80GiB', got {budget!r}")
    if isinstance(budget, str):
        from .. import _core

        return _core.parse_byte_size(budget)
    if budget < 0:
        raise ValueError(f"budget must not be negative, got {budget}")
    return budget


def _check_arguments(steps: Any, optimizer: Any, optimizer_kwargs: dict | None,
                     budget: int | str | None) -> tuple[Any, int | None]:
    """What estimate_step and measure_step check first: (OptimizerSpec or None, budget bytes)."""
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    return _check_optimizer(optimizer, optimizer_kwargs), _budget(budget)


def _pricing(allocator: str, alloc_conf: str | None, device_memory: str | int | None,
             budget: int | None) -> dict:
    """_core.simulate_step's allocator arguments: with an allocator model and
    a budget but no device memory, the budget is the device's capacity."""
    if allocator != "requested" and device_memory is None and budget is not None:
        device_memory = budget
    if isinstance(device_memory, int):
        device_memory = str(device_memory)
    return {"allocator": allocator, "alloc_conf": alloc_conf, "device_memory": device_memory}
