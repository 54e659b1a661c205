"""peakmem: predicts the memory a PyTorch training step (eager or Lightning
Thunder) will take before it runs, to the byte; estimate_step is where to
start (README.md).

Public API:
    analyze(trace, *, memory_model="runtime", convention="auto", scratch=True, events=True) -> Report
        `trace` is a Thunder TraceCtx, printed trace text, or a path to a
        trace file (text or peakmem's JSON export).
    Report, Statement           the result types (from the C++ engine; Statement is one
                                row of Report.statements); a Report
                                writes every CLI format (write("html"), ...),
                                shows as HTML in Jupyter and plots (plot(), matplotlib)
    TraceError                  bad trace input; carries file, line, column
    measure(trace, ...)         run a trace for real and measure its memory (a Measurement:
                                to_json(), write("text" | "json"))
    estimate_step(model, *inputs, loss_fn=, optimizer=, steps=, zero_grad=, budget=, device=, recompute=,
                  frontend=)
                                a training step's memory, predicted (meta inputs work):
                                by default the steady step of a training run (steps
                                until its memory repeats), as the model runs: a
                                thunder.jit module's under Thunder, any other eagerly
    measure_step(...)           the same step run for real on the CPU and measured
    export_step(model, *inputs, path=, ...)
                                the step as a portable file: `peakmem step STEP.json`
    max_batch_size(model, make_inputs, budget, ...)
                                the largest batch (or sequence) whose step fits
    gpu_catalog()               the GPU models device= names: each card's memory and
                                CUDA context, what "fits" on a GPU is judged by
    peak_formula(model, make_inputs, ...)
                                the step at every size n from three Thunder traces
    plan(trace, time_budget=)   a statement order with a lower peak (a new TraceCtx
                                that runs, or planned text), judged by the runtime model
    plan_transform()            the planner as a Thunder transform (thunder.jit(..., transforms=[...]))
    nccl_estimate(world_size, collectives, ...)
                                NCCL's own buffers on a rank: an estimate, apart
    thunder.get_alloc_memory    drop-in for Thunder's own estimator
    thunder.jit                 thunder.jit, importable under torch 2.13

After ``import peakmem``, ``import thunder`` works under torch 2.13 too.
"""

from __future__ import annotations

from . import _thunder_compat

# A plain `import thunder` after `import peakmem` works under torch 2.13
# (lightning-thunder 0.2.6 otherwise fails on torch's removed named-tensor
# methods); neither torch nor thunder is imported here.
_thunder_compat.install()

from ._core import LiveTensor, Report, Statement, available_models  # noqa: E402
from ._errors import TraceError  # noqa: E402
from . import thunder  # noqa: E402
from .api import analyze, to_json_export  # noqa: E402
from . import report_views  # noqa: E402

report_views.attach(Report)

# Imported eagerly (it imports torch only when called), so that the name
# `peakmem.measure` is the function, not the submodule of the same name.
from .measure import Measurement, measure  # noqa: E402
from .step import StepReport, estimate_step, export_step, measure_step  # noqa: E402
from .batch_formula import PeakFormula, peak_formula  # noqa: E402
from .batch_search import BatchSearch, max_batch_size  # noqa: E402
from .planning import Plan, plan, plan_transform  # noqa: E402
from .distribution import nccl_estimate  # noqa: E402
from .step.device_target import gpu_catalog  # noqa: E402

__all__ = [
    "BatchSearch",
    "LiveTensor",
    "Measurement",
    "PeakFormula",
    "Plan",
    "Report",
    "Statement",
    "StepReport",
    "TraceError",
    "analyze",
    "estimate_step",
    "export_step",
    "available_models",
    "gpu_catalog",
    "max_batch_size",
    "measure",
    "measure_step",
    "nccl_estimate",
    "peak_formula",
    "plan",
    "plan_transform",
    "thunder",
    "to_json_export",
]


def __getattr__(name: str):
    """Old spellings of the package's names, for one release."""
    if name == "Step":
        from ._deprecation import deprecated

        deprecated("peakmem.Step", "peakmem.Statement")
        return Statement
    raise AttributeError(f"module 'peakmem' has no attribute {name!r}")
