"""A training step priced by the CUDA caching allocator and written in every
report format: estimate_step(..., allocator="cuda-caching"), StepReport.write
and the step's HTML page drawn by a browser.

The requested-bytes numbers are the measured step's (measure_step, the
truth); the allocator's numbers come from the whole step's stream, whose
replay is checked against an independent reference allocator in
src/models/training_step_stream_test.cc. The colours are the ones
src/report/writers/html_writer.cc writes for a step (kStepCategoryColours).
"""

from __future__ import annotations

import json

import pytest

from step_models import MLP, mse_loss
from test_html_report import browser

STEP_COLOURS = {
    "parameters": (0x4E, 0x79, 0xA7),
    "gradients": (0x59, 0xA1, 0x4F),
    "optimizer_state": (0xB0, 0x7A, 0xA1),
    "activations": (0xF2, 0x8E, 0x2B),
}


@pytest.fixture(scope="module")
def step(thunder):
    import torch

    import peakmem

    torch.manual_seed(0)
    model, x = MLP(), torch.randn(64, 256)
    kwargs = {"loss_fn": mse_loss, "optimizer": torch.optim.AdamW}
    measured = peakmem.measure_step(model, x, **kwargs, frontend="thunder")
    priced = peakmem.estimate_step(model, x, allocator="cuda-caching", **kwargs, frontend="thunder")
    return measured, priced


def test_the_allocator_prices_the_step_and_changes_no_requested_number(step):
    measured, priced = step
    assert (priced.peak_bytes, priced.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    a = priced.allocator
    assert a["name"] == "cuda-caching"
    # The allocator counts the same storages: its requested bytes are the step's.
    assert (a["requested_peak_bytes"], a["requested_final_bytes"]) == (priced.peak_bytes, priced.final_bytes)
    # Every block is a multiple of 512 bytes at least as large as its request,
    # and segments are at least 2 MiB each.
    assert a["allocated_peak_bytes"] >= a["requested_peak_bytes"]
    assert a["allocated_peak_bytes"] % 512 == 0
    assert a["reserved_peak_bytes"] >= a["allocated_peak_bytes"]
    assert a["reserved_peak_bytes"] % (2 << 20) == 0


def test_a_budget_with_the_allocator_is_the_devices_capacity(thunder, step):
    import torch

    import peakmem

    _, priced = step
    reserved = priced.allocator["reserved_peak_bytes"]
    model, x = MLP(), torch.randn(64, 256)
    kwargs = {"loss_fn": mse_loss, "optimizer": torch.optim.AdamW, "allocator": "cuda-caching"}
    fits = peakmem.estimate_step(model, x, budget=reserved, **kwargs, frontend="thunder")
    assert (fits.fits, fits.headroom_bytes) == (True, 0)
    # Under the requested peak nothing can fit; the allocator runs out.
    short = peakmem.estimate_step(model, x, budget=priced.peak_bytes - 1, **kwargs, frontend="thunder")
    assert short.fits is False
    assert short.allocator["out_of_memory"] is not None


def test_every_format_renders_the_whole_step(step):
    _, priced = step
    # The steady state: the first step and the second, which every later one repeats.
    assert [(p.name, p.iteration) for p in priced.report.phases] == [
        ("forward", 1), ("backward", 1), ("optimizer", 1), ("forward", 2), ("backward", 2), ("optimizer", 2)]
    trace = json.loads(priced.write("chrome-trace"))
    assert trace["traceEvents"]
    snapshot = priced.write("snapshot")
    assert isinstance(snapshot, bytes) and snapshot[:1] == b"\x80"  # a pickle
    summary = json.loads(priced.write("json"))
    assert summary["peak_bytes"] == priced.peak_bytes
    text = priced.write("text")
    assert "reserved:" in text
    # The timeline is the stream's: its highest point is the peak, in the phase the report names.
    t = priced.timeline
    at = t.statement_peak.index(max(t.statement_peak))
    assert max(t.statement_peak) == priced.peak_bytes
    assert next(p for p in t.phases if p.start <= at < p.end).name == priced.phase_at_peak


def test_the_step_html_is_drawn_with_its_phases_and_categories(step, tmp_path):
    from PIL import Image

    _, priced = step
    page = tmp_path / "step.html"
    page.write_text(priced.write("html"))
    shot = tmp_path / "step.png"
    result = browser("--window-size=1000,900", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file(), result.stderr
    image = Image.open(shot).convert("RGB")
    pixels = image.load()
    seen = {c: 0 for c in STEP_COLOURS.values()}
    for y in range(image.size[1]):
        for x in range(image.size[0]):
            if pixels[x, y] in seen:
                seen[pixels[x, y]] += 1
    for category, colour in STEP_COLOURS.items():
        assert seen[colour] > 50, f"{category} is not drawn"
    dom = browser("--dump-dom", f"{page.as_uri()}#step={priced.report.peak_statement}")
    assert dom.returncode == 0, dom.stderr
    for name in ("forward", "backward", "optimizer"):
        assert f'data-phase="{name}" data-iteration="1"' in dom.stdout
    start = dom.stdout.index('id="tooltip"')
    tooltip = dom.stdout[start:dom.stdout.index("</div>", start)]
    op = priced.report.statements[priced.report.peak_statement].op
    assert f"op <code>{op}</code>" in tooltip


def test_max_batch_size_with_the_allocator_fits_reserved_bytes(thunder):
    import torch

    import peakmem

    def inputs(n: int):
        return (torch.randn(n, 256),)

    kwargs = {"loss_fn": mse_loss, "optimizer": torch.optim.SGD}
    budget = 6 << 20
    requested = peakmem.max_batch_size(MLP(), inputs, budget, high=256, **kwargs, frontend="thunder")
    reserved = peakmem.max_batch_size(MLP(), inputs, budget, high=256, allocator="cuda-caching", **kwargs,
                                      frontend="thunder")
    # Reserved bytes are never below requested ones: the allocator's answer is no larger.
    assert 1 <= reserved.batch_size <= requested.batch_size
    assert reserved.report.allocator["reserved_peak_bytes"] <= budget


def test_the_repr_is_a_summary_and_to_json_its_data(step):
    measured, priced = step
    text = repr(priced)
    # Bytes, with binary units beside them (KiB and MiB to one decimal, GiB to two).
    b = priced.peak_bytes
    unit = (f"{b} B" if b < 2**10 else f"{b / 2**10:.1f} KiB" if b < 2**20 else f"{b / 2**20:.1f} MiB"
            if b < 2**30 else f"{b / 2**30:.2f} GiB")
    assert text.startswith(f"StepReport(estimated: peak {priced.peak_bytes:,} bytes ({unit}) in the "
                           f"{priced.phase_at_peak}"), text
    assert f"reserved peak {priced.allocator['reserved_peak_bytes']:,}" in text
    # The figures, then what the estimate assumed; the timeline stays behind .timeline.
    assert len(text.splitlines()) <= 4 + len(priced.assumptions)
    assert text.splitlines()[-len(priced.assumptions):] == [f"  {a}" for a in priced.assumptions[:-1]] + [
        f"  {priced.assumptions[-1]})"]
    data = json.loads(priced.to_json())
    assert (data["peak_bytes"], data["final_bytes"]) == (measured.peak_bytes, measured.final_bytes)
    assert data["by_category"] == priced.by_category
    assert json.loads(measured.to_json())["measured"] is True


def test_plot_without_matplotlib_names_the_extra(step, monkeypatch):
    import sys

    _, priced = step
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pip install 'peakmem\[plot\]'"):
        priced.plot()
    with pytest.raises(ImportError, match=r"pip install 'peakmem\[plot\]'"):
        priced.forward.plot()
