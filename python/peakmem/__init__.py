"""peakmem: predicts the memory a tensor program will use, to the byte.

Public API:
    analyze(trace, *, model="runtime", convention="auto", scratch=True) -> Report
        `trace` is a Thunder TraceCtx, printed trace text, or a path to a
        trace file (text or peakmem's JSON export).
    Report, Step                the result types (from the C++ engine)
    TraceError                  bad trace input; carries file, line, column
    measure(trace, ...)         run a trace for real and measure its memory
    thunder.get_alloc_memory    drop-in for Thunder's own estimator
"""

from __future__ import annotations

from ._core import LiveTensor, Report, Step, available_models
from ._errors import TraceError
from . import thunder
from .api import analyze, to_json_export

__all__ = [
    "LiveTensor",
    "Report",
    "Step",
    "TraceError",
    "analyze",
    "available_models",
    "measure",
    "thunder",
    "to_json_export",
]


def __getattr__(name: str):
    # `measure` needs torch; import it only when asked for.
    if name == "measure":
        from .measure import measure

        return measure
    raise AttributeError(f"module 'peakmem' has no attribute {name!r}")
