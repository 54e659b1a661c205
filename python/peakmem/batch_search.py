"""The largest batch that fits: ``max_batch_size``.

    r = peakmem.max_batch_size(model, lambda b: (torch.randn(b, 256, device="meta"),),
                               "24GiB", loss_fn=mse_loss, optimizer=torch.optim.AdamW)
    r.batch_size, r.report.peak_bytes, r.tried, r.traces, r.method

`make_inputs(n)` returns the step's inputs for size `n`: a batch size, or a
sequence length (``lambda s: (tokens[:, :s], targets[:, :s])``): whatever
the caller makes scale is the dimension searched; on ``meta`` nothing is
allocated. A dict is the model's keyword inputs (the eager front end's:
``lambda b: {"input_ids": ids[:b], "labels": ids[:b]}``).

The front end is ``estimate_step``'s (peakmem.step.frontend): by default a
``thunder.jit`` module's step (or one given ``transform``, ``plan``,
``recompute`` or ``strategy``) is Thunder's, any other module's the eager one. On the eager
front end (peakmem.step.eager) every size is recorded anew, as
``method="search"`` does; no Thunder trace is made, and `method` and
`sizes` do not apply. The formula and the Thunder search below are the
Thunder front end's.

``method="formula"`` (the default) traces the step with Thunder at three
sizes (peakmem.batch_formula: two derive the step at every size, the third
verifies the derivation), then finds the largest size by simulating the
derived step alone: doubling `n` until a step does not fit (or `high` is
reached), then bisecting between the last size that fits and the first that
does not, each size a C++ simulation (no Thunder). Where the step's program
changes with `n` (the formula cannot be derived or does not verify), it
warns, says why in ``reason``, and searches as ``method="search"`` does.

``method="search"`` runs the same doubling and bisection with a fresh
``estimate_step`` (a Thunder trace) at every size. Both assume the peak
grows with `n`, as it does when the inputs' sizes do; ``tried`` holds every
size simulated or estimated with its peak bytes.

``progress`` (default True) writes a line to stderr as each size is traced
(Thunder's seconds) and as each is judged (its peak bytes, fits or not,
simulated or traced), and a last line with the answer; a callable instead
receives each line; False is silent.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Unpack

from ._deprecation import _caller_outside_peakmem
from .batch_formula import DEFAULT_SIZES
from .step.frontend import records, resolve_frontend
from .step.options import EstimateOptions, takes
from .step.training_step import _plan_and_recompute

__all__ = ["BatchSearch", "max_batch_size"]

# Doubling stops here: a step that still fits has a peak that does not grow with n.
_LARGEST = 1 << 31


class _Progress:
    """Where max_batch_size's progress lines go: stderr, a callable, or nowhere."""

    def __init__(self, progress: bool | Callable[[str], Any], limit: int) -> None:
        if progress is True:
            self._emit = lambda line: print(line, file=sys.stderr, flush=True)
        elif progress is False or progress is None:
            self._emit = None
        elif callable(progress):
            self._emit = progress
        else:
            raise TypeError(f"progress must be True, False or a callable taking a line, got {progress!r}")
        self.limit = limit
        self.start = time.perf_counter()

    def say(self, line: str) -> None:
        if self._emit is not None:
            self._emit(f"max_batch_size: {line}")

    def tracing(self, n: int, seconds: float | None) -> None:
        self.say(f"n={n}: tracing the step with Thunder ..." if seconds is None
                 else f"n={n}: traced in {seconds:.1f} s")

    def judged(self, n: int, peak: int, fits: bool, how: str) -> None:
        verdict = "fits" if fits else "does not fit"
        self.say(f"n={n}: peak {peak:,} bytes, {verdict} in {self.limit:,} ({how})")

    def done(self, result: "BatchSearch") -> "BatchSearch":
        self.say(f"n={result.batch_size} is the largest that fits ({result.report.peak_bytes:,} bytes); "
                 f"{result.traces} Thunder traces, {len(result.tried)} sizes tried, "
                 f"{time.perf_counter() - self.start:.1f} s")
        return result


@dataclass(frozen=True)
class BatchSearch:
    """The result: the largest size that fits, the step report at that size,
    the budget, and every size tried with its peak bytes. ``traces``: how
    many times Thunder traced the step; ``method``: ``"formula"`` (the sizes
    simulated from the derived step) or ``"search"`` (each an estimate_step);
    ``reason``: why a formula asked for was not used (None when it was, or
    when the search was asked for)."""

    batch_size: int
    report: Any
    budget: int
    tried: dict[int, int] = field(default_factory=dict)
    traces: int = 0
    method: str = "search"
    reason: str | None = None


@takes(EstimateOptions)
def max_batch_size(model: Any, make_inputs: Callable[[int], tuple], budget: int | str | None = None, *,
                   low: int = 1, high: int | None = None, method: Literal["formula", "search"] = "formula",
                   sizes: tuple[int, ...] = DEFAULT_SIZES, verify: bool = True,
                   progress: bool | Callable[[str], Any] = True,
                   **step_options: Unpack[EstimateOptions]) -> BatchSearch:
    """The largest `n` in [`low`, `high`] whose step, ``estimate_step(model,
    *make_inputs(n), **step_options)``, fits in `budget` bytes (or a size
    such as ``"80GiB"``; None: a GPU model's memory, ``device=``).
    A size fits by estimate_step's verdict: on a GPU model the caching
    allocator's reserved bytes plus the CUDA context against the budget
    (peakmem.step.budget), on the CPU the requested peak; with the steady
    state (``steps=None``, the default) judged over the training run's
    steps, not the first alone. `step_options` are estimate_step's keyword
    arguments (below), `frontend` resolved as estimate_step resolves it; with
    ``recompute=True`` each size recomputes saved tensors until it fits
    `budget` (the report's ``recomputation`` says what and the FLOPs;
    with ``frontend="eager"``, selective checkpointing planned at each
    size, peakmem.step.eager_recompute), which only the search does. With ``allocator="cuda-caching"`` a size
    fits when PyTorch's CUDA caching allocator, given `budget` as the
    device's capacity, runs the whole step without running out of memory:
    the largest batch whose *reserved* bytes fit, not its requested ones.

    `method`: ``"formula"`` (Thunder traces `sizes`, three by default;
    ``verify=False``: the first two, unverified) or ``"search"`` (a trace
    per size); see the module docstring. `progress`: True (the default)
    writes a line to stderr for each size traced and judged, a callable
    receives each line instead, False is silent. Raises ValueError when not
    even `low` fits."""
    from .step.budget import judging
    from .step.device_target import device_target

    judged = judging(step_options, budget, device_target(step_options.get("device"), model))
    limit = judged.budget
    if limit is None:
        raise ValueError("max_batch_size needs a budget (or a GPU model to take its memory: device='cuda:h100')")
    if not isinstance(low, int) or low < 1 or (high is not None and high < low):
        raise ValueError(f"need 1 <= low <= high, got low={low!r}, high={high!r}")
    if method not in ("formula", "search"):
        raise ValueError(f"method must be 'formula' or 'search', got {method!r}")
    shown = _Progress(progress, limit)
    plan, recompute = _plan_and_recompute(step_options.get("plan", False), step_options.get("recompute"))
    # strategy= on the eager front end is torch's DDP or FSDP2 there (peakmem.distribution.with_strategy),
    # not a Thunder-only option.
    thunder_only = ("transform", "plan") + (() if step_options.get("frontend") == "eager" else ("strategy",))
    frontend, model = resolve_frontend(model, step_options.get("frontend"), None, recompute=recompute is not None,
                                       **{k: step_options.get(k) for k in thunder_only})
    step_options = {**step_options, "frontend": frontend, "plan": plan, "recompute": recompute}
    if records(frontend):
        # The formula is derived from Thunder's traces; an eager or compiled
        # step is recorded anew at each size (in about a second for a 7B
        # model run eagerly).
        reason = None if method == "search" else f"the {frontend} front end estimates each size (no Thunder trace)"
        return shown.done(_search(model, make_inputs, judged, low, high, step_options, reason=reason, shown=shown))
    if method == "search":
        return shown.done(_search(model, make_inputs, judged, low, high, step_options, shown=shown))
    return shown.done(_by_formula(model, make_inputs, judged, low, high, sizes, verify, step_options, shown))


def _by_formula(model: Any, make_inputs: Callable[[int], tuple], judged: Any, low: int, high: int | None,
                sizes: tuple[int, ...], verify: bool, step_options: dict, shown: _Progress) -> BatchSearch:
    """max_batch_size's method="formula" on Thunder's front end: the
    formula's answer, or where it cannot answer (the step's structure
    changes with n, or the answer is below the sizes it is traced at) a
    warning and the search, reusing the traces made."""
    from .batch_formula import StructureChanges, _build, _check_sizes, _FirstDoesNotFit, _Traced
    from .step.estimate import _simulate
    from .step.report import _with_budget

    limit = judged.budget
    sizes = _check_sizes(sizes, verify)
    traced = _Traced()
    smallest = min(sizes)
    below = (f"n={smallest}, the smallest size the formula is traced at, does not fit; the sizes below "
             "it are estimated one by one (a dimension of 1 can change the program)")

    def first_fits(program: Any) -> bool:
        return bool(_with_budget(_simulate(program, judged.pricing)[0], limit, judged.context_bytes).fits)

    if high is not None and high < smallest:
        reason = f"high={high} is below the sizes the formula is traced at ({', '.join(map(str, sizes))})"
    else:
        try:
            # Asked only when the first size traced is the smallest and no
            # larger than `low`: then its not fitting settles the matter.
            check = first_fits if sizes[0] == smallest and low <= smallest else None
            formula = _build(model, make_inputs, sizes, verify, step_options, traced, check, shown.tracing)
        except StructureChanges as e:
            reason = e.reason
        except _FirstDoesNotFit:
            reason = below
            high = smallest - 1
        else:
            found = _solve(formula, limit, low, high, shown)
            if found is not None:
                return found
            reason = below
            high = smallest - 1
    if high is None or high >= low:  # (else `low` did not fit: _search raises)
        warnings.warn(f"max_batch_size: {reason}; searching with a Thunder trace per size",
                      stacklevel=_caller_outside_peakmem())
    return _search(model, make_inputs, judged, low, high, step_options, traced, reason, shown)


def _solve(formula: Any, limit: int, low: int, high: int | None, shown: _Progress) -> BatchSearch | None:
    """The largest n in [max(low, smallest traced size), high] whose derived
    step fits, with its report; None when the smallest such n does not fit
    and smaller sizes remain to try (they are not the formula's)."""
    smallest = min(formula.sizes)
    tried: dict[int, int] = {}
    fit: dict[int, bool] = {}

    def fits(n: int) -> bool:
        if n not in fit:
            tried[n], fit[n] = formula.simulate(n, limit)
            shown.judged(n, tried[n], fit[n], "simulated from the formula")
        return fit[n]

    start = max(low, smallest)
    if not fits(start):
        if low < smallest:
            return None
        raise _nothing_fits(limit, start, formula.estimate(start, limit))
    def unbounded(good: int) -> ValueError:
        return ValueError(f"the step fits {limit} bytes at n={good}: its peak does not grow with n (pass high=)")

    good = _largest_that_fits(fits, start, high, _LARGEST, unbounded)
    # The answer, confirmed: the derived step at B fits (its report made as
    # estimate_step makes one) and at B + 1 does not (unless B is `high`).
    report = formula.estimate(good, limit)
    if not report.fits or (good != high and fits(good + 1)):
        raise RuntimeError(f"max_batch_size: the answer {good} does not confirm (report fits: {report.fits}, "
                           f"n={good + 1} fits: {fit.get(good + 1)}): the peak does not grow with n")
    return BatchSearch(good, report, limit, dict(sorted(tried.items())), formula.traces, "formula", None)


def _search(model: Any, make_inputs: Callable[[int], tuple], judged: Any, low: int, high: int | None,
            step_options: dict, traced: Any = None, reason: str | None = None,
            shown: _Progress | None = None) -> BatchSearch:
    """Doubling and bisection with estimate_step at each size; the steps in
    `traced` (a batch_formula._Traced) are reused, not traced again."""
    from .step.estimate import _simulate, estimate_step
    from .step.report import _with_budget

    limit = judged.budget
    recompute = step_options.get("recompute")
    if recompute is not None and recompute.get("budget") is None:
        # Recompute only until the step fits this budget: the fewest added FLOPs.
        step_options = {**step_options, "recompute": {**recompute, "budget": limit}}
    reports: dict[int, Any] = {}
    traces = 0
    if traced is not None:
        for n, program in traced.programs.items():
            reports[n] = _with_budget(_simulate(program, judged.pricing)[0], limit, judged.context_bytes)
            if shown is not None:
                shown.judged(n, reports[n].peak_bytes, reports[n].fits, "traced above")
        traces = len(traced.programs)

    def fits(n: int) -> bool:
        nonlocal traces
        if n not in reports:
            if shown is not None and records(step_options.get("frontend")):
                shown.say(f"n={n}: recording the step ({step_options.get('frontend')}) ...")
            elif shown is not None:
                shown.tracing(n, None)
            inputs = make_inputs(n)
            if isinstance(inputs, dict):  # keyword inputs (frontend="eager")
                reports[n] = estimate_step(model, kwinputs=inputs, budget=limit, **step_options)
            else:
                reports[n] = estimate_step(model, *inputs, budget=limit, **step_options)
            seconds = reports[n].seconds
            if "thunder" in seconds:
                traces += 1
                how = f"traced in {seconds['thunder']:.1f} s"
            else:
                how = f"recorded eagerly in {seconds['record']:.1f} s"
            if shown is not None:
                shown.judged(n, reports[n].peak_bytes, reports[n].fits, how)
        return reports[n].fits

    if not fits(low):
        raise _nothing_fits(limit, low, reports[low])
    good = _largest_that_fits(fits, low, high)
    peaks = {n: r.peak_bytes for n, r in sorted(reports.items())}
    return BatchSearch(good, reports[good], limit, peaks, traces, "search", reason)


def _largest_that_fits(fits: Callable[[int], bool], good: int, high: int | None, largest: int | None = None,
                       unbounded: Callable[[int], Exception] | None = None) -> int:
    """The largest n >= `good` (which fits) and <= `high` that `fits`,
    assuming the peak grows with n: doubling until a size does not fit (or
    `high`), then bisection. A doubling past `largest` raises `unbounded(good)`."""
    bad = None
    while bad is None and (high is None or good < high):
        n = 2 * good if high is None else min(2 * good, high)
        if largest is not None and n > largest and unbounded is not None:
            raise unbounded(good)
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
    return good


def _nothing_fits(limit: int, n: int, report: Any) -> ValueError:
    need = f"{report.peak_bytes:,} bytes"
    if report.allocator is not None and report.allocator.get("reserved_peak_bytes") is not None:
        need += f" (the allocator reserves {report.allocator['reserved_peak_bytes']:,})"
    return ValueError(f"nothing fits in {limit:,} bytes: the step at n={n}, the smallest size asked for, "
                      f"needs {need}")
