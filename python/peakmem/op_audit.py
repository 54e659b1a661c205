"""The op audit: what each op call of a trace allocates, measured, against
what the runtime model says it allocates.

``peakmem.measure`` measures a whole trace. The audit splits that
measurement by op call: it runs the trace with every callee the trace's code
looks up (``torch.convolution``, ``shallow_copy``, ``torch.nn.functional.linear``)
wrapped in a ``record_function`` range, so that the profiler puts each
allocation under the call that made it, including the 0-d tensors the Python
binding makes for scalar arguments before dispatch. For each call it reports

    net    bytes allocated minus bytes freed inside the call (its outputs,
           less any input it frees), and
    rise   the highest the allocated bytes climb inside the call above the
           bytes at its start (outputs plus everything the kernel allocates
           and frees before it returns: its scratch).

The runtime model's report gives the same two numbers per statement
(``delta_bytes``, and ``peak_bytes`` minus the bytes at the statement's
start). A call is exact when both agree. Statements that run no callee
(``del``, ``return``, unpacking) are not calls; the model must give them no
allocation (a difference there is reported as a mismatch of its own).

``audit_trace`` audits one trace; ``audit_grid`` traces single-op programs
over shapes, dtypes, operand layouts (contiguous, transposed, expanded,
sliced) and thread counts and audits each. ``scripts/audit_ops.py`` runs
both over the corpus, the model zoo and the grid and writes the table of
docs/op-audit.md.
"""

from __future__ import annotations

import gc
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

_CALL = "peakmem.call:"


@dataclass(frozen=True)
class CallAudit:
    """One op call: the measured and the predicted (net, rise) bytes."""

    op: str  # the statement's op (Thunder's symbol name, as the report names it)
    line: int  # the statement's line in the printed trace
    source: str  # the statement
    measured: tuple[int, int]
    predicted: tuple[int, int]

    @property
    def exact(self) -> bool:
        return self.measured == self.predicted


@dataclass
class TraceAudit:
    calls: list[CallAudit] = field(default_factory=list)
    # Statements that ran no callee but to which the model gives an
    # allocation (frees at `del` are expected: they happen outside calls).
    unattributed: list[CallAudit] = field(default_factory=list)


class _Recorder:
    """A callee of the trace's code, wrapped: modules and classes by
    attribute (``torch.nn.functional.linear`` is looked up through three),
    callables in a ``record_function`` range named by their dotted path;
    classes are constructed unrecorded (``torch.device("cpu")`` is an
    argument, not a statement)."""

    def __init__(self, obj: Any, path: str) -> None:
        self._obj = obj
        self._path = path

    def __getattr__(self, name: str) -> Any:
        return _wrap(getattr(self._obj, name), f"{self._path}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from torch.profiler import record_function

        if isinstance(self._obj, type):  # torch.device("cpu") in an argument: no op
            return self._obj(*args, **kwargs)
        with record_function(_CALL + self._path):
            return self._obj(*args, **kwargs)


def _wrap(obj: Any, path: str) -> Any:
    if isinstance(obj, (types.ModuleType, type)) or callable(obj):
        return _Recorder(obj, path)
    return obj


def _instrumented(trace: Any) -> Callable:
    import inspect

    fn = trace.python_callable()
    inner = inspect.unwrap(fn)  # under Thunder's no_grad / no_autocast decorators
    g = inner.__globals__
    for name, obj in list(g.items()):
        if name.startswith("__") or name == inner.__name__:
            continue
        if isinstance(obj, types.ModuleType) or callable(obj):
            g[name] = _wrap(obj, name)
    return fn


def _calls_of(prof: Any) -> list[tuple[str, list[int]]]:
    """(callee path, signed allocation sizes in order) per recorded call."""
    from torch._C._profiler import _EventType

    calls: list[tuple[int, str, list[tuple[int, int, int]]]] = []

    def collect(node: Any, into: list) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if n.tag == _EventType.Allocation:
                f = n.extra_fields
                if f.device.type == "cpu":
                    into.append((n.start_time_ns, f.ptr, f.alloc_size))
                continue
            stack.extend(n.children)

    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag != _EventType.Allocation and node.name.startswith(_CALL):
            events: list = []
            collect(node, events)
            calls.append((node.start_time_ns, node.name[len(_CALL):], sorted(events, key=lambda e: e[0])))
            continue
        if node.tag != _EventType.Allocation:
            stack.extend(node.children)
    calls.sort(key=lambda c: c[0])
    return [(path, [size for _, _, size in events]) for _, path, events in calls]


def _net_and_rise(sizes: Iterable[int]) -> tuple[int, int]:
    total = rise = 0
    for s in sizes:
        total += s
        rise = max(rise, total)
    return total, rise


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def audit_trace(trace: Any, *, seed: int = 0) -> TraceAudit:
    """Measures each op call of `trace` on the CPU (fresh inputs, the
    calling convention ``peakmem.measure`` infers) and pairs it with the
    runtime model's statement."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import peakmem

    from .measure import _InputMaker, _make_call_args, detect_convention

    report = peakmem.analyze(trace, model="runtime")
    fn = _instrumented(trace)
    maker = _InputMaker(torch.device("cpu"), seed, trace)
    convention = detect_convention(trace)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            args, kwargs = _make_call_args(trace, maker, convention, None, None)
            with torch.no_grad():
                result = fn(*args, **kwargs)
        calls = _calls_of(prof)
        del result, args, kwargs
    finally:
        if was_enabled:
            gc.enable()

    audit = TraceAudit()
    steps = list(report.steps)
    i = 0
    for path, sizes in calls:
        # The statement this call ran: the next one whose op the callee names.
        while i < len(steps) and _last(steps[i].op) != _last(path):
            s = steps[i]
            predicted = (s.delta_bytes, s.peak_bytes - (s.live_bytes - s.delta_bytes))
            if predicted[1] > 0:
                audit.unattributed.append(CallAudit(s.op, s.line, s.source, (0, 0), predicted))
            i += 1
        if i == len(steps):
            raise RuntimeError(f"the trace ran {path}, which no statement of the report names")
        s = steps[i]
        predicted = (s.delta_bytes, s.peak_bytes - (s.live_bytes - s.delta_bytes))
        audit.calls.append(CallAudit(s.op, s.line, s.source, _net_and_rise(sizes), predicted))
        i += 1
    return audit


# ---------------------------------------------------------------------------
# Single-op programs over a grid

# How an operand is laid out before the op reads it: made inside the traced
# program from a contiguous input, so that the trace (and the model) sees
# the layout. `{x}` is the input's name; each form keeps the operand's shape
# (the input is made with the shape the form needs).
LAYOUTS = {
    "contiguous": ("{x}", lambda shape: shape),
    "transposed": ("{x}.transpose(-1, -2)", lambda shape: shape[:-2] + (shape[-1], shape[-2])),
    "expanded": ("{x}.expand({shape})", lambda shape: shape[:-2] + (1, shape[-1])),
    "sliced": ("{x}[..., 1:]", lambda shape: shape[:-1] + (shape[-1] + 1,)),
}


@dataclass(frozen=True)
class OpCase:
    """One op of the grid: `expr` is the op applied to operands `a`, `b`, ...
    (each laid out by the case's layout when `float` operands, made as given
    otherwise); `operands` gives each operand's kind: "float" (the case's
    shape, dtype and layout; requires grad), "float-any" (the case's shape
    and dtype, contiguous), "index:N" (int64 indices below N, shape of the
    case's shape with the last dimension 1) or a literal Python expression
    building it."""

    op: str
    expr: str
    operands: tuple[str, ...] = ("float",)
    backward: bool = True
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    layouts: tuple[str, ...] = tuple(LAYOUTS)


@dataclass(frozen=True)
class GridResult:
    op: str
    case: str  # shape, dtype, layout, threads
    kind: str  # "fw" or "bw"
    audit: TraceAudit | None
    error: str = ""

    @property
    def exact(self) -> bool:
        return self.audit is not None and not self.error and all(c.exact for c in self.audit.calls) and not self.audit.unattributed


def program_source(case: OpCase, layout: str, shape: tuple[int, ...]) -> str:
    """The program `prog(x0, x1, ...)` that lays out the operands and applies the op."""
    form, _ = LAYOUTS[layout]
    lines = []
    params = []
    for i, kind in enumerate(case.operands):
        name = chr(ord("a") + i)
        params.append(f"x{i}")
        if kind == "float":
            lines.append(f"{name} = {form.format(x=f'x{i}', shape=tuple(shape))}")
        else:
            lines.append(f"{name} = x{i}")
    body = "\n".join(f"    {line}" for line in lines + [f"return {case.expr}"])
    return f"import torch\nimport torch.nn.functional as F\n\ndef prog({', '.join(params)}):\n{body}\n"


def _operand(kind: str, shape: tuple[int, ...], dtype: Any, layout: str, gen: Any) -> Any:
    import torch

    if kind == "float":
        made = LAYOUTS[layout][1](tuple(shape))
        return torch.randn(made, generator=gen).to(dtype).requires_grad_(True)
    if kind == "float-any":
        return torch.randn(tuple(shape), generator=gen).to(dtype).requires_grad_(True)
    if kind.startswith("index:"):
        bound = int(kind.split(":")[1])
        return torch.randint(0, bound, tuple(shape[:-1]) + (1,), generator=gen)
    return eval(kind, {"torch": torch, "shape": tuple(shape), "gen": gen})


def audit_program(case: OpCase, shape: tuple[int, ...], dtype: str, layout: str, threads: int) -> list[GridResult]:
    """Traces one grid program with thunder.jit (and its backward, on the sum
    of its differentiable outputs) and audits each trace."""
    import torch

    from ._thunder_compat import import_thunder

    thunder = import_thunder()
    label = f"{list(shape)} {dtype} {layout} threads={threads}"
    source = program_source(case, layout, shape)
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<audit {case.op}>", "exec"), namespace)
    gen = torch.Generator().manual_seed(0)
    torch_dtype = getattr(torch, dtype)
    args = [_operand(k, shape, torch_dtype, layout, gen) for k in case.operands]
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    results = []
    try:
        jf = thunder.jit(namespace["prog"])
        out = jf(*args)
        traces = [("fw", thunder.last_traces(jf)[-1])]
        outs = out if isinstance(out, tuple) else (out,)
        diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        if case.backward and diff:
            sum(o.float().sum() for o in diff).backward()
            bw = thunder.last_backward_traces(jf)
            if bw:
                traces.append(("bw", bw[-1]))
        for kind, trc in traces:
            results.append(GridResult(case.op, label, kind, audit_trace(trc)))
    except Exception as e:  # a case Thunder or the kernel rejects: reported, not counted
        results.append(GridResult(case.op, label, "fw", None, f"{type(e).__name__}: {e}"[:300]))
    finally:
        torch.set_num_threads(previous)
    return results
