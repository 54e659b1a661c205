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
    runtime model's statement, predicted for the rank this process is when
    torch.distributed is initialized (a DTensor's shard is that rank's)."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from .api import analyze
    from .measure import _InputMaker, _make_call_args, detect_convention

    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    report = analyze(trace, memory_model="runtime", rank=rank)
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
    statements = list(report.statements)
    i = 0
    for path, sizes in calls:
        # The statement this call ran: the next one whose op the callee names.
        while i < len(statements) and _last(statements[i].op) != _last(path):
            s = statements[i]
            predicted = (s.delta_bytes, s.peak_bytes - (s.live_bytes - s.delta_bytes))
            if predicted[1] > 0:
                audit.unattributed.append(CallAudit(s.op, s.line, s.source, (0, 0), predicted))
            i += 1
        if i == len(statements):
            raise RuntimeError(f"the trace ran {path}, which no statement of the report names")
        s = statements[i]
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
    case's shape with the last dimension 1), "float-any-t" (the case's shape
    reversed: the other factor of a product) or a Python expression
    building it (`gen`: the generator, `dtype`: the case's dtype)."""

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
    if kind == "float-any-t":  # the other operand of a product: [cols, rows]
        return torch.randn(tuple(reversed(shape)), generator=gen).to(dtype).requires_grad_(True)
    if kind.startswith("index:"):
        bound = int(kind.split(":")[1])
        return torch.randint(0, bound, tuple(shape[:-1]) + (1,), generator=gen)
    return eval(kind, {"torch": torch, "shape": tuple(shape), "gen": gen, "dtype": dtype})


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


def _randn(sizes: str) -> str:
    """An operand expression: a fresh float tensor of `sizes` (which may use
    the case's `shape`) in the case's dtype, requiring grad."""
    return f"torch.randn({sizes}, generator=gen).to(dtype).requires_grad_(True)"


# The grid's vocabulary: the ops the model zoo and the corpus call, each
# applied alone. Operands are [rows, cols] unless a case says otherwise;
# `a` is laid out by the case's layout.
GRID: tuple[OpCase, ...] = (
    OpCase("add", "a + b", ("float", "float-any")),
    OpCase("add scalar", "a + 2.0"),
    OpCase("mul", "a * b", ("float", "float-any")),
    OpCase("mul scalar", "a * 0.5"),
    OpCase("sub", "a - b", ("float", "float-any")),
    OpCase("div", "a / b", ("float", "float-any")),
    OpCase("neg", "-a"),
    OpCase("exp", "torch.exp(a)"),
    OpCase("tanh", "torch.tanh(a)"),
    OpCase("sigmoid", "torch.sigmoid(a)"),
    OpCase("relu", "F.relu(a)"),
    OpCase("gelu", "F.gelu(a)"),
    OpCase("gelu tanh", "F.gelu(a, approximate='tanh')"),
    OpCase("silu", "F.silu(a)"),
    OpCase("rsqrt", "torch.rsqrt(a.abs() + 1)"),
    OpCase("pow", "a.pow(2)"),
    OpCase("erf", "torch.erf(a)"),
    OpCase("where", "torch.where(a > 0, a, 0.0)"),
    OpCase("masked_fill", "a.masked_fill(a > 0, -1.0)"),
    OpCase("clamp", "a.clamp(-0.5, 0.5)"),
    OpCase("softmax", "F.softmax(a, dim=-1)"),
    OpCase("log_softmax", "F.log_softmax(a, dim=-1)"),
    OpCase("sum", "a.sum(-1)"),
    OpCase("sum all", "a.sum()"),
    OpCase("sum bool", "(a > 0).sum()", backward=False),
    OpCase("mean", "a.mean(-1, keepdim=True)"),
    OpCase("amax", "a.amax(-1)"),
    OpCase("var_mean", "torch.var_mean(a, -1)[0]"),
    OpCase("cumsum", "a.cumsum(-1)"),
    OpCase("matmul 2-d", "a @ b", ("float", "float-any-t")),
    OpCase("matmul batched", "a.unsqueeze(0).expand(3, -1, -1) @ b", ("float", "float-any-t")),
    OpCase("linear", "F.linear(a, b)", ("float", "float-any")),
    # 1-D operands: a.unsqueeze(0).mm(b) and mv (b[:, 0] is a strided vector)
    OpCase("matmul vector @ matrix", "b[0] @ a", ("float", "float-any-t")),
    OpCase("matmul strided vector @ matrix", "b[:, 0] @ a.t()", ("float", "float-any-t")),
    OpCase("matmul matrix @ vector", "a @ b[:, 0]", ("float", "float-any-t")),
    OpCase("linear vector", "F.linear(b[:, 0], a)", ("float", "float-any-t")),
    OpCase("layer_norm", "F.layer_norm(a, a.shape[-1:])"),
    OpCase("rms norm", "a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6)"),
    OpCase("embedding", "F.embedding(b, a)", ("float-any", "index:8")),
    OpCase("cross_entropy", "F.cross_entropy(a, b.squeeze(-1))", ("float", "index:4")),
    OpCase("sdpa", "F.scaled_dot_product_attention(a.unsqueeze(0), a.unsqueeze(0), a.unsqueeze(0))"),
    OpCase("sdpa causal", "F.scaled_dot_product_attention(a.unsqueeze(0), a.unsqueeze(0), a.unsqueeze(0), is_causal=True)"),
    OpCase("cat", "torch.cat([a, a], 0)"),
    OpCase("stack", "torch.stack([a, a])"),
    OpCase("transpose", "a.transpose(0, 1) * 2"),
    OpCase("reshape", "a.reshape(-1) * 2"),
    OpCase("contiguous", "a.contiguous()"),
    OpCase("expand", "a.unsqueeze(0).expand(2, -1, -1) * 2"),
    OpCase("split", "torch.split(a, 2, -1)[0] * 2"),
    OpCase("chunk", "torch.chunk(a, 2, 0)[1] * 2"),
    OpCase("getitem", "a[:, None, 1:] * 2"),
    OpCase("to bfloat16", "a.to(torch.bfloat16)"),
    OpCase("to float64", "a.to(torch.float64)"),
    OpCase("topk", "torch.topk(a, 2, -1)[0]"),
    OpCase("sort", "torch.sort(a, -1)[0]"),
    OpCase("argsort", "a.argsort(0).float() + a", backward=False),
    OpCase("gather", "torch.gather(a, 1, b)", ("float-any", "index:4")),
    OpCase("take_along_dim", "torch.take_along_dim(a, b, 1)", ("float-any", "index:4")),
    OpCase("scatter_add", "torch.zeros_like(a).scatter_add(1, b, a[:, :1].expand(-1, 1).contiguous())", ("float-any", "index:4")),
    OpCase("index_select", "a.index_select(0, b.squeeze(-1))", ("float-any", "index:4")),
    OpCase("tril", "torch.tril(a)"),
    OpCase("repeat_interleave", "a.repeat_interleave(2, dim=0)"),
    OpCase("max_pool2d", "F.max_pool2d(a.reshape(1, 1, a.shape[0], a.shape[1]), 2)"),
    OpCase("adaptive_avg_pool2d", "F.adaptive_avg_pool2d(a.reshape(1, 1, a.shape[0], a.shape[1]), 1)"),
    OpCase("batch_norm", "F.batch_norm(a, None, None, training=True)"),
    # Convolutions in float32 (another dtype is diagnosed, not modelled):
    # ATen's native kernel (one image) and oneDNN's (blocked, flat and 1x1
    # kernels, with bias; the backward's weight gradients are dilated
    # convolutions), on images of the case's shape.
    OpCase("conv2d", "F.conv2d(a.reshape(1, 1, a.shape[0], a.shape[1]), b)",
           ("float", _randn("4, 1, 3, 3")), dtypes=("float32",)),
    OpCase("conv2d 3x3 blocked", "F.conv2d(a, b, padding=1)",
           (_randn("2, 12, *shape"), _randn("20, 12, 3, 3")), dtypes=("float32",), layouts=("contiguous",)),
    OpCase("conv2d 3x3 blocked, transposed image", "F.conv2d(a.transpose(-1, -2), b, padding=1)",
           (_randn("2, 12, *shape"), _randn("20, 12, 3, 3")), dtypes=("float32",), layouts=("contiguous",)),
    OpCase("conv2d 3x3 flat, strided", "F.conv2d(a, b, stride=2, padding=1)",
           (_randn("2, 3, *shape"), _randn("16, 3, 3, 3")), dtypes=("float32",), layouts=("contiguous",)),
    OpCase("conv2d 1x1", "F.conv2d(a, b)",
           (_randn("2, 16, *shape"), _randn("8, 16, 1, 1")), dtypes=("float32",), layouts=("contiguous",)),
    OpCase("conv2d 1x1 strided", "F.conv2d(a, b, stride=2)",
           (_randn("2, 12, *shape"), _randn("16, 12, 1, 1")), dtypes=("float32",), layouts=("contiguous",)),
    # (A dilated convolution's input gradient, as Thunder writes it, pads by
    # (k - 1) * dilation: oneDNN's GEMM path, diagnosed and not modelled.)
    OpCase("conv2d 3x3, bias", "F.conv2d(a, b, c, padding=1)",
           (_randn("4, 8, *shape"), _randn("8, 8, 3, 3"), _randn("8")), dtypes=("float32",),
           layouts=("contiguous",)),
)

# Shapes: (rows, cols); rows * cols even, cols >= 4 for the slicing cases.
SMALL_SHAPES = ((8, 6),)
FULL_SHAPES = ((8, 6), (64, 48))


# Ops whose kernels allocate memory the runtime model does not count yet,
# with why; the audit reports them and fails on any other inexact op.
# (Convolutions the runtime model does not cover, bf16 ones and those oneDNN
# runs as a GEMM, are diagnosed by the model; the grid holds the covered ones.)
KNOWN_GAPS: dict[str, str] = {}


@dataclass
class OpTally:
    rule: str | None
    trace_calls: int = 0
    trace_exact: int = 0
    grid_calls: int = 0
    grid_exact: int = 0
    first_miss: str = ""


def tally(audits: Iterable[tuple[str, str, TraceAudit]], grid: bool, into: dict[str, OpTally]) -> None:
    """Adds each call of each (where, kind, audit) to the op's tally."""
    from ._core import op_rule

    for where, kind, audit in audits:
        for c in audit.calls + audit.unattributed:
            t = into.setdefault(c.op, OpTally(op_rule(c.op)))
            if grid:
                t.grid_calls += 1
                t.grid_exact += c.exact
            else:
                t.trace_calls += 1
                t.trace_exact += c.exact
            if not c.exact and not t.first_miss:
                t.first_miss = (f"{where} {kind}: `{c.source}` measured (net, rise) {c.measured}, "
                                f"predicted {c.predicted}")
