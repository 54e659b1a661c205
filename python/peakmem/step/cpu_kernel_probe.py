"""What a CPU convolution allocates inside itself where the registry's
rules do not cover the call, asked of the kernel itself.

oneDNN picks its implementation for each convolution when it makes the
primitive: from the shapes, the memory formats, the thread count and the
instruction set it may use (ONEDNN_MAX_CPU_ISA, else the machine's own). The
blocking, the reorders ideep adds around it and the scratchpad it books
(reduction buffers of a batch split between threads, a strided input
gradient's gathered image, a depthwise kernel's padded rows) follow from that
choice, across dozens of kernels per instruction set. The measured rules of
``convolution_scratch.h`` cover the plain cases on AVX2; for the rest
(strided input gradients, batch-split weight gradients, grouped and
depthwise, channels-last convolutions) the recording defers the call here.

Once the recording has finished (no profiler of its own is running then),
each deferred call is run once on zero-filled CPU tensors of its operands'
shapes, strides and dtypes, once more under the profiler, and what the
second run allocates and frees inside the op (its outputs told apart by
their storages) is folded as the registry folds its rules' sequences
(``_core.fold_scratch_events``). The answer is this machine's: its oneDNN,
its instruction set, the recording's thread count; the diagnostics say so.
A call whose operands exceed ``PROBE_LIMIT_BYTES`` is not run and stays
named as not counted, as does every call where a profiler is already on.
Each signature is run once per process."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

# The ops deferred here when their rule does not cover the call.
PROBED_OPS = ("aten.convolution.default", "aten.convolution_backward.default")
# The most operand bytes a probe allocates (it runs the call for real).
PROBE_LIMIT_BYTES = 256 << 20

# The instruction set convolution_scratch.h's rules were measured on.
_RULES_ISA = "AVX2"

_answers: dict[tuple, tuple[int, int]] = {}  # signature -> (before, with_outputs)


def onednn_isa() -> str:
    """The instruction set oneDNN runs in this process: ONEDNN_MAX_CPU_ISA
    (read by oneDNN once), else the best of the machine's that ATen
    detects (AVX512 or AVX2)."""
    import torch

    named = os.environ.get("ONEDNN_MAX_CPU_ISA")
    if named:
        return named.upper()
    if torch.cpu._is_avx512_supported():
        return "AVX512"
    return "AVX2" if torch.cpu._is_avx2_supported() else "below AVX2"


@dataclass
class _Deferred:
    func: Any
    arguments: tuple  # (args, kwargs) with each tensor a ("tensor", shape, strides, offset, dtype) spec
    storages: tuple[int, int]  # the two scratch storages' indices: before the outputs, with them
    statement: str  # "statement N (op)"
    why_not: str  # the rule's reason


def _spec(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_spec(v) for v in x)
    return x


def _specs_bytes(x: Any) -> int:
    if isinstance(x, tuple) and x and x[0] == "tensor":
        return _storage_elements(x) * _item_size(x[4])
    if isinstance(x, (list, tuple)):
        return sum(_specs_bytes(v) for v in x)
    if isinstance(x, dict):
        return sum(_specs_bytes(v) for v in x.values())
    return 0


def _item_size(dtype: Any) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


def _storage_elements(spec: tuple) -> int:
    _, shape, strides, offset, _ = spec
    if any(s == 0 for s in shape):
        return offset
    return offset + 1 + sum((s - 1) * st for s, st in zip(shape, strides))


def _real(x: Any) -> Any:
    """A zero-filled CPU tensor for each spec."""
    import torch

    if isinstance(x, tuple) and x and x[0] == "tensor":
        _, shape, strides, offset, dtype = x
        return torch.zeros(_storage_elements(x), dtype=dtype).as_strided(shape, strides, offset)
    if isinstance(x, (list, tuple)):
        return type(x)(_real(v) for v in x)
    if isinstance(x, dict):
        return {k: _real(v) for k, v in x.items()}
    return x


def _signature(func: Any, arguments: tuple) -> tuple:
    import torch

    def frozen(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            return tuple(frozen(v) for v in x)
        if isinstance(x, dict):
            return tuple(sorted((k, frozen(v)) for k, v in x.items()))
        return str(x) if isinstance(x, torch.dtype) else x

    return (str(func), frozen(arguments), torch.get_num_threads(), os.environ.get("ONEDNN_MAX_CPU_ISA"))


@contextlib.contextmanager
def _stderr_quiet():
    """The process's standard error (file descriptor 2) sent nowhere: the
    profiler's C++ side prints a line as it starts and stops, which is not
    the estimate's to show."""
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _run(func: Any, arguments: tuple) -> tuple[int, int]:
    """(before, with_outputs) of one call, run on real zero-filled operands."""
    import torch
    from torch.utils._pytree import tree_leaves

    from .._core import fold_scratch_events
    from ..measure import _cpu_allocation_events

    args, kwargs = _real(arguments)
    func(*args, **kwargs)  # warm: oneDNN makes its primitive at the first call
    with _stderr_quiet(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                 profile_memory=True) as prof:
        out = func(*args, **kwargs)
    returned = {t.untyped_storage().data_ptr() for t in tree_leaves(out)
                if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes()}
    opened: dict[int, int] = {}  # ptr -> index of its allocation in `events`
    events: list[tuple[int, bool]] = []
    for _, ptr, size, _, _ in _cpu_allocation_events(prof):
        if size > 0:
            opened[ptr] = len(events)
            events.append((size, False))
        elif ptr in opened:
            del opened[ptr]
            events.append((size, False))
    for ptr, i in opened.items():  # still allocated when the op returned
        if ptr in returned:
            events[i] = (events[i][0], True)
    return fold_scratch_events(events)


@dataclass
class KernelProbes:
    """The recording's deferred calls (``defer``), answered when it has
    finished (``settle``)."""

    deferred: list[_Deferred] = field(default_factory=list)

    @staticmethod
    def deferred_because(op: str, why_not: str, cuda_target: bool) -> str:
        """Why a CPU target's convolution is deferred here (empty: it is
        not): the registry's reason its rules do not cover the call, or
        the instruction set they were not measured on."""
        if cuda_target or op not in PROBED_OPS:
            return ""
        isa = onednn_isa()
        if why_not or isa == _RULES_ISA:
            return why_not
        return f"convolution_scratch.h's rules are oneDNN's {_RULES_ISA} kernels, and this process's oneDNN runs {isa}'s"

    def defer(self, func: Any, args: tuple, kwargs: dict, storages: tuple[int, int], statement: str,
              why_not: str) -> None:
        self.deferred.append(_Deferred(func, (_spec(args), {k: _spec(v) for k, v in kwargs.items()}),
                                       storages, statement, why_not))

    def settle(self, storages: list[list], diagnostics: list[str]) -> None:
        """Each deferred call's scratch into its two storages' bytes, or
        its statement named as not counted, with why."""
        import torch

        if not self.deferred:
            return
        probed = 0
        for d in self.deferred:
            size = _specs_bytes(d.arguments)
            if size > PROBE_LIMIT_BYTES:
                diagnostics.append(f"{d.statement}: what it allocates inside the op is not counted: {d.why_not} "
                                   f"(its {size:,} operand bytes are past the {PROBE_LIMIT_BYTES:,} that "
                                   f"peakmem runs a kernel on to ask it)")
                continue
            if torch.autograd._profiler_enabled():
                diagnostics.append(f"{d.statement}: what it allocates inside the op is not counted: {d.why_not} "
                                   f"(a profiler is running, so the kernel could not be asked)")
                continue
            key = _signature(d.func, d.arguments)
            if key not in _answers:
                _answers[key] = _run(d.func, d.arguments)
            before, with_outputs = _answers[key]
            storages[d.storages[0]][0] = before
            storages[d.storages[1]][0] = with_outputs
            probed += 1
        if probed:
            diagnostics.append(
                f"{probed} convolution calls outside peakmem's measured oneDNN rules were counted by running "
                f"each kernel once on this CPU (oneDNN instruction set: {onednn_isa()}; "
                f"{torch.get_num_threads()} threads): another CPU may allocate otherwise")
