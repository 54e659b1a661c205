"""Measures the memory a trace really uses: the ground truth for peakmem.

    m = peakmem.measure(trace)                 # CPU, via the PyTorch profiler
    m.peak_bytes, m.final_bytes, m.events

`trace` is a Thunder execution trace (a ``TraceCtx``), or any object with the
same duck type: ``python_callable()``, ``args``, ``kwargs`` and ``siginfo()``.
The harness creates real tensors for the trace's arguments, calls the trace's
Python callable once the way Thunder calls it, and reports what the allocator
saw, relative to a baseline taken just before the inputs were created. Every
byte count is *requested* bytes (exact tensor sizes, no allocator rounding);
on CUDA the caching allocator's ``allocated`` and ``reserved`` numbers are
reported as well.

What is measured
----------------
* The inputs are created *inside* the measured region, right after the
  baseline, and count in the peak and in the final bytes, as Thunder's
  estimate counts its ``argument x`` entries. (The profiler can only pair a
  free with an allocation it saw, see "Profiler quirks" below.)
* Calling convention, ``convention="forward"``: the caller holds every
  argument for the whole call and holds the returned value afterwards, so
  ``final_bytes`` = the arguments + whatever the result keeps alive.
  Containers are passed as the trace's arguments describe them (a list stays
  a list, a tuple a tuple).
* ``convention="backward"``: a Thunder backward ``backward_fn(saved_for_backward,
  cotangents)`` is called as ``ThunderFunction.backward`` calls it
  (thunder/executors/torch_autograd.py)::

      compiled_backward([saved_tensors_list, ctx.saved_other], cotangents_list)

  with ``saved_tensors_list`` a list, ``saved_other`` a tuple and the
  cotangents a list, and the caller holding no other reference to any saved
  tensor or cotangent. The trace empties the lists
  (``clear_mutable_collection``), so saved tensors die as their last use is
  deleted. The convention is detected from the signature's parameter names
  and can be forced with ``convention=``.
* The callable runs under ``torch.no_grad()``.
* Inputs: a DTensor proxy (a rank of a distributed program under an
  initialised process group) becomes a DTensor of its global shape and
  placements over its mesh, built from this rank's local shard, so only
  that shard is allocated.
* Inputs: a tensor proxy becomes a contiguous tensor of its shape and dtype
  on ``device``; floating and complex tensors hold random values from a
  generator seeded with ``seed``, integer tensors hold zeros (so index
  operations stay in range) and bool tensors ones. Number proxies take their
  value. ``inputs=`` replaces this: a sequence of positional arguments, or a
  callable returning one (called inside the measured region; it must keep no
  reference to what it returns). Tensors in a sequence given directly were
  allocated before the region; they are copied inside it (same shape, dtype
  and strides), and the copies are what is passed and measured.
  ``kwinputs=`` does the same for keyword arguments.

CPU measurement and profiler quirks
-----------------------------------
``torch.profiler.profile(activities=[CPU], profile_memory=True)`` records one
allocation event per ``c10`` CPU allocation and free, carrying the pointer and
the signed size. We walk these events ourselves, in time order, and keep our
own running sum. Subtleties, each checked by tests/python/test_measure.py:

1. The CPU allocator's size table (``ProfiledCPUMemoryReporter``) lives for
   the whole process and is only updated while memory profiling is on.
   Consequences: (a) a free of a block allocated while profiling was *off*
   is not reported at all ("Memory block of unknown size was allocated before
   the profiling started"); (b) a free of a block allocated during an
   *earlier* profiling session *is* reported, as a negative event inside this
   one (and a stale entry can even report a wrong size); (c) the
   ``total_allocated`` / "Total Allocated" field is that process-wide running
   total, not a per-session one. So we never read ``total_allocated``, and we
   count a free only if its pointer was allocated earlier in *this* session;
   frees of foreign blocks are left out of every number and summed in
   ``ignored_free_bytes`` (0 in a clean measurement).
2. Events come from ``prof.profiler.kineto_results.experimental_event_tree()``
   (allocation nodes carry ``ptr`` and ``alloc_size``; the flat
   ``kineto_results.events()`` list has the same events without pointers).
   Each allocation appears exactly once in the tree, as a leaf under the op
   that made it (or under no op: the 8-byte tensor that wraps a Python scalar
   argument such as the ``2.0`` in ``x * 2.0`` is allocated by the Python
   binding before dispatch). We sort the leaves by start time with a stable
   sort: the profiler already returns records sorted that way (a stable sort
   over each thread's records in recording order), so equal timestamps keep
   their recording order.
3. The profiler itself allocates no c10 memory while it records (an empty
   session has no allocation events, and ``record_function`` ranges allocate
   none), so only the inputs and the trace are counted. We wrap input
   creation in a ``record_function("peakmem.inputs")`` range to separate the
   input bytes from the rest. The inputs are what exists when the call
   starts: a block allocated *and* freed while they are made (a temporary of
   an ``inputs=`` callable) is dropped from every number and from
   ``events``. The default inputs make none (one allocation per tensor).
4. Only allocations reported on the calling thread's profiler are seen. Small
   tensors never use the intra-op thread pool's scratch paths, but a large
   reduction on many threads allocates a per-thread buffer
   (``torch.get_num_threads()`` rows), so CPU numbers for big tensors depend on
   the thread count; record it with the measurement.
5. Zero-byte allocations are not reported (nor do they cost anything).
6. Python's cyclic garbage collector is run before and disabled during the
   measurement, so no unrelated object dies inside the region.

CUDA
----
For ``device="cuda..."`` (only when CUDA is available): synchronize,
``torch.cuda.reset_peak_memory_stats()``, read the baseline
``requested_bytes``/``allocated_bytes``/``reserved_bytes`` ``.all.current``
from ``torch.cuda.memory_stats()``, create the inputs, synchronize, reset
the peaks again (so a temporary of input creation is forgotten, as on CPU),
call, synchronize and read ``.all.peak`` and ``.all.current``.
``peak_bytes``/``final_bytes`` are the requested numbers. Note that cuBLAS
allocates its per-handle workspace through the caching allocator on the
first matmul of a stream and keeps it, so a first measurement includes it in
``final_bytes``.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Measurement", "call", "detect_convention", "make_inputs", "measure"]

_INPUTS_RANGE = "peakmem.inputs"
_CALL_RANGE = "peakmem.call"
_WARM_UP_RANGE = "peakmem.warm_up"


@dataclass(frozen=True)
class Measurement:
    """What one call of a trace really allocated, in bytes, relative to the
    baseline taken just before its inputs were created.

    Attributes:
        device: the device measured (``"cpu"``, ``"cuda:0"``, ...).
        convention: ``"forward"`` or ``"backward"`` (see the module docstring).
        peak_bytes: the highest requested-bytes total reached, inputs included.
        final_bytes: requested bytes still held when the call has returned,
            with the caller still holding the result (and, for the forward
            convention, the arguments).
        input_bytes: requested bytes of the inputs as created (before the call).
        events: CPU only: the signed size of every allocation (+) and free (-)
            counted, in time order, inputs first. ``sum(events) ==
            final_bytes`` and the maximum prefix sum is ``peak_bytes``.
        ignored_free_bytes: CPU only: bytes of frees the profiler reported for
            blocks allocated before the measured region (left out; 0 normally).
        allocated_peak_bytes, allocated_final_bytes: CUDA only: the caching
            allocator's allocated bytes (rounded to its block sizes).
        reserved_peak_bytes, reserved_final_bytes: CUDA only: bytes of the
            segments the caching allocator holds from the driver.
    """

    device: str
    convention: str
    peak_bytes: int
    final_bytes: int
    input_bytes: int
    events: tuple[int, ...] | None = None
    ignored_free_bytes: int | None = None
    allocated_peak_bytes: int | None = None
    allocated_final_bytes: int | None = None
    reserved_peak_bytes: int | None = None
    reserved_final_bytes: int | None = None

    def summary(self) -> dict[str, Any]:
        """Every field as plain data (``events`` a list): what ``to_json`` writes."""
        out = dataclasses.asdict(self)
        out["events"] = None if self.events is None else list(self.events)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """``summary()`` as JSON (peakmem.summary_writing)."""
        from .summary_writing import summary_json

        return summary_json(self, indent)

    def text(self) -> str:
        """The figures in a few lines: ``write("text")``'s."""
        lines = [f"measured on {self.device} ({self.convention} convention): peak {self.peak_bytes:,} bytes, "
                 f"final {self.final_bytes:,} bytes, inputs {self.input_bytes:,} bytes"]
        if self.allocated_peak_bytes is not None:
            lines.append(f"  allocator: allocated peak {self.allocated_peak_bytes:,}, final "
                         f"{self.allocated_final_bytes:,}; reserved peak {self.reserved_peak_bytes:,}, final "
                         f"{self.reserved_final_bytes:,} bytes")
        if self.ignored_free_bytes:
            lines.append(f"  {self.ignored_free_bytes:,} bytes freed that were allocated before the region "
                         "(left out)")
        return "\n".join(lines)

    def write(self, format: str = "text", path: str | os.PathLike | None = None, indent: int | None = 2) -> str:
        """The measurement as ``"text"`` (``text()``) or ``"json"``
        (``to_json``), as ``peakmem.Report.write`` names them; written to
        `path` too when given."""
        from .summary_writing import write_summary

        return write_summary(self, format, indent, path)


# ---------------------------------------------------------------------------
# Calling convention


def _param_names(trace: Any) -> list[str]:
    si = trace.siginfo()
    names = [a[0] if isinstance(a, tuple) else a for a in si.args]
    if getattr(si, "varargs", None) is not None:
        names.append(si.varargs[0])
    return list(names)


def detect_convention(trace: Any) -> str:
    """``"backward"`` for a Thunder backward trace (parameters named
    ``saved_for_backward, cotangents``), else ``"forward"``."""
    return "backward" if _param_names(trace) == ["saved_for_backward", "cotangents"] else "forward"


# ---------------------------------------------------------------------------
# Inputs


def _int64_index_arguments(trace: Any) -> set:
    """Names of the trace's arguments that are max-pool indices (made int64,
    all zeros: index 0 is in range for every pooling window's plane). Which
    argument of which op is one, the op registry says
    (OpInfo::int64_indices_argument): ATen's forward made it int64, though
    Thunder types it like the pooled input."""
    from ._core import op_int64_indices_argument

    names = set()
    for bsym in getattr(trace, "bound_symbols", ()) if trace is not None else ():
        at = op_int64_indices_argument(bsym.sym.name)
        if 0 <= at < len(bsym.args) and hasattr(bsym.args[at], "name"):
            names.add(bsym.args[at].name)
    return names


def local_shard(t: Any) -> Any:
    """What this rank allocates for `t`: a DTensor's local shard, else `t`."""
    local = getattr(t, "_local_tensor", None)
    return t if local is None else local


class _InputMaker:
    """Turns argument proxies (or given values) into fresh values on `device`."""

    def __init__(self, device: Any, seed: int, trace: Any = None) -> None:
        import torch

        self.torch = torch
        self.int64_names = _int64_index_arguments(trace)
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        proxies = sys.modules.get("thunder.core.proxies")
        self.TensorProxy = getattr(proxies, "TensorProxy", None)
        self.Proxy = getattr(proxies, "Proxy", None)
        dtypes = sys.modules.get("thunder.core.dtypes")
        self.to_torch_dtype = getattr(dtypes, "to_torch_dtype", None)

    def tensor_from_proxy(self, p: Any) -> Any:
        if type(p).__name__ == "DTensorProxy":
            return self.dtensor_from_proxy(p)
        return self.dense(p, tuple(int(s) for s in p.shape))

    def dtensor_from_proxy(self, p: Any) -> Any:
        """A DTensor of the proxy's global shape, mesh and placements, made
        from this rank's local shard (torch's own rule for its shape) and the
        traced global strides: what this rank holds, and only that."""
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

        spec = p.spec._o
        shape = tuple(int(s) for s in p.shape)
        local, _ = compute_local_shape_and_global_offset(shape, spec.mesh, spec.placements)
        return DTensor.from_local(self.dense(p, tuple(local)), spec.mesh, spec.placements,
                                  shape=self.torch.Size(shape), stride=tuple(spec.tensor_meta.stride))

    def dense(self, p: Any, shape: tuple) -> Any:
        torch = self.torch
        dtype = torch.int64 if p.name in self.int64_names else self.to_torch_dtype(p.dtype)
        pdev = getattr(p, "device", None)
        pdev_type = getattr(pdev, "type", None)
        if pdev_type is not None and getattr(pdev_type, "name", str(pdev_type)).lower() != self.device.type:
            raise ValueError(
                f"argument {p.name} lives on {pdev.device_str()} but the measurement is on "
                f"{self.device}; make the trace on the device you measure"
            )
        # One allocation each, no temporaries (tests/python/test_measure.py).
        if dtype.is_floating_point or dtype.is_complex:
            t = torch.empty(shape, dtype=dtype, device=self.device)
            try:
                t.normal_(generator=self.generator)
            except (RuntimeError, NotImplementedError):  # float8 and friends
                t.fill_(1)
            return t
        if dtype == torch.bool:
            return torch.ones(shape, dtype=dtype, device=self.device)
        return torch.zeros(shape, dtype=dtype, device=self.device)

    def from_proxies(self, x: Any) -> Any:
        if self.TensorProxy is not None and isinstance(x, self.TensorProxy):
            return self.tensor_from_proxy(x)
        if self.Proxy is not None and isinstance(x, self.Proxy):
            if hasattr(x, "value"):
                return x.value
            raise TypeError(f"cannot make an input for argument {x.name} of type {type(x).__name__}")
        if isinstance(x, list):
            return [self.from_proxies(i) for i in x]
        if isinstance(x, tuple):
            return tuple(self.from_proxies(i) for i in x)
        if isinstance(x, dict):
            return {k: self.from_proxies(v) for k, v in x.items()}
        return x

    def copy_given(self, x: Any, memo: dict | None = None, whole_storages: bool = False) -> Any:
        """Copies of the tensors in `x`, each dense; a tensor given twice is
        copied once (`memo`: what is copied so far). With `whole_storages`
        they hold what the originals do, as a training step's inputs are
        counted: each distinct storage is copied once, whole (a view of a
        larger tensor keeps its storage's size, offset and strides; two
        views of one storage stay views of one copy). A DTensor's local
        shard is copied into a DTensor of the same mesh and placements."""
        torch = self.torch
        memo = {} if memo is None else memo
        if isinstance(x, torch.Tensor):
            if id(x) not in memo:
                src = local_shard(x).detach()
                if whole_storages:
                    storage = src.untyped_storage()
                    key = ("storage", storage.data_ptr(), src.dtype)
                    if key not in memo:  # one allocation, the storage's size
                        memo[key] = torch.empty(storage.nbytes() // src.element_size(), dtype=src.dtype,
                                                device=self.device)
                    t = memo[key].as_strided(src.shape, src.stride(), src.storage_offset())
                else:
                    t = torch.empty_strided(src.shape, src.stride(), dtype=src.dtype, device=self.device)
                t.copy_(src)
                if local_shard(x) is not x:  # a DTensor
                    from torch.distributed.tensor import DTensor

                    t = DTensor.from_local(t, x.device_mesh, x.placements, shape=x.shape, stride=x.stride())
                memo[id(x)] = t
            return memo[id(x)]
        if isinstance(x, list):
            return [self.copy_given(i, memo, whole_storages) for i in x]
        if isinstance(x, tuple):
            return tuple(self.copy_given(i, memo, whole_storages) for i in x)
        if isinstance(x, dict):
            return {k: self.copy_given(v, memo, whole_storages) for k, v in x.items()}
        return x


def make_inputs(trace: Any, *, device: str = "cpu", seed: int = 0) -> tuple[tuple, dict]:
    """Fresh ``(args, kwargs)`` for `trace`, made from its argument proxies as
    ``measure`` makes them (containers keep the proxies' types). Useful to
    build a variant for ``inputs=``: ``inputs=lambda: tweak(make_inputs(trc)[0])``."""
    import torch

    maker = _InputMaker(torch.device(device), seed, trace)
    return maker.from_proxies(tuple(trace.args)), maker.from_proxies(dict(getattr(trace, "kwargs", None) or {}))


def call(trace: Any, *, device: str = "cpu", seed: int = 0, convention: str | None = None) -> Any:
    """Runs `trace` once, under ``torch.no_grad()``, on the inputs ``measure``
    would make for it with `seed` (the same values for the same trace
    signature and seed), and returns what it returns: what a check that two
    orders of one program compute the same outputs compares
    (``peakmem.plan``)."""
    import torch

    if convention is None:
        convention = detect_convention(trace)
    maker = _InputMaker(torch.device(device), seed, trace)
    args, kwargs = _make_call_args(trace, maker, convention, None, None)
    with torch.no_grad():
        return trace.python_callable()(*args, **kwargs)


def _make_call_args(trace: Any, maker: _InputMaker, convention: str, inputs: Any, kwinputs: Any):
    """Builds (args, kwargs). Returns fresh containers whose only owners are the
    returned objects: no local here outlives the call."""
    if inputs is None:
        args = maker.from_proxies(tuple(trace.args))
    elif callable(inputs):
        args = inputs()
    else:
        args = maker.copy_given(inputs)
    if kwinputs is None:
        kwargs = maker.from_proxies(dict(getattr(trace, "kwargs", None) or {}))
    elif callable(kwinputs):
        kwargs = kwinputs()
    else:
        kwargs = maker.copy_given(kwinputs)
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"inputs must be a sequence of positional arguments, got {type(args).__name__}")
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"kwinputs must be a mapping, got {type(kwargs).__name__}")

    if convention == "backward":
        if len(args) != 2 or kwargs:
            raise ValueError("a backward trace takes (saved_for_backward, cotangents)")
        saved, cotangents = args
        if not isinstance(saved, (list, tuple)) or len(saved) != 2:
            raise ValueError("saved_for_backward must be [saved_tensors, saved_other]")
        # Thunder: compiled_backward([saved_tensors_list, ctx.saved_other], args)
        # where saved_tensors_list = list(ctx.saved_tensors), saved_other is the
        # tuple the forward returned, and args (the cotangents) is a list.
        saved_tensors_list = list(saved[0])
        saved_other = tuple(saved[1])
        cotangents_list = list(cotangents)
        del saved, cotangents, args  # the new lists are now the only owners
        return [[saved_tensors_list, saved_other], cotangents_list], {}
    return tuple(args), dict(kwargs)


# ---------------------------------------------------------------------------
# CPU: profiler events


_COLLECTIVE_RANGES = ("c10d::", "gloo:")


def _cpu_allocation_events(prof: Any):
    """Allocation nodes of the profile as (start_ns, ptr, signed size,
    in_inputs, in_warm_up), time-ordered. What torch.compile allocates while
    it compiles (inside Dynamo's ``dynamo_timed`` ranges: the constants its
    tracing makes and keeps) is the compiler's, not the step's: left out.
    So is what a collective's backend allocates inside the collective
    (ranges named ``c10d::`` and ``gloo:``: gloo's copy of a reduce-scatter's
    input, its all-gather's staging buffer), which the step's program does
    not make: NCCL's buffers on a GPU are outside PyTorch's allocator, and a
    one-process rank's collectives (distribution.instant_process_group)
    make none. Their frees, wherever they come, free nothing the walk
    counted."""
    from torch._C._profiler import _EventType

    out = []
    stack = list(reversed(prof.profiler.kineto_results.experimental_event_tree()))
    # Iterative pre-order walk; the flags are inherited from the range nodes.
    stack = [(n, False, False) for n in stack]
    while stack:
        node, in_inputs, in_warm_up = stack.pop()
        if node.tag == _EventType.Allocation:
            f = node.extra_fields
            if f.device.type == "cpu":
                out.append((node.start_time_ns, f.ptr, f.alloc_size, in_inputs, in_warm_up))
            continue
        if node.name.endswith("(dynamo_timed)") or node.name.startswith(_COLLECTIVE_RANGES):
            continue
        inside, warm = in_inputs or node.name == _INPUTS_RANGE, in_warm_up or node.name == _WARM_UP_RANGE
        stack.extend((c, inside, warm) for c in reversed(node.children))
    out.sort(key=lambda e: e[0])  # stable: equal times keep recording order
    return out


def _walk_events(events) -> tuple[int, int, int, tuple[int, ...], int]:
    """(peak, final, input bytes, the counted sizes, ignored frees) of
    `events` (_cpu_allocation_events'). What a warm-up range leaves
    allocated is held when the rest starts: counted in every figure, its
    own peak not taken."""
    # Temporaries of input creation: allocated and freed inside the inputs
    # range. They are not inputs and not the trace's: drop both events.
    drop: set[int] = set()
    opened: dict[int, int] = {}
    for i, (_, ptr, size, in_inputs, _warm) in enumerate(events):
        if not in_inputs:
            continue
        if size > 0:
            opened[ptr] = i
        elif ptr in opened:
            drop.update((opened.pop(ptr), i))

    live: dict[int, int] = {}
    counted: list[int] = []
    ignored = 0
    total = peak = 0
    input_bytes = 0
    for i, (_, ptr, size, in_inputs, in_warm_up) in enumerate(events):
        if i in drop:
            continue
        if size > 0:
            if ptr in live:
                raise RuntimeError(f"profiler reported a second allocation at live address {ptr:#x} ({size:,} bytes "
                                   f"after {live[ptr]:,}): the free between them was not seen (a thread the "
                                   "profiler does not follow freed it)")
            live[ptr] = size
        else:
            own = live.pop(ptr, None)
            if own is None:
                ignored += -size  # allocated before this profiling run: not ours
                continue
            if own != -size:
                raise RuntimeError(f"profiler freed {-size} bytes at {ptr:#x}, allocated as {own}")
        if in_inputs:
            input_bytes += size
        counted.append(size)
        total += size
        if not in_warm_up:
            peak = max(peak, total)
    return max(peak, total), total, input_bytes, tuple(counted), ignored


def _measure_cpu(fn: Callable, build: Callable, convention: str) -> Measurement:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function(_INPUTS_RANGE):
            args, kwargs = build()
        with record_function(_CALL_RANGE), torch.no_grad():
            result = fn(*args, **kwargs)
        # The profile stops here, while `args` and `result` are still held.
    events = _cpu_allocation_events(prof)
    del result, args, kwargs
    peak, final, input_bytes, counted, ignored = _walk_events(events)
    return Measurement(
        device="cpu",
        convention=convention,
        peak_bytes=peak,
        final_bytes=final,
        input_bytes=input_bytes,
        events=counted,
        ignored_free_bytes=ignored,
    )


# ---------------------------------------------------------------------------
# CUDA: caching-allocator statistics


CUDA_STAT_KINDS = ("requested_bytes", "allocated_bytes", "reserved_bytes")


def cuda_stats(dev: Any, which: str) -> dict[str, int]:
    """The caching allocator's ``<kind>.all.<which>`` for each of
    CUDA_STAT_KINDS (`which`: ``"current"`` or ``"peak"``)."""
    import torch

    s = torch.cuda.memory_stats(dev)
    return {k: int(s.get(f"{k}.all.{which}", 0)) for k in CUDA_STAT_KINDS}


def _measure_cuda(fn: Callable, build: Callable, convention: str, device: Any) -> Measurement:
    import torch

    dev = torch.device(device)

    def stats(which: str) -> dict[str, int]:
        return cuda_stats(dev, which)

    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)  # peak := current
    base = stats("current")
    args, kwargs = build()
    torch.cuda.synchronize(dev)
    after_inputs = stats("current")
    # Forget any temporary of input creation (see the CPU walk): the peak
    # restarts at what the inputs hold. (A segment such a temporary made the
    # caching allocator reserve stays reserved, and counts.)
    torch.cuda.reset_peak_memory_stats(dev)
    with torch.no_grad():
        result = fn(*args, **kwargs)
    torch.cuda.synchronize(dev)
    peak = stats("peak")
    final = stats("current")
    del result, args, kwargs

    def rel(d: dict[str, int], k: str) -> int:
        return d[k] - base[k]

    return Measurement(
        device=str(dev),
        convention=convention,
        peak_bytes=rel(peak, "requested_bytes"),
        final_bytes=rel(final, "requested_bytes"),
        input_bytes=rel(after_inputs, "requested_bytes"),
        allocated_peak_bytes=rel(peak, "allocated_bytes"),
        allocated_final_bytes=rel(final, "allocated_bytes"),
        reserved_peak_bytes=rel(peak, "reserved_bytes"),
        reserved_final_bytes=rel(final, "reserved_bytes"),
    )


def measure_region_cpu(device: Any, make: Callable, run: Callable,
                       warm_up: Callable | None = None) -> tuple[int, int, Any, None]:
    """Peak and final requested bytes of ``run(made)`` with ``made = make()``
    inside the region, from the profiler's events (the walk above), and
    `made`; `device` is the CPU. `warm_up`, when given, runs first in the
    same profile: what it leaves allocated (a module's cache made at its
    first call) is held by the region, and counted in both figures; what
    the region frees of it is seen."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        if warm_up is not None:
            with record_function(_WARM_UP_RANGE):
                warm_up()
        with record_function(_INPUTS_RANGE):
            made = make()
        run(made)
    peak, final, _inputs, _counted, _ignored = _walk_events(_cpu_allocation_events(prof))
    return peak, final, made, None


def measure_region_cuda(device: Any, make: Callable, run: Callable) -> tuple[int, int, Any, dict]:
    """The same on a CUDA device from the caching allocator's statistics,
    relative to what `device` held before ``make()``: requested bytes, and
    allocated and reserved bytes (peak and final) in the dict. The cache is
    emptied first: the region starts with segments holding live blocks
    only, so its reserved bytes do not depend on what an earlier run (a
    warm-up of the same step) left cached."""
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)  # peak := current
    base = cuda_stats(device, "current")
    made = make()
    run(made)
    torch.cuda.synchronize(device)
    peak = {k: v - base[k] for k, v in cuda_stats(device, "peak").items()}
    final = {k: v - base[k] for k, v in cuda_stats(device, "current").items()}
    allocator = {"allocated_peak_bytes": peak["allocated_bytes"], "allocated_final_bytes": final["allocated_bytes"],
                 "reserved_peak_bytes": peak["reserved_bytes"], "reserved_final_bytes": final["reserved_bytes"]}
    return peak["requested_bytes"], final["requested_bytes"], made, allocator


# ---------------------------------------------------------------------------


def measure(
    trace: Any,
    *,
    device: str = "cpu",
    inputs: Sequence[Any] | Callable[[], Sequence[Any]] | None = None,
    kwinputs: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
    convention: Literal["auto", "forward", "backward"] | None = "auto",
    seed: int = 0,
) -> Measurement:
    """Runs `trace` once on `device` with fresh inputs and returns what it allocated.

    `convention`: how the trace is called, as ``peakmem.analyze``'s
    (``"auto"``, the default, detects it from the signature; None means
    the same). See the module docstring for exactly what is measured. Raises TypeError
    for an object that is not a trace, ValueError for a bad convention or
    device, RuntimeError when the requested device is not available or the
    profiler's events are inconsistent.
    """
    import torch

    for attr in ("python_callable", "args", "siginfo"):
        if not hasattr(trace, attr):
            raise TypeError(
                "peakmem.measure expects a Thunder TraceCtx (or an object with "
                f"python_callable(), args, kwargs and siginfo()), got {type(trace).__name__}"
            )
    if convention is None or convention == "auto":
        convention = detect_convention(trace)
    if convention not in ("forward", "backward"):
        raise ValueError(f"convention must be 'auto', 'forward' or 'backward', got {convention!r}")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"cannot measure on {device}: CUDA is not available")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"can measure on 'cpu' or 'cuda' only, got {device!r}")

    fn = trace.python_callable()
    maker = _InputMaker(dev, seed, trace)

    def build():
        return _make_call_args(trace, maker, convention, inputs, kwinputs)

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if dev.type == "cuda":
            return _measure_cuda(fn, build, convention, dev)
        return _measure_cpu(fn, build, convention)
    finally:
        if was_enabled:
            gc.enable()
