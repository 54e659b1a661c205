"""The largest batch that fits: ``max_batch_size``, searched with ``estimate_step``.

    r = peakmem.max_batch_size(model, lambda b: (torch.randn(b, 256, device="meta"),),
                               "24GiB", loss_fn=mse_loss, optimizer=torch.optim.AdamW)
    r.batch_size, r.report.peak_bytes, r.tried

`make_inputs(n)` returns the step's inputs for size `n` (a batch size, or a
sequence length: whatever the caller makes scale); on ``meta`` nothing is
allocated. The search doubles `n` from `low` until a step does not fit (or
`high` is reached), then bisects between the last size that fits and the
first that does not. It assumes the peak grows with `n`, as it does when the
inputs' sizes do; every size it estimated is in ``tried``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["BatchSearch", "max_batch_size"]


@dataclass(frozen=True)
class BatchSearch:
    """The result: the largest size that fits (0: not even `low`), the step
    report at that size (at `low` when none fits), and every size estimated
    with its peak bytes."""

    batch_size: int
    report: Any
    budget: int
    tried: dict[int, int] = field(default_factory=dict)


def max_batch_size(model: Any, make_inputs: Callable[[int], tuple], budget: int | str, *,
                   low: int = 1, high: int | None = None, **step_kwargs: Any) -> BatchSearch:
    """The largest `n` in [`low`, `high`] whose step, ``estimate_step(model,
    *make_inputs(n), **step_kwargs)``, fits in `budget` bytes (or a size such
    as ``"80GiB"``). `step_kwargs` are estimate_step's (loss_fn, optimizer,
    optimizer_kwargs, steps, zero_grad, transform, plan, allocator,
    alloc_conf); with ``plan={"recompute": True}`` each size recomputes
    saved tensors until it fits `budget` (the report's ``recomputation``
    says what and the FLOPs). With ``allocator="cuda-caching"`` a size fits
    when PyTorch's CUDA caching allocator, given `budget` as the device's
    capacity, runs the whole step without running out of memory: the
    largest batch whose *reserved* bytes fit, not its requested ones."""
    from .step import _budget, estimate_step

    limit = _budget(budget)
    if limit is None:
        raise ValueError("max_batch_size needs a budget")
    if not isinstance(low, int) or low < 1 or (high is not None and high < low):
        raise ValueError(f"need 1 <= low <= high, got low={low!r}, high={high!r}")
    plan = step_kwargs.get("plan")
    if isinstance(plan, dict) and plan.get("recompute") and plan.get("budget") is None:
        # Recompute only until the step fits this budget: the fewest added FLOPs.
        step_kwargs = {**step_kwargs, "plan": {**plan, "budget": limit}}
    reports: dict[int, Any] = {}

    def fits(n: int) -> bool:
        reports[n] = estimate_step(model, *make_inputs(n), budget=limit, **step_kwargs)
        return reports[n].fits

    if not fits(low):
        return BatchSearch(0, reports[low], limit, _peaks(reports))
    good, bad = low, None
    while bad is None and (high is None or good < high):
        n = 2 * good if high is None else min(2 * good, high)
        if fits(n):
            good = n
        else:
            bad = n
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return BatchSearch(good, reports[good], limit, _peaks(reports))


def _peaks(reports: dict[int, Any]) -> dict[int, int]:
    return {n: r.peak_bytes for n, r in sorted(reports.items())}
