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

# Imported eagerly (it imports torch only when called), so that the name
# `peakmem.measure` is the function, not the submodule of the same name.
from .measure import Measurement, measure  # noqa: E402

__all__ = [
    "LiveTensor",
    "Measurement",
    "Report",
    "Step",
    "TraceError",
    "analyze",
    "available_models",
    "measure",
    "thunder",
    "to_json_export",
]

