"""How a Report shows itself to people: the HTML page in Jupyter and a
matplotlib plot (matplotlib is optional: only ``plot()`` imports it).

Both read the report's allocation event stream (``peakmem.analyze`` keeps it
unless ``events=False``): the live bytes after every statement, stacked by
category (argument, cotangent, saved, output, intermediate, scratch), as
the CLI's ``--format html`` draws them.
"""

from __future__ import annotations

import html
from typing import Any

from ._core import Report

# The html report's colours (src/report/writers/html_writer.cc), so that the
# plot and the page read alike.
CATEGORY_COLOURS = {
    "argument": "#4e79a7",
    "cotangent": "#76b7b2",
    "saved": "#f28e2b",
    "output": "#59a14f",
    "intermediate": "#edc948",
    "collective": "#9c755f",
    "scratch": "#b07aa1",
}
PEAK_COLOUR = "#e0102f"


def _require_events(report: Report, what: str) -> None:
    if not report.has_events:
        raise ValueError(
            f"{what} needs the report's allocation events: analyse with peakmem.analyze(..., events=True)"
        )


def to_html(report: Report) -> str:
    """The self-contained HTML page `peakmem analyze --format html` writes."""
    _require_events(report, "to_html()")
    return report.write("html")


def repr_html(report: Report) -> str:
    """Jupyter's view: the HTML page in an iframe (so that several reports in
    one notebook keep their own script and element ids)."""
    if not report.has_events:
        return f"<pre>{html.escape(report.to_text()[:4000])}</pre>"
    page = html.escape(report.write("html"), quote=True)
    return f'<iframe srcdoc="{page}" style="width:100%;height:900px;border:0"></iframe>'


def pyplot(what: str) -> Any:
    """matplotlib.pyplot, or an ImportError naming the optional dependency
    `what` needs and how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(f"{what} needs matplotlib, an optional dependency of peakmem: "
                          "pip install 'peakmem[plot]' (or pip install matplotlib)") from e
    return plt


def plot(report: Report, ax: Any = None) -> Any:
    """Draws the live bytes after every statement, stacked by category, the
    most bytes live inside each statement as a dashed line, and the peak
    marked, on matplotlib Axes `ax` (new ones if None). Returns the Axes."""
    _require_events(report, "plot()")
    plt = pyplot("Report.plot()")
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
    live = report.live_by_category()
    points = range(len(next(iter(live.values()))))
    held = {k: v for k, v in live.items() if any(v)}
    ax.stackplot(points, *held.values(), labels=list(held), colors=[CATEGORY_COLOURS[k] for k in held], step="post")
    statements = report.statements
    if statements:
        in_step = [statements[0].live_bytes - statements[0].delta_bytes] + [s.peak_bytes for s in statements]
        ax.step(points, in_step, where="post", color="#555555", linestyle="--", linewidth=0.8,
                label="most live inside a statement")
    # Point p is drawn from p to p + 1; the peak's point is the centre of its span.
    peak_point = report.peak_statement + 1.5
    ax.axvline(peak_point, color=PEAK_COLOUR, linewidth=1.5)
    ax.plot([peak_point], [report.peak_bytes], "o", color=PEAK_COLOUR,
            label=f"peak {report.peak_bytes} bytes at statement {report.peak_statement}")
    ax.set_xlabel("statement (0: the arguments, i + 1: after statement i)")
    ax.set_ylabel("live bytes")
    ax.set_title(f"peakmem ({report.model}): {report.trace_name}")
    ax.legend(loc="upper right", fontsize="small")
    return ax


def attach(report_type: type) -> None:
    """Makes these the Report's own methods."""
    report_type.to_html = to_html
    report_type._repr_html_ = repr_html
    report_type.plot = plot
