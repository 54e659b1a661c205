"""A Report's own renderings in Python: write() in every CLI format,
live_by_category(), plot() (matplotlib) and the HTML view Jupyter shows.

The live bytes by category must add up, at every point, to the report's own
live bytes after each statement (which test_corpus_runtime.py checks against
measurement), for every corpus trace.
"""

from __future__ import annotations

import pickle

import pytest

import peakmem
from conftest import CORPUS, checked_json
from test_snapshot_writer import TRACES

BACKWARD = CORPUS / "nanogpt_block" / "bw.trace"


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_live_by_category_adds_up_to_the_live_bytes(trace):
    report = peakmem.analyze(trace)
    live = report.live_by_category()
    assert list(live) == ["argument", "cotangent", "saved", "output", "intermediate", "collective", "scratch"]
    totals = [sum(point) for point in zip(*live.values())]
    steps = report.statements
    assert totals == [steps[0].live_bytes - steps[0].delta_bytes] + [s.live_bytes for s in steps]
    assert not any(live["scratch"]), "scratch is freed inside its statement"
    if report.convention == "backward":
        # A backward's arguments are its saved tensors and its cotangents.
        assert not any(live["argument"]) and any(live["cotangent"])
    # At the end, the output is the storages of the returned tensors that an
    # op of the trace made (each storage once).
    made = {(storage, size) for _, storage, size, _, role in report.returned_tensors if role == "intermediate"}
    assert live["output"][-1] == sum(size for _, size in made)


def test_write_gives_every_cli_format():
    report = peakmem.analyze(BACKWARD)
    for name in ("text", "json", "annotated", "chrome-trace", "html"):
        assert isinstance(report.write(name), str), name
    snapshot = pickle.loads(report.write("snapshot"))
    assert "device_traces" in snapshot
    at_peak = checked_json(report.write("json", at="peak"))
    assert at_peak["attribution"]["live_bytes"] == report.peak_bytes
    assert "alive after step 3:" in report.write("text", at="3")
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        report.write("xml")
    with pytest.raises(ValueError, match="not a moment"):
        report.write("text", at="top")


def test_plot_draws_the_categories_and_marks_the_peak():
    import matplotlib

    matplotlib.use("Agg")
    report = peakmem.analyze(BACKWARD)
    ax = report.plot()
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:4] == ["cotangent", "saved", "output", "intermediate"]
    assert f"peak {report.peak_bytes} bytes at statement {report.peak_statement}" in labels
    peak_lines = [l for l in ax.get_lines() if list(l.get_xdata()) == [report.peak_statement + 1.5] * 2]
    assert peak_lines, "no vertical line at the peak"
    ax.figure.savefig(__import__("io").BytesIO(), format="png")


def test_jupyter_view_and_reports_without_events():
    report = peakmem.analyze(BACKWARD)
    view = report._repr_html_()
    assert view.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;')
    assert report.to_html().startswith("<!DOCTYPE html>")
    lean = peakmem.analyze(BACKWARD, events=False)
    assert not lean.has_events and lean.peak_bytes == report.peak_bytes
    with pytest.raises(ValueError, match="events=True"):
        lean.to_html()
    with pytest.raises(ValueError, match="events=True"):
        lean.plot()
    with pytest.raises(ValueError, match="html"):
        lean.write("html")
    assert lean._repr_html_().startswith("<pre>trace: ")
