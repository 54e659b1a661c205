"""The live bytes of a whole training step, statement by statement.

``estimate_step`` joins the runtime model's reports of the forward, the
backward and the optimizer's ``step()`` program; this module joins their
timelines the same way: each phase's trace runs on top of what the step
holds around it (peakmem.step's rules), and its storages are sorted into the
step's categories (parameters, inputs, gradients, optimizer_state,
activations, temporaries). ``StepReport.timeline`` is the result; its
``plot()`` draws it with the phases marked, and in Jupyter a StepReport
shows its summary and that plot.
"""

from __future__ import annotations

import html
import io
from dataclasses import dataclass, field
from typing import Any

from ._core import STEP_CATEGORIES

# The step's categories (C++'s kStepCategories), in the order they are drawn.
SERIES = tuple(STEP_CATEGORIES)
COLOURS = {
    "parameters": "#4e79a7",
    "inputs": "#76b7b2",
    "gradients": "#59a14f",
    "optimizer_state": "#b07aa1",
    "activations": "#f28e2b",
    "temporaries": "#edc948",
    "workspaces": "#9c755f",
}
PEAK_COLOUR = "#e0102f"

@dataclass(frozen=True)
class Phase:
    """One trace of the step: points ``start`` to ``end - 1`` of the timeline
    (one after each of its statements; the first phase also has point 0,
    what the step holds before it starts)."""

    name: str   # "forward", "backward" or "optimizer"
    step: int   # 1-based
    start: int
    end: int


@dataclass
class StepTimeline:
    """``series[c][i]``: the bytes of category c live at point i; the
    points are each phase's arguments and then each of its statements, in
    the order the step runs them. ``statement_peak[i]``: the most bytes live
    inside point i's statement (its outputs and op scratch included); the
    highest of them is the step's peak."""

    phases: list[Phase] = field(default_factory=list)
    series: dict[str, list[int]] = field(default_factory=lambda: {c: [] for c in SERIES})
    statement_peak: list[int] = field(default_factory=list)

    def total(self, point: int) -> int:
        return sum(s[point] for s in self.series.values())

    @classmethod
    def from_report(cls, report: Any) -> "StepTimeline":
        """The timeline of a step's Report (``_core.simulate_step``'s
        ``"step"``, made with events): point 0 is what the step holds before
        it starts, point i + 1 is after its statement i."""
        out = cls()
        out.series = {c: list(v) for c, v in report.live_by_category().items()}
        out.statement_peak = ([sum(v[0] for v in out.series.values())]
                              + [s.peak_bytes for s in report.statements])
        for i, p in enumerate(report.phases):
            out.phases.append(Phase(p.name, p.iteration, 0 if i == 0 else p.first + 1, p.end + 1))
        return out

    def plot(self, ax: Any = None, title: str = "peakmem: one training step") -> Any:
        """Stacked live bytes by category, the phases marked, the peak marked;
        on matplotlib Axes `ax` (new ones if None). Returns the Axes."""
        from .report_views import pyplot

        plt = pyplot("StepReport.plot()")
        if ax is None:
            _, ax = plt.subplots(figsize=(12, 4))
        points = range(len(self.statement_peak))
        held = {c: v for c, v in self.series.items() if any(v)}
        ax.stackplot(points, *held.values(), labels=list(held), colors=[COLOURS[c] for c in held],
                     step="post")
        ax.step(points, self.statement_peak, where="post", color="#555555", linestyle="--",
                linewidth=0.8, label="most live inside a statement")
        top = max(self.statement_peak, default=0)
        for phase in self.phases:
            ax.axvline(phase.start, color="#222222", linewidth=0.6)
            ax.text(phase.start, top * 1.02, f"{phase.name} {phase.step}", fontsize="x-small",
                    va="bottom")
        peak = max(points, key=lambda i: self.statement_peak[i], default=0)
        ax.axvline(peak + 0.5, color=PEAK_COLOUR, linewidth=1.5)
        ax.plot([peak + 0.5], [top], "o", color=PEAK_COLOUR, label=f"peak {top} bytes")
        ax.set_ylim(0, top * 1.12 if top else 1)
        ax.set_xlabel("statement (0: before the step; then one point after each statement)")
        ax.set_ylabel("live bytes")
        ax.set_title(title)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="x-small")
        ax.figure.tight_layout()
        return ax


def step_report_html(report: Any) -> str:
    """A StepReport in Jupyter: the summary, the bytes at the peak by
    category and by module and, when matplotlib is there, the timeline plot
    as SVG."""
    rows = "".join(
        f"<tr><td>{html.escape(c)}</td><td style='text-align:right'>{b:,}</td></tr>"
        for c, b in report.by_category.items())
    budget = ""
    if report.verdict is not None:  # the one verdict's own line (report/budget_verdict.h)
        budget = f"<p>{html.escape(report.verdict['text'])}</p>"
    modules = "".join(
        f"<tr><td>{html.escape(m or '(top)')}</td><td style='text-align:right'>{b:,}</td></tr>"
        for m, b in list(report.by_module.items())[:10])
    out = (f"<div><p><b>peak {report.peak_bytes:,} bytes</b> in the {report.phase_at_peak} of step "
           f"{report.step_at_peak}; final {report.final_bytes:,} bytes</p>{budget}"
           f"<table><tr><th>at the peak</th><th>bytes</th></tr>{rows}</table>")
    if modules:
        out += f"<table><tr><th>by module (the largest)</th><th>bytes</th></tr>{modules}</table>"
    if report.timeline is not None:
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            return out + "</div>"
        ax = report.timeline.plot()
        buffer = io.StringIO()
        ax.figure.savefig(buffer, format="svg", bbox_inches="tight")
        plt.close(ax.figure)
        out += buffer.getvalue()
    return out + "</div>"
