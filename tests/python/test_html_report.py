"""The CLI's `--format html` report of a real backward trace, drawn by a browser.

`peakmem analyze TRACE --format html -o FILE` on the corpus's nanoGPT block
backward trace is opened in headless Chromium (Debian's
`chromium-headless-shell`, which scripts/install-deps installs); the
screenshot must show the plot (each category the report says holds bytes is
drawn in its colour inside the plot) and the peak marked (a vertical line in
the peak's colour at the peak's statement). The page's address names a step
to hover (`#step=N`); the DOM Chromium prints after running the page's script
must show that statement's op and the largest tensor live at the peak.

The colours and the plot's geometry are the ones src/report/writers/html_writer.cc
writes (kCategoryColours, kPeakColour, kLeft, kPlotWidth, kMaxColumns).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import checked_json
from test_snapshot_writer import REPO, run

TRACE = REPO / "tests" / "data" / "corpus" / "nanogpt_block" / "bw.trace"
PEAK = (0xE0, 0x10, 0x2F)
CATEGORY_COLOURS = {
    "argument": (0x4E, 0x79, 0xA7),
    "cotangent": (0x76, 0xB7, 0xB2),
    "saved": (0xF2, 0x8E, 0x2B),
    "output": (0x59, 0xA1, 0x4F),
    "intermediate": (0xED, 0xC9, 0x48),
    "collective": (0x9C, 0x75, 0x5F),
    "scratch": (0xB0, 0x7A, 0xA1),
}
PLOT_WIDTH = 960 - 90 - 20
MAX_COLUMNS = 1000


def chromium() -> str:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no Chromium found: scripts/install-deps installs chromium-headless-shell")


def browser(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--force-device-scale-factor=1", *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "HOME": os.environ.get("TMPDIR", "/tmp")},
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("html") / "report.html"
    written = run("analyze", str(TRACE), "--format", "html", "-o", str(out))
    assert written.returncode == 0, written.stderr.decode()
    reported = run("analyze", str(TRACE), "--format", "json", "--at", "peak")
    assert reported.returncode == 0, reported.stderr.decode()
    return out, checked_json(reported.stdout)


def test_screenshot_shows_the_plot_and_marks_the_peak(page, tmp_path):
    from PIL import Image

    html, report = page
    shot = tmp_path / "report.png"
    result = browser("--window-size=1000,900", f"--screenshot={shot}", html.as_uri())
    assert shot.is_file(), result.stderr
    image = Image.open(shot).convert("RGB")
    width, height = image.size
    pixels = image.load()
    peak_pixels = [(x, y) for y in range(height) for x in range(width) if pixels[x, y] == PEAK]
    per_column: dict[int, list[int]] = {}
    for x, y in peak_pixels:
        per_column.setdefault(x, []).append(y)

    # The peak: a vertical line (most of the plot's 292-pixel height) in the
    # peak's colour.
    line_x = [x for x, ys in per_column.items() if len(ys) > 200]
    assert line_x, f"no peak line (peak-coloured pixels in {len(per_column)} columns)"
    top = min(y for x in line_x for y in per_column[x])
    bottom = max(y for x in line_x for y in per_column[x])

    # The plot, between the line's ends: every category holding bytes at the
    # peak is drawn there in its colour.
    drawn: dict[tuple[int, int, int], set[int]] = {c: set() for c in CATEGORY_COLOURS.values()}
    for y in range(top, bottom + 1):
        for x in range(width):
            if pixels[x, y] in drawn:
                drawn[pixels[x, y]].add(x)
    held = {g["key"] for g in report["attribution"]["by_category"]}
    assert held >= {"saved", "intermediate"}
    for category in held:
        assert len(drawn[CATEGORY_COLOURS[category]]) > 3, f"{category} is not drawn"

    # The line is at the centre of the peak statement's column (the plot's
    # left edge: the arguments' column, the first one drawn).
    plot_left = min(x for xs in drawn.values() for x in xs)
    points = len(report["steps"]) + 1
    n_columns = min(points, MAX_COLUMNS)
    column = (report["peak_step"] + 1) * n_columns // points
    expected = plot_left + PLOT_WIDTH * (column + 0.5) / n_columns
    assert abs(sum(line_x) / len(line_x) - expected) <= 2.5, (line_x, expected)


def test_hovering_a_step_shows_its_op_and_largest_tensors(page):
    html, report = page
    peak = report["peak_step"]
    dom = browser("--dump-dom", f"{html.as_uri()}#step={peak}")
    assert dom.returncode == 0, dom.stderr
    start = dom.stdout.index('id="tooltip"')
    tooltip = dom.stdout[start:dom.stdout.index("</div>", start)]
    step = report["steps"][peak]
    assert f"statement {peak}</b> (line {step['line']}), op <code>{step['op']}</code>" in tooltip
    assert "peak: " in tooltip
    largest = report["live_at_peak"][0]
    assert f"<code>{largest['name']}</code>" in tooltip
