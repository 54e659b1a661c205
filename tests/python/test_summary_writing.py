"""to_json and write of the results that are figures (peakmem.summary_writing):
a Measurement and a measured StepReport write "text" and "json" as
Report.write names them, and the JSON reads back as the figures measured
(here derived by hand as well)."""

from __future__ import annotations

import json

import pytest
import torch

import peakmem


def test_a_measurement_round_trips_through_json(thunder, tmp_path):
    def add(x, y):
        return x + y

    jitted = thunder.jit(add)
    jitted(torch.randn(64), torch.randn(64))
    m = peakmem.measure(thunder.last_traces(jitted)[-1])
    # Two f32[64] inputs (256 bytes each) and their sum (256 bytes), all held
    # by the caller at the end (the forward convention): 768 bytes.
    assert (m.input_bytes, m.peak_bytes, m.final_bytes) == (512, 768, 768)
    data = json.loads(m.to_json())
    assert data == m.summary()
    assert (data["peak_bytes"], data["final_bytes"], data["input_bytes"]) == (768, 768, 512)
    assert data["events"] == list(m.events) and sum(data["events"]) == 768
    assert m.write("json") == m.to_json()
    text = m.write("text", path=tmp_path / "m.txt")
    assert "peak 768 bytes, final 768 bytes, inputs 512 bytes" in text
    assert (tmp_path / "m.txt").read_text() == text
    with pytest.raises(ValueError, match="a Measurement writes 'text' or 'json', not 'html'"):
        m.write("html")


def test_a_measured_step_writes_its_figures_and_an_estimate_its_stream(tmp_path):
    torch.manual_seed(0)
    model, x = torch.nn.Linear(4, 3), torch.randn(2, 4)
    options = {"loss_fn": lambda output, x: output.sum(), "frontend": "eager"}
    m = peakmem.measure_step(model, x, **options)
    # Linear(4, 3): a 3x4 weight and 3 biases, f32: 60 bytes; x: 2x4 f32, 32 bytes.
    data = json.loads(m.write("json", path=tmp_path / "m.json"))
    assert data == json.loads((tmp_path / "m.json").read_text()) == m.summary()
    assert data["by_category"] == {"parameters": 60, "inputs": 32}
    assert (data["peak_bytes"], data["final_bytes"], data["measured"]) == (m.peak_bytes, m.final_bytes, True)
    assert m.write("text") == repr(m)
    with pytest.raises(ValueError, match="a StepReport writes 'text' or 'json', not 'html' .*need estimate_step"):
        m.write("html")
    r = peakmem.estimate_step(model, x, **options)
    written = r.write("json", path=tmp_path / "r.json")
    assert (tmp_path / "r.json").read_text() == written
    assert json.loads(written)["peak_bytes"] == r.peak_bytes == m.peak_bytes  # the estimate is the measured step's
