"""Drop-in replacement for Thunder's memory estimator.

    from peakmem.thunder import get_alloc_memory
    peak, breakdown = get_alloc_memory(trace)

returns exactly what ``thunder.examine.memory_calculation.get_alloc_memory``
returns for the same trace (lightning-thunder 0.2.6): the peak in bytes and
an ordered dict of ``"{symbol} {outputs}"`` / ``"argument x"`` /
``"python_del x"`` keys to byte deltas. `trace` may be a live TraceCtx, trace
text or a path.

``peakmem.thunder.jit`` is ``thunder.jit``, imported so that it works under
torch 2.13 (as a plain ``import thunder`` does after ``import peakmem``).
"""

from __future__ import annotations

from typing import Any

from ._core import thunder_alloc_memory
from .api import _is_trace_ctx, analyze


def get_alloc_memory(trace: Any) -> tuple[int, dict[str, int]]:
    if _is_trace_ctx(trace):
        # The live reader (in C++) and the thunder model, peak and breakdown only.
        return thunder_alloc_memory(trace)
    report = analyze(trace, memory_model="thunder")
    return report.peak_bytes, report.breakdown


def jit(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``thunder.jit(fn, *args, **kwargs)``, with thunder imported so that it
    works under torch 2.13 (peakmem._thunder_compat)."""
    from ._thunder_compat import import_thunder

    return import_thunder().jit(fn, *args, **kwargs)
