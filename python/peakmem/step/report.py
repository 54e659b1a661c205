"""StepReport, what estimate_step and measure_step return, and the budget's verdict on it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from ..summary_writing import summary_json, write_summary

__all__ = ["CATEGORIES", "StepReport"]


def _step_categories() -> tuple[str, ...]:
    from .._core import STEP_CATEGORIES

    return tuple(STEP_CATEGORIES)


# The step's categories, defined once in C++ (report/attribution.h's
# kStepCategories): what by_category's keys are and the peak sums.
CATEGORIES = _step_categories()


@dataclass(frozen=True)
class StepReport:
    """The memory of one training step (or ``steps`` of them), in bytes.

    Attributes:
        peak_bytes: the most bytes held at once, parameters and inputs included.
        final_bytes: bytes still held after the last step (parameters,
            buffers, inputs, gradients left by ``zero_grad=False``,
            optimizer state).
        phase_at_peak: where the peak is: ``"forward"``, ``"backward"`` or
            ``"optimizer"``; ``step_at_peak``: which step (1-based).
        by_category: the bytes held at the peak, by what they are (every key
            of CATEGORIES; they sum to ``peak_bytes``): parameters (and
            buffers), inputs, gradients (``.grad`` and gradients being
            made), optimizer_state, activations (tensors saved for the
            backward) and temporaries (everything else: intermediates, the
            loss, the cotangent, op scratch).
        by_module: the same bytes by ``nn.Module`` path, largest first (they
            sum to ``peak_bytes``; ``""`` is the top: the inputs, the loss,
            the cotangent). A parameter, its gradient and its optimizer
            state are its module's; a tensor the traces make is the module's
            whose parameters its op reads, else its inputs'
            (peakmem.module_paths says how). Estimate only.
        budget: the bytes the step must fit in (``None``: not asked; on a
            GPU model, its memory unless given); ``fits`` and
            ``headroom_bytes`` then say whether and by how much, and
            ``verdict`` how it was judged (peakmem.step.budget): its
            ``budget_basis`` (``"reserved"``: the caching allocator's
            reserved peak, on a GPU target; ``"requested"``: the requested
            peak), ``context_bytes`` (the CUDA context counted against the
            budget) and ``counted_bytes`` (what was held at the worst point).
        forward, backward: the runtime model's reports of the two traces as
            the step runs them; optimizer_program: that of the first step's
            ``optimizer.step()`` program (Thunder's estimate only).
        optimizer: the optimizer as the step ran it, with its
            implementation (``"AdamW(lr=0.001), foreach"``); None without one.
        steps: how many steps the figures cover (``step_at_peak`` is one of
            them); steady: whether they were run until the step's memory
            repeats (``steps=None``, the default).
        measured: ``True`` for ``measure_step``.
        frontend: the front end that made the report: ``"thunder"`` (the
            step traced, or run, by Thunder) or ``"eager"`` (recorded, or
            run, as eager PyTorch runs it); peakmem.step.frontend says
            which a call's default picks.
        timeline: the live bytes by category at every statement of every
            phase (peakmem.step_timeline.StepTimeline; estimate only): its
            ``plot()`` draws them with the phases marked, and ``plot()``
            here is that.
        seconds: wall time by part (estimate only): ``"thunder"`` (importing
            Thunder, on the first call, and tracing the step with it),
            ``"peakmem"`` (everything else) and, within it, ``"simulate"``
            (the runtime model reading and simulating the two traces).
        recomputation: with ``recompute=`` (True or a budget), what
            was recomputed in the backward instead of saved and what it did
            (Thunder's: peakmem.recompute.Recomputation, names, added
            FLOPs, the peak before and after; the eager front end's:
            peakmem.step.eager_recompute.EagerRecomputation, the blocks'
            selective-checkpointing policies).
        nccl_estimate: for a rank of a distributed step whose traces run
            collectives (estimate only): NCCL's own device buffers, outside
            PyTorch's allocator and apart from every figure above
            (peakmem.distribution.nccl_estimate with its defaults).
        allocator: for ``estimate_step(..., allocator="cuda-caching")``:
            PyTorch's CUDA caching allocator run over the whole step's
            allocation stream, the parameters and inputs allocated first
            (``peakmem.analyze``'s ``report.allocator`` dict: allocated and
            reserved bytes at the peak and the end, segments, ``fits`` the
            device memory, where it runs out). For ``measure_step`` on a
            CUDA device: the allocator's ``allocated_peak_bytes``,
            ``allocated_final_bytes``, ``reserved_peak_bytes`` and
            ``reserved_final_bytes`` over the measured steps
            (``torch.cuda.memory_stats``), relative to what was held before
            them (the parameters not included).
        report: the whole step as one ``peakmem.Report`` (estimate only):
            every phase's statements in the order the step runs them, its
            storages in the step's categories, its phases in
            ``report.phases``; what ``write`` renders.
        device: the device whose kernels the estimate is for
            (``estimate_step(..., device=...)``, peakmem.step.device_target):
            ``"cpu"``, ``"cuda"``, ``"cuda:h100"``, ...; None for a
            measurement.
    """

    peak_bytes: int
    final_bytes: int
    phase_at_peak: str
    step_at_peak: int
    by_category: dict[str, int] = field(default_factory=dict)
    by_module: dict[str, int] = field(default_factory=dict)
    budget: int | None = None
    fits: bool | None = None
    headroom_bytes: int | None = None
    forward: Any = None
    backward: Any = None
    optimizer_program: Any = None
    measured: bool = False
    frontend: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    timeline: Any = None
    recomputation: Any = None
    nccl_estimate: dict | None = None
    allocator: dict | None = None
    report: Any = None
    device: str | None = None
    verdict: dict | None = None
    optimizer: str | None = None
    steps: int | None = None
    steady: bool = False
    assumptions: tuple[str, ...] = ()

    @property
    def diagnostics(self) -> list[str]:
        """What the estimate could not count or assumed, one line each (the
        whole step's report's; empty for a measurement)."""
        return list(self.report.diagnostics) if self.report is not None else []

    def summary(self) -> dict[str, Any]:
        """The step's figures as plain data (what ``to_json`` writes and the
        repr shows): peak and final bytes, where the peak is, by category and
        by module, the budget's verdict, the allocator's figures and, for an
        estimate, the seconds by part. The per-statement timeline is
        ``timeline`` (and ``write``'s formats)."""
        out: dict[str, Any] = {
            "measured": self.measured, "frontend": self.frontend,
            "peak_bytes": self.peak_bytes, "final_bytes": self.final_bytes,
            "phase_at_peak": self.phase_at_peak, "step_at_peak": self.step_at_peak,
            "by_category": dict(self.by_category), "by_module": dict(self.by_module),
            "budget": self.budget, "fits": self.fits, "headroom_bytes": self.headroom_bytes,
            "budget_basis": (self.verdict or {}).get("budget_basis"),
            "context_bytes": (self.verdict or {}).get("context_bytes"),
            "counted_bytes": (self.verdict or {}).get("counted_bytes"),
            "steps": self.steps, "optimizer": self.optimizer,
            "allocator": self.allocator, "nccl_estimate": self.nccl_estimate, "seconds": dict(self.seconds)}
        if self.device is not None:
            out["device"] = self.device
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """``summary()`` as JSON (peakmem.summary_writing)."""
        return summary_json(self, indent)

    def __repr__(self) -> str:
        return self.text()

    def text(self) -> str:
        """The figures as the repr shows them: ``write("text")``'s, for a
        measured step. Each size in bytes, with binary units beside it."""
        from .._core import human_bytes

        def size(b: int) -> str:
            return f"{b:,} bytes ({human_bytes(b)})"

        kind = "measured" if self.measured else "estimated"
        lines = [f"StepReport({kind}: peak {size(self.peak_bytes)} in the {self.phase_at_peak} of "
                 f"step {self.step_at_peak}; final {size(self.final_bytes)}"]
        if self.verdict is not None:
            verdict = self.verdict["text"]
            oom = (self.allocator or {}).get("out_of_memory")
            if oom:
                at = f"at {oom['op']}, " if oom.get("op") else ""
                verdict += f" ({at}asking for {size(oom['requested_bytes'])})"
            lines.append(f"  {verdict}")
        if self.allocator is not None and "reserved_peak_bytes" in self.allocator:
            lines.append(f"  allocator: allocated peak {size(self.allocator['allocated_peak_bytes'])}, "
                         f"reserved peak {size(self.allocator['reserved_peak_bytes'])}")
        if self.by_category:
            lines.append("  at the peak: " + ", ".join(f"{c} {b:,}" for c, b in self.by_category.items()))
        lines.extend(f"  {line}" for line in self.assumptions)
        return "\n".join(lines) + ")"

    def write(self, format: str = "text", path: str | os.PathLike | None = None, **options: Any) -> str | bytes:
        """An estimate's whole step in any of ``peakmem.Report.write``'s
        formats (``"html"``, ``"snapshot"``, ``"chrome-trace"``, ``"json"``,
        ``"text"``, ...): the step's statements, phase by phase, with its
        categories. A measured step has figures only: ``"text"`` (its
        repr) or ``"json"`` (``to_json``'s). Written to `path` too when
        given."""
        if self.report is None:
            return write_summary(self, format, options.get("indent", 2), path,
                                 " (the formats of the step's stream need estimate_step)")
        out = self.report.write(format, **options)
        if path is not None:
            with open(path, "wb" if isinstance(out, bytes) else "w") as f:
                f.write(out)
        return out

    def plot(self, ax: Any = None) -> Any:
        """The timeline on matplotlib Axes (new ones if None): live bytes by
        category, the forward, backward and optimizer of each step marked, the
        peak marked."""
        if self.timeline is None:
            raise ValueError("a measured step has no timeline (estimate_step makes one)")
        return self.timeline.plot(ax)

    def _repr_html_(self) -> str:
        from ..step_timeline import step_report_html

        return step_report_html(self)


def judge(budget: int, peak_bytes: int, allocator: dict | None, context_bytes: int = 0) -> dict:
    """The one verdict (_core.judge_budget, report/budget_verdict.h) on a
    simulated step: by the caching allocator's reserved peak (and whether
    it ran out of memory) where `allocator` (a report's allocator dict) is
    given, else by the requested `peak_bytes`; `context_bytes` counted
    against `budget`."""
    from .._core import judge_budget

    reserved = allocator.get("reserved_peak_bytes") if allocator is not None else None
    oom = bool(allocator.get("out_of_memory")) if allocator is not None else False
    return judge_budget(budget, peak_bytes, reserved, oom, context_bytes)


def _with_budget(report: StepReport, budget: int | None, context_bytes: int = 0) -> StepReport:
    """`report` judged against `budget` (judge): an estimate priced by the
    caching allocator by its reserved peak, anything else (a measurement
    included) by its requested peak."""
    if budget is None:
        return report
    verdict = judge(budget, report.peak_bytes, report.allocator if not report.measured else None, context_bytes)
    return replace(report, budget=budget, fits=verdict["fits"], headroom_bytes=verdict["headroom_bytes"],
                   verdict=verdict)
