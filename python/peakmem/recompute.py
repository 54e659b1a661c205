"""Recomputation: forward values the backward makes again instead of saving them.

A training step's backward reads tensors the forward saved; each is held
from the forward's end to its last use in the backward. A saved tensor can
be dropped from the saved list and made again in the backward, from inputs
the backward has: tensors still saved, or values recomputed before it. An
input that is neither is saved in its place (a forward argument, a
parameter or an input, costs nothing saved: the step holds it anyway).
What may be recomputed is the op registry's (``RecomputeCostOf``): views,
pointwise ops, shallow_copy, softmax and contractions (mm, matmul,
linear); never reductions, attention kernels, in-place or random ops (a
random op recomputed would draw again), so that a recomputed value has
the bits of the saved one.

The candidates (``candidates``, listed by planning/step_recompute.h) come
in two tiers. The cheap ones are saved tensors made by one view or
pointwise op. The expensive ones are
regions, named by a saved tensor with a trailing ``+``: the saved tensors
sharing its storage dropped together (dropping one alone frees nothing),
each made again, with every statement that makes an input they lack, back
to what the backward has; a region can hold matmuls and softmax, and a
saved tensor's region can run most of a block's forward, as activation
checkpointing does.

The search (``search``) is greedy and judged by the exact step simulation:
each round tries every candidate on top of the choices so far, re-simulates
the whole step's peak (peakmem.step: forward, backward, gradients,
optimizer, with every tensor's identity) and keeps the one that lowers the
peak the most per added FLOP (one FLOP per output element of a pointwise
op or softmax, none for a view or shallow_copy, 2·m·n·k for a contraction);
a candidate that does not lower the peak is never kept. The rounds run over
the cheap candidates; only when those no longer lower the peak and a budget
is given that the step does not fit do they go on over every candidate
(planning/recompute_search.h). Without a budget, then, only cheap
candidates are chosen. With a budget it stops as soon as the step fits, so
a larger budget stops earlier along the same sequence of choices: the
recomputation, and the FLOPs it adds, shrink as the budget grows. The
search is bounded by a number of simulations (the same choice on every
machine) and, when asked, by wall time (then the choice can depend on the
machine's speed).

The rewritten traces are made the way Thunder makes its own
(thunder/transforms/autodiff.py: split_into_forward_and_backward; frees
placed by thunder.executors.passes.del_last_used's rule, see ``Frees``), so
they run: ``recompute_transform``
applies a choice inside ``thunder.jit`` (it rewrites the forward and then the
backward Thunder hands it), which is how ``measure_step`` proves a plan by
running it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Recomputation", "apply", "candidates", "recompute_transform", "rewrite", "search"]


@dataclass(frozen=True)
class Recomputation:
    """What the search chose, and what it did to the step's peak.

    Attributes:
        names: the candidates recomputed in the backward, in candidate order
            (a name ending in ``+`` is a region: see the module docstring).
        added_flops: the work the backward does again (the module
            docstring's count).
        peak_before, peak_after: the step's peak without and with it (bytes).
        budget: the bytes asked for (None: as low as it goes); fits: whether
            the peak is within it.
        steps: each kept choice as (name, peak after it, FLOPs added by it).
        simulations: step simulations run; seconds: the search's wall time;
        time_budget_reached, simulation_limit_reached: the search stopped
            on its time budget, or on its number of simulations.
    """

    names: tuple[str, ...] = ()
    added_flops: int = 0
    peak_before: int = 0
    peak_after: int = 0
    budget: int | None = None
    fits: bool | None = None
    steps: tuple[tuple[str, int, int], ...] = ()
    simulations: int = 0
    seconds: float = 0.0
    time_budget_reached: bool = False
    simulation_limit_reached: bool = False


def _prims():
    from thunder.core import prims

    return prims


def _return_parts(fw: Any) -> tuple[Any, dict, tuple, tuple]:
    """The forward's return bound symbol, its dict, its saved tensors and saved others."""
    ret = fw.bound_symbols[-1]
    if ret.sym.id != _prims().PrimIDs.RETURN:
        raise ValueError(f"the forward does not end with a return (its last op is {ret.sym.name})")
    data, (saved, other) = ret.args
    return ret, data, tuple(saved), tuple(other)


@dataclass
class _Step:
    """One forward bound symbol a candidate runs again: its index in the
    forward, the tensors it reads and the values it makes."""

    index: int
    bsym: Any
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class _Candidate:
    name: str
    flops: int
    expensive: bool = False  # the expensive tier (recompute_search.h)
    dropped: tuple[str, ...] = ()  # the saved tensors it drops
    steps: tuple[_Step, ...] = ()  # in forward order


def candidates(fw: Any) -> list[_Candidate]:
    """What the backward could make again: planning/step_recompute.h's
    RecomputeCandidates (``_core.recompute_candidates``, the one set of
    rules, which ``peakmem plan STEP.json --recompute`` lists too) on `fw`
    with its saved list, outputs and flat arguments. First the cheap ones,
    each a saved tensor made by a view or pointwise op; then the expensive
    ones, each a saved tensor's region (named by it with a trailing ``+``):
    the saved tensors sharing its storage dropped together, made again
    with every statement back to what the backward has (matmuls and
    softmax included). Each step is matched to its bound symbol by the
    first value it makes (a value has one producer in a trace)."""
    from ._core import recompute_candidates

    _, data, saved, _other = _return_parts(fw)
    bsyms = list(fw.bound_symbols)
    producer: dict[str, int] = {}
    for i, b in enumerate(bsyms):
        for p in b.flat_proxy_outs:
            producer.setdefault(p.name, i)
    listed = recompute_candidates(fw, [t.name for t in saved],
                                        [p.name for p in _flat_proxies(data.get("output"))],
                                        [p.name for p in _flat_proxies(data.get("flat_args"))])
    out = []
    for c in listed:
        steps = []
        for _statement, inputs, outputs in c["steps"]:
            i = producer[outputs[0]]
            steps.append(_Step(i, bsyms[i], tuple(inputs), tuple(outputs)))
        out.append(_Candidate(c["name"], c["flops"], c["expensive"], tuple(c["dropped"]), tuple(steps)))
    return out


def _flat_proxies(x: Any) -> list:
    from thunder.core.proxies import Proxy

    if isinstance(x, Proxy):
        return [x]
    if isinstance(x, dict):
        return [p for v in x.values() for p in _flat_proxies(v)]
    if isinstance(x, (list, tuple)):
        return [p for v in x for p in _flat_proxies(v)]
    return []


def _closure(fw: Any, names: list[str], by_name: dict[str, _Candidate]) -> tuple[list[str], list[Any]]:
    """The saved list when `names` (candidates) are recomputed: without what
    they drop, in the forward's order, then the inputs the backward would
    lack, saved in their place (a forward argument saved costs the step
    nothing, it is held anyway); and the bound symbols that recompute them,
    in forward order, each once (step_recompute.h's CloseRecomputation)."""
    _, _data, saved, _other = _return_parts(fw)
    dropped = {d for n in names for d in by_name[n].dropped}
    steps = {s.index: s for n in names for s in by_name[n].steps}
    kept = [t.name for t in saved if t.name not in dropped]
    available = set(kept)
    order = []
    for i in sorted(steps):
        for n in steps[i].inputs:
            if n not in available:
                kept.append(n)  # an input the backward lacks: saved instead
                available.add(n)
        available.update(steps[i].outputs)
        order.append(steps[i].bsym)
    return kept, order


def _plan(fw: Any, names: list[str], by_name: dict[str, _Candidate] | None = None) -> tuple[list[str], list[Any]]:
    """_closure for `names`, each checked to be a candidate of `fw`
    (`by_name`: candidates(fw) by name, when the caller has them)."""
    if by_name is None:
        by_name = {c.name: c for c in candidates(fw)}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ValueError(f"cannot recompute {', '.join(missing)}: not a candidate in this forward trace (a "
                         "saved tensor made by a view or pointwise op, or a saved tensor's region named "
                         "with a trailing '+'; a plan made for another trace?)")
    return _closure(fw, list(names), by_name)


class Frees:
    """thunder.executors.passes.del_last_used's rule, applied to many
    variants of one pair of traces: walking backwards, the first statement
    (other than a comment or an unpack_trivial) that names a value not yet
    seen, and not among the trace's outputs, is followed by one ``del`` of
    those values (in the order its outputs then its arguments name them);
    with `clear_mutable_collections`, a collection among them is cleared
    just before. The ``del`` statements are made once per set of names and
    reused: the search's variants share nearly all of them, and binding
    them is most of what Thunder's pass costs. test_recompute.py checks the
    traces equal Thunder's own pass's."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, ...], Any] = {}
        self._cleared: dict[str, Any] = {}

    def _del(self, values: list[Any]) -> Any:
        key = tuple(v.name for v in values)
        if key not in self._made:
            self._made[key] = _prims().python_del.bind(*values, output=None)
        return self._made[key]

    def _clear(self, value: Any) -> Any:
        from thunder.executors.pythonex import clear_mutable_collection

        if value.name not in self._cleared:
            self._cleared[value.name] = clear_mutable_collection.bind(value, output=None)
        return self._cleared[value.name]

    def __call__(self, trace: Any, clear_mutable_collections: bool = False) -> Any:
        from thunder.core.proxies import CollectionProxy, Proxy
        from thunder.core.pytree import tree_flatten
        from thunder.core.trace import from_trace
        from thunder.core.utils import sequencify
        from thunder.executors.passes import comment_symbols

        prims = _prims()
        flat_outs, _ = tree_flatten(sequencify(trace.output))
        seen = {o.name for o in flat_outs if isinstance(o, Proxy)}
        out: list[Any] = []
        for b in reversed(trace.bound_symbols):
            if b.sym.id in comment_symbols:
                out.append(b)
                continue
            if b.sym.id == prims.PrimIDs.DEL:
                continue
            dead = []
            for x in (*b.flat_proxy_outs, *b.flat_proxy_args):
                if x.name not in seen:
                    seen.add(x.name)
                    dead.append(x)
            if dead and b.sym.id is not prims.PrimIDs.RETURN:
                out.append(self._del(dead))
                if clear_mutable_collections:
                    out.extend(self._clear(x) for x in dead if isinstance(x, CollectionProxy))
            out.append(b)
        made = from_trace(trace)
        made.bound_symbols = out[::-1]
        return made


def rewrite(fw: Any, bw: Any, names: list[str],
            by_name: dict[str, _Candidate] | None = None, frees: Frees | None = None) -> tuple[Any, Any]:
    """The forward and backward with `names` recomputed in the backward
    (`frees`: a Frees to reuse across calls on the same traces)."""
    kept, order = _plan(fw, names, by_name)
    frees = frees or Frees()
    return rewrite_forward(fw, kept, frees), rewrite_backward(fw, bw, kept, order, frees)


def _proxies_by_name(trace: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for b in trace.bound_symbols:
        for p in list(b.flat_proxy_outs) + list(b.flat_proxy_args):
            out.setdefault(p.name, p)
    for p in _flat_proxies(list(trace.args)):
        out.setdefault(p.name, p)
    return out


def rewrite_forward(fw: Any, kept: list[str], frees: Frees | None = None) -> Any:
    """`fw` returning `kept` as its saved tensors, its frees made again."""
    from thunder.core.trace import from_trace

    prims = _prims()
    ret, data, _saved, other = _return_parts(fw)
    proxies = _proxies_by_name(fw)
    new_ret = ret.from_bsym(args=(data, (tuple(proxies[n] for n in kept), other)))
    out = from_trace(fw)
    out.bound_symbols = [b for b in fw.bound_symbols[:-1] if b.sym.id != prims.PrimIDs.DEL] + [new_ret]
    return (frees or Frees())(out)


def rewrite_backward(fw: Any, bw: Any, kept: list[str], recompute: list[Any], frees: Frees | None = None) -> Any:
    """`bw` taking `kept` as its saved tensors and running the `recompute`
    bound symbols (the forward's) where their values are first read, built
    as Thunder builds a backward
    (split_into_forward_and_backward), its frees made again."""
    from thunder.core.proxies import CollectionProxy
    from thunder.core.trace import TraceCtx, tracectx

    prims = _prims()
    _, _data, _saved, other = _return_parts(fw)
    proxies = _proxies_by_name(fw)
    prologue_ids = {prims.PrimIDs.UNPACK_TRIVIAL, prims.PrimIDs.UNPACK_SEQUENCE, prims.PrimIDs.DEL}
    grad_outs = None
    body = []
    for b in bw.bound_symbols:
        if b.sym.id == prims.PrimIDs.UNPACK_SEQUENCE and b.args and getattr(b.args[0], "name", "") == "cotangents":
            grad_outs = list(b.output)
        if b.sym.id in prologue_ids or b.sym.name == "clear_mutable_collection":
            continue
        body.append(b)
    if grad_outs is None:
        raise ValueError("the backward does not unpack its cotangents as Thunder's backward traces do")

    def backward_fn(saved_for_backward, cotangents):
        pass

    out = TraceCtx(fn=backward_fn)
    out.tags.update(getattr(bw, "tags", ()))
    out.names = set(bw.names) - {"C0", "C1", "saved_for_backward", "cotangents"}
    out.name_ctr = bw.name_ctr
    with tracectx(out):
        c0 = CollectionProxy([proxies[n] for n in kept], name="C0")
        c1 = CollectionProxy(list(other), name="C1")
        saved = CollectionProxy([c0, c1], name="saved_for_backward")
        cotangents = CollectionProxy(grad_outs, name="cotangents")
        out.args = ([c0.collection(), c1.collection()], cotangents.collection())
        prims.unpack_trivial(saved, name="saved_for_backward")
        prims.unpack_trivial(cotangents, name="cotangents")
        prims.unpack_sequence(saved, len(saved.coll))
        prims.unpack_sequence(cotangents, len(cotangents.coll))
        prims.unpack_sequence(c0, len(c0.coll))
        prims.unpack_sequence(c1, len(c1.coll))
    out.bound_symbols += _placed(recompute, body)
    return (frees or Frees())(out, clear_mutable_collections=True)


def _placed(recompute: list[Any], body: list[Any]) -> list[Any]:
    """`body` with each `recompute` bound symbol just before the first that
    reads one of its outputs (the latest it may run: its value is alive the
    shortest), the last in forward order placed first so that a value's
    recomputation precedes the recomputations that read it."""
    out = list(body)
    for b in reversed(recompute):
        names = {p.name for p in b.flat_proxy_outs}
        at = next((i for i, x in enumerate(out) if any(p.name in names for p in x.flat_proxy_args)), len(out))
        out.insert(at, b.from_bsym())
    return out


def search(fw: Any, bw: Any, simulate: Callable[[Any, Any], int], budget: int | None = None,
           time_budget: float | None = None,
           max_simulations: int = 5000) -> tuple[Recomputation, Any, Any]:
    """The greedy search of the module docstring. `simulate(fw, bw)` is the
    step's peak with those traces. `max_simulations` bounds the search (the
    same choice on every machine); `time_budget` (seconds, None: none) also
    bounds it by wall time. A round cut short keeps the best it tried.
    Returns the choice and the rewritten forward and backward (`fw`, `bw`
    themselves when nothing is recomputed).

    The rounds are planning/recompute_search.h's (``_core.recompute_search``,
    which ``peakmem plan STEP.json --recompute`` runs too); this side rewrites
    the traces each variant it asks for and keeps the wall-time bound."""
    from ._core import recompute_search

    start = time.perf_counter()
    pool = candidates(fw)
    by_name = {c.name: c for c in pool}
    frees = Frees()

    def peak(chosen: list[int]) -> int:
        if not chosen:
            return simulate(fw, bw)
        return simulate(*rewrite(fw, bw, [pool[i].name for i in chosen], by_name, frees))

    def out_of_time() -> bool:
        return time.perf_counter() - start > time_budget

    r = recompute_search([c.flops for c in pool], peak, budget, max_simulations,
                               None if time_budget is None else out_of_time, [int(c.expensive) for c in pool])
    chosen = [pool[i].name for i in r["chosen"]]
    traces = rewrite(fw, bw, chosen, by_name, frees) if chosen else (fw, bw)
    current = r["peak_after"]
    result = Recomputation(
        names=tuple(pool[i].name for i in sorted(r["chosen"])), added_flops=r["added_flops"],
        peak_before=r["peak_before"], peak_after=current, budget=budget,
        fits=None if budget is None else current <= budget,
        steps=tuple((pool[i].name, p, pool[i].flops) for i, p in zip(r["chosen"], r["peaks"])),
        simulations=r["simulations"], seconds=time.perf_counter() - start,
        time_budget_reached=r["stopped"], simulation_limit_reached=r["simulation_limit_reached"])
    return result, traces[0], traces[1]


def apply(fw: Any, bw: Any, simulate: Callable[[Any, Any], int], names: list[str] | tuple[str, ...],
          budget: int | None = None) -> tuple[Recomputation, Any, Any]:
    """`names` (a search's Recomputation.names, for the same traces)
    recomputed as they are, without searching: two simulations, the peak
    without and with them. Returns what ``search`` returns; the FLOPs are
    counted as the search counts them (each candidate's own), ``steps``
    lists the names with the final peak, and ``fits`` is judged against
    `budget` (None: not judged)."""
    start = time.perf_counter()
    pool = candidates(fw)
    by_name = {c.name: c for c in pool}
    order = {c.name: i for i, c in enumerate(pool)}
    chosen = sorted(dict.fromkeys(names), key=lambda n: order.get(n, -1))
    traces = rewrite(fw, bw, chosen, by_name) if chosen else (fw, bw)
    before = simulate(fw, bw)
    after = simulate(*traces) if chosen else before
    return Recomputation(
        names=tuple(chosen), added_flops=sum(by_name[n].flops for n in chosen), peak_before=before,
        peak_after=after, budget=budget, fits=None if budget is None else after <= budget,
        steps=tuple((n, after, by_name[n].flops) for n in chosen), simulations=2 if chosen else 1,
        seconds=time.perf_counter() - start), traces[0], traces[1]


def recompute_transform(names: list[str] | tuple[str, ...]) -> Any:
    """A Thunder transform recomputing `names` in the backward:
    ``thunder.jit(model, transforms=[recompute_transform(plan.names)])``.
    Thunder hands ``transform_trace_post_optimization`` the forward, then the
    backward (thunder/__init__.py); the forward is kept to rewrite the
    backward with."""
    from thunder.core.transform_common import Transform

    class RecomputeTransform(Transform):
        def __init__(self) -> None:
            self.names = list(names)
            self.forward: Any = None

        def transform_trace_post_optimization(self, computation_trace: Any, **kwargs: Any) -> Any:
            if not self.names:
                return computation_trace
            if self.forward is None:
                self.forward = computation_trace
                self._kept, self._order = _plan(computation_trace, self.names)
                return rewrite_forward(computation_trace, self._kept)
            return rewrite_backward(self.forward, computation_trace, self._kept, self._order)

    return RecomputeTransform()

