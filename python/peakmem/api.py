"""peakmem.analyze: one entry point for every kind of trace input."""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

from ._core import Report, analyze_file, analyze_live, analyze_text, trace_to_json
from ._deprecation import renamed

# The values analyze's (and plan's, estimate_step's) string options take.
MemoryModel = Literal["runtime", "thunder"]
Model = MemoryModel  # its name for the deprecated model= of analyze; goes with it
Convention = Literal["auto", "forward", "backward", "plain"]
Allocator = Literal["requested", "cuda-caching"]


def _is_trace_ctx(obj: Any) -> bool:
    return hasattr(obj, "bound_symbols") and hasattr(obj, "siginfo") and hasattr(obj, "args")


def _torch_threads(given: int | None) -> int:
    """The intra-op thread count the runtime model sizes per-thread kernel
    scratch with: `given`, else the process's ``torch.get_num_threads()``
    when torch is loaded, else 0 (the C++ default: this machine's CPUs)."""
    if given is not None:
        return given
    return sys.modules["torch"].get_num_threads() if "torch" in sys.modules else 0


def to_json_export(trace: Any) -> str:
    """Exports a Thunder TraceCtx to peakmem's JSON trace form (docs/trace-json.md).

    The trace is read by the same live reader ``analyze`` uses (its exact
    form: every proxy's ``type_string()``, every constant's ``repr()``) and
    written by the C++ JSON writer; reading the result back gives the same
    analysis as the TraceCtx itself.
    """
    if not _is_trace_ctx(trace):
        raise TypeError(f"expected a Thunder TraceCtx, got {type(trace).__name__}")
    return trace_to_json(trace)


# Long: its docstring documents every option where help() shows it; the body is twenty lines.
def analyze(
    trace: Any,
    *,
    memory_model: MemoryModel | None = None,
    convention: Convention = "auto",
    scratch: bool = True,
    allocator: Allocator = "requested",
    alloc_conf: str | None = None,
    device_memory: str | None = None,
    events: bool = True,
    rank: int = 0,
    world_size: int = 0,
    torch_threads: int | None = None,
    dtensor_layout: str = "",
    model: MemoryModel | None = None,
    device: str = "auto",
) -> Report:
    """Analyses a trace with one memory model and returns a Report.

    `memory_model` is ``"runtime"`` (None, the default: what PyTorch really
    allocates) or ``"thunder"`` (Thunder's own ``get_alloc_memory``,
    reproduced exactly); ``model=`` is its old spelling, which warns
    (``model`` is the ``nn.Module`` in the step's functions). For the runtime
    model, `convention` says how the caller passes the arguments (``"auto"``
    infers it: a Thunder ``backward_fn(saved_for_backward, cotangents)`` is
    called with lists, anything else is a forward whose caller holds every
    argument; or ``"forward"``, ``"backward"``, ``"plain"``) and `scratch`
    whether op scratch memory counts in ``peak_bytes``.

    `allocator` prices the storages: ``"requested"`` (their own bytes, what
    ``peak_bytes`` always is) or ``"cuda-caching"``, which also runs
    PyTorch's CUDA caching allocator over them and fills ``report.allocator``
    (allocated and reserved bytes at the peak and the end, segments, out of
    memory). With it, `alloc_conf` is ``PYTORCH_CUDA_ALLOC_CONF``'s syntax
    (``None``: that environment variable's value) and `device_memory` the
    device's capacity (``"80GiB"``; ``None``: unbounded), so that the report
    says whether the run fits and where it would run out of memory.

    `events` (default True) keeps the allocation event stream in the report:
    what ``report.write("html" | "snapshot" | "chrome-trace")``,
    ``report.write("text", at="peak")``, ``report.plot()``,
    ``report.live_by_category()`` and the report's HTML view in Jupyter read
    (16 bytes an event, 32 a storage; ``events=False`` for a run that only
    needs the numbers).

    `rank` (default 0): the process of a distributed program the report is
    for, where the trace alone does not say: a DTensor value's type gives
    its global shape, mesh and placements, and its bytes are the shard this
    rank holds (uneven shards differ between ranks). `world_size` (0: as the
    trace says) gives the world size where the trace does not say it (a
    collective's shapes or a DTensor mesh do); a trace that says another
    raises ``peakmem.TraceError``. ``report.distributed`` tells both.
    `dtensor_layout`: the mesh and placements of DTensor types that print
    none (older printers' ``DTensor cuda:0 f32[16, 16]``), as the current
    printer writes them after the shape (``" mesh=DeviceMesh((4,), 'cuda',
    stride=(1,)), placements=(Shard(dim=0),)"``); every such value is read
    so. Empty (the default): such a type is an error naming the value.

    `torch_threads`: the intra-op threads PyTorch runs the trace's CPU
    kernels with (some kernels' scratch is per thread: a strided 1x1
    convolution's). ``None``: this process's ``torch.get_num_threads()``
    when torch is imported, else this machine's CPUs (PyTorch's default).

    `device`: whose kernels run the trace, for the runtime model's op
    scratch: ``"auto"`` (the default: each tensor's own device as the trace
    names it, ``meta`` standing for the CPU), ``"cpu"``, or a CUDA GPU
    (``"cuda"``, ``"cuda:h100"``, ``"cuda:h200"``, ``"cuda:a100"``): a CPU
    trace predicted for the GPU (CUDA's elementwise kernels wrap and cast
    nothing on the device; rules CUDA's kernels are not known for are
    named in ``report.diagnostics``). ValueError for another name.

    `trace` may be:
      - a Thunder ``TraceCtx`` (read directly: bound symbols, proxies,
        collection contents; not through its printed text);
      - printed trace text or peakmem's JSON export, as a ``str`` containing a
        newline;
      - a path (``str`` or ``os.PathLike``) to a file holding either.

    Raises ``peakmem.TraceError`` (a ``ValueError``) for malformed input,
    ``ValueError`` for an unknown memory model, ``FileNotFoundError`` for a
    missing file and ``TypeError`` for an object that is none of the above,
    or for both `memory_model` and `model`.
    """
    memory_model = renamed("analyze", "model", model, "memory_model", memory_model) or "runtime"
    options = (memory_model, convention, scratch, allocator, alloc_conf, device_memory)
    rank_and_threads = {"rank": rank, "world_size": world_size, "torch_threads": _torch_threads(torch_threads),
                        "dtensor_layout": dtensor_layout, "device": device}
    if _is_trace_ctx(trace):
        return analyze_live(trace, *options, events=events, **rank_and_threads)
    if isinstance(trace, os.PathLike):
        trace = os.fspath(trace)
    if isinstance(trace, bytes):
        raise TypeError("pass trace text as str, not bytes")
    if isinstance(trace, str):
        if "\n" in trace:
            return analyze_text(trace, "<string>", *options, events=events, **rank_and_threads)
        if not os.path.exists(trace):
            raise FileNotFoundError(f"no such trace file: {trace!r}")
        return analyze_file(trace, *options, events=events, **rank_and_threads)
    raise TypeError(
        "peakmem.analyze expects a Thunder TraceCtx, trace text or a path, "
        f"got {type(trace).__name__}"
    )
