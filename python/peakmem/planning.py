"""peakmem.plan: a statement order with a lower peak, for a Thunder trace.

The search runs in C++ (include/peakmem/planning/planner.h): statements move
within their data dependences (in-place, random, collective and unknown ops
never move across others), every value the trace deletes is freed after its
last use in the new order, and each candidate order is judged by the runtime
model, so the planned peak is what PyTorch will measure. For a live
``TraceCtx`` the plan is a new ``TraceCtx`` (the same bound symbols in the
new order, with ``python_del`` where the plan frees) that runs as the
original did; for printed text, the planned text. ``plan_transform()`` is
the same as a Thunder transform: ``thunder.jit(model,
transforms=[peakmem.plan_transform()])`` plans the forward and backward
execution traces Thunder runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ._core import plan_live, plan_text
from .api import Allocator, Convention, _is_trace_ctx, _torch_threads

__all__ = ["Plan", "plan", "plan_transform"]


@dataclass(frozen=True)
class Plan:
    """A planned trace and how it was found.

    Attributes:
        trace: the planned Thunder ``TraceCtx`` (for a ``TraceCtx`` input;
            None for text).
        text: the planned trace's printed text.
        original_peak_bytes: the runtime model's peak of the trace as given.
        planned_peak_bytes, planned_final_bytes: the plan's (what a run of
            ``trace`` measures with ``peakmem.measure``).
        baselines: ``{name: peak}`` of the orders the search started from,
            each simulated with frees after last use: the trace's own order
            and Inductor's LPMF, BFS and DFS list schedules.
        start: the baseline the search improved on.
        simulations, moves_kept, seconds, time_budget_reached: the search.
        unchanged_reason: why the plan is the trace's own order, when it is.
        pinned: statements that may not move (in-place, unknown, ...), of
            ``statements`` (``del`` not counted); ``pinned_reasons``:
            ``{reason: count}``.
        lower_bound_bytes: no order peaks below it (the plan's final bytes,
            or the most any one statement needs: the storages it reads and
            what it allocates); the gap to it bounds what any reordering
            could still gain.
        allocated_peak_bytes, reserved_peak_bytes: with
            ``allocator="cuda-caching"``: ``(original, planned)`` peaks of the
            CUDA caching allocator model (None otherwise).
    """

    trace: Any
    text: str
    original_peak_bytes: int
    planned_peak_bytes: int
    planned_final_bytes: int
    baselines: dict = field(default_factory=dict)
    start: str = ""
    simulations: int = 0
    moves_kept: int = 0
    seconds: float = 0.0
    time_budget_reached: bool = False
    unchanged_reason: str = ""
    pinned: int = 0
    statements: int = 0
    pinned_reasons: dict = field(default_factory=dict)
    lower_bound_bytes: int = 0
    allocated_peak_bytes: tuple | None = None
    reserved_peak_bytes: tuple | None = None

    @property
    def reduction(self) -> float:
        """The planned peak's reduction against the trace as given (0.1: 10 % lower)."""
        if self.original_peak_bytes <= 0:
            return 0.0
        return 1.0 - self.planned_peak_bytes / self.original_peak_bytes


def _rebuild_trace_ctx(trace: Any, result: dict) -> Any:
    """The TraceCtx running `trace`'s bound symbols in the plan's order."""
    from thunder.core import prims
    from thunder.core.proxies import Proxy
    from thunder.core.trace import TraceProvenance, from_trace

    bsyms = list(trace.bound_symbols)
    order = result["order"]
    placed = set(order)
    lead = []  # bound symbols with no statement of their own (unpack_trivial): kept first
    first_placed = min(placed) if placed else len(bsyms)
    for i, b in enumerate(bsyms):
        if i in placed or b.sym.id == prims.PrimIDs.DEL:
            continue
        if i > first_placed:
            raise ValueError(
                f"cannot rebuild the planned trace: bound symbol {i} ({b.sym.name}) has no statement "
                "of its own and comes after the first statement"
            )
        lead.append(b)
    proxies: dict[str, Any] = {}
    for p in list(trace.args) + list((getattr(trace, "kwargs", None) or {}).values()):
        if isinstance(p, Proxy):
            proxies[p.name] = p
    for b in bsyms:
        for p in list(b.flat_proxy_outs) + list(b.flat_proxy_args):
            proxies.setdefault(p.name, p)

    def free(names: list[str]) -> list:
        return [prims.python_del.bind(*[proxies[n] for n in names], output=None)] if names else []

    new_bsyms = list(lead) + free(result["frees_before_first"])
    for index, names in zip(order, result["frees_after"]):
        new_bsyms.append(bsyms[index])
        if bsyms[index].sym.id != prims.PrimIDs.RETURN:
            new_bsyms.extend(free(names))
    planned = from_trace(trace)
    planned.bound_symbols = new_bsyms
    planned.set_provenance(
        TraceProvenance(
            f"peakmem plan (peak {result['original_peak_bytes']} -> {result['planned_peak_bytes']} bytes)"
        )
    )
    return planned


def plan(
    trace: Any,
    *,
    convention: Convention = "auto",
    scratch: bool = True,
    torch_threads: int | None = None,
    time_budget: float = 1.0,
    max_simulations: int = 20000,
    allocator: Allocator = "requested",
    alloc_conf: str | None = None,
) -> Plan:
    """Plans `trace` (a Thunder ``TraceCtx``, printed trace text, or a path to
    a printed trace) for a lower peak.

    `convention`, `scratch`, `torch_threads`: how the runtime model simulates
    it (as ``peakmem.analyze``). `time_budget` (seconds) and
    `max_simulations` bound the search; the plan is the same for the same
    input and options unless the time budget ends the search first
    (``Plan.time_budget_reached``). The trace's own order is returned, with
    the reason, when no order found has a lower peak or nothing may move.
    `allocator="cuda-caching"` (with `alloc_conf`, PYTORCH_CUDA_ALLOC_CONF's
    syntax) also prices the original and the plan with the CUDA caching
    allocator model; the search lowers requested bytes.
    Raises TraceError for a trace the runtime model cannot simulate.
    """
    options = dict(
        convention=convention,
        scratch=scratch,
        torch_threads=_torch_threads(torch_threads),
        time_budget=time_budget,
        max_simulations=max_simulations,
        allocator=allocator,
        alloc_conf=alloc_conf,
    )
    if _is_trace_ctx(trace):
        result = plan_live(trace, **options)
        try:
            planned = _rebuild_trace_ctx(trace, result)
        except ValueError as e:  # a bound symbol the plan cannot place: keep the trace
            planned = trace
            result = dict(result, planned_peak_bytes=result["original_peak_bytes"], unchanged_reason=str(e))
        text = str(planned)
    else:
        if not isinstance(trace, (str, os.PathLike)):
            raise TypeError(f"expected a Thunder TraceCtx, trace text or a path, got {type(trace).__name__}")
        text_in, name = str(trace), "<string>"
        if "\n" not in text_in and os.path.exists(text_in):
            name = text_in
            with open(text_in, encoding="utf-8") as f:
                text_in = f.read()
        result = plan_text(text_in, name=name, **options)
        planned, text = None, result["text"]
    return Plan(
        trace=planned,
        text=text,
        original_peak_bytes=result["original_peak_bytes"],
        planned_peak_bytes=result["planned_peak_bytes"],
        planned_final_bytes=result["planned_final_bytes"],
        baselines=dict(result["baselines"]),
        start=result["start"],
        simulations=result["simulations"],
        moves_kept=result["moves_kept"],
        seconds=result["seconds"],
        time_budget_reached=result["time_budget_reached"],
        unchanged_reason=result["unchanged_reason"],
        pinned=result["pinned"],
        statements=result["statements"],
        pinned_reasons=dict(result["pinned_reasons"]),
        lower_bound_bytes=result["lower_bound_bytes"],
        allocated_peak_bytes=result.get("allocated_peak_bytes"),
        reserved_peak_bytes=result.get("reserved_peak_bytes"),
    )


def plan_transform(**options: Any) -> Any:
    """A Thunder transform that plans every execution trace Thunder makes:
    ``thunder.jit(model, transforms=[peakmem.plan_transform()])``.

    Thunder applies a transform's ``transform_trace_post_optimization`` to the
    forward execution trace and, when it differentiates, to the backward
    (thunder/__init__.py), after its own frees (del_last_used); each is
    replaced by ``plan(trace, **options).trace`` (the same trace object when
    the plan keeps the trace's order). The plans are kept on the transform
    (``.plans``, in the order made) so a caller can see what changed.
    """
    from thunder.core.transform_common import Transform

    class PlanTransform(Transform):
        def __init__(self) -> None:
            self.plans: list[Plan] = []

        def transform_trace_post_optimization(self, computation_trace: Any, **kwargs: Any) -> Any:
            result = plan(computation_trace, **options)
            self.plans.append(result)
            if result.unchanged_reason:
                return computation_trace
            return result.trace

    return PlanTransform()
