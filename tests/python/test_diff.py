"""`peakmem diff A B` on the forward traces of one program under two
configurations, against what the two runs really allocate.

The program is a Linear -> GELU -> Linear -> LayerNorm block (width 256,
hidden 1024, batch 64), traced by thunder.jit twice: for training (the
input and the parameters require grad: Thunder's forward also returns the
tensors it saves for backward, which changes both the peak and what is
held at the end) and for inference (nothing requires grad). Each forward
trace is measured with `peakmem.measure` (the PyTorch profiler on the CPU);
the diff of the printed traces must report the measured differences of the
peak and of the final bytes, and its three splits of the peak difference
(by category, by op, by storage) must each sum to it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import peakmem
from conftest import checked_json
from test_snapshot_writer import run


class Block(nn.Module):
    def __init__(self, dim: int = 256, hidden: int = 1024) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(self.fc2(torch.nn.functional.gelu(self.fc1(x))))


@pytest.fixture(scope="module")
def two_forwards(thunder, tmp_path_factory):
    out = {}
    for name, grad in (("inference", False), ("training", True)):
        torch.manual_seed(0)
        model = Block().requires_grad_(grad)
        x = torch.randn(64, 256, requires_grad=grad)
        jm = thunder.jit(model)
        jm(x)
        trace = thunder.last_traces(jm)[-1]
        path = tmp_path_factory.mktemp(name) / "fw.trace"
        path.write_text(str(trace))
        out[name] = (path, peakmem.measure(trace))
    return out


def test_diff_reports_the_measured_difference(two_forwards):
    (a_path, a_measured), (b_path, b_measured) = two_forwards["inference"], two_forwards["training"]
    # The configurations do change memory (else the test shows nothing).
    assert b_measured.peak_bytes != a_measured.peak_bytes
    assert b_measured.final_bytes != a_measured.final_bytes

    done = run("diff", str(a_path), str(b_path), "--format", "json")
    assert done.returncode == 0, done.stderr.decode()
    diff = checked_json(done.stdout, "diff")
    assert diff["peak_delta_bytes"] == b_measured.peak_bytes - a_measured.peak_bytes
    assert diff["final_delta_bytes"] == b_measured.final_bytes - a_measured.final_bytes
    assert (diff["a"]["peak_bytes"], diff["b"]["peak_bytes"]) == (a_measured.peak_bytes, b_measured.peak_bytes)
    for split in ("by_category", "by_op", "by_storage"):
        assert sum(g["delta_bytes"] for g in diff[split]) == diff["peak_delta_bytes"], split
    # Training keeps tensors for backward: they are returned, so more output.
    output = next(g for g in diff["by_category"] if g["key"] == "output")
    assert output["delta_bytes"] > 0
    assert diff["first_divergence"] is not None

    text = run("diff", str(a_path), str(b_path))
    assert text.returncode == 0, text.stderr.decode()
    delta = b_measured.peak_bytes - a_measured.peak_bytes
    assert f"B - A = {delta:+d} bytes" in text.stdout.decode()


def test_diff_of_a_trace_with_itself_is_empty(two_forwards):
    path, _ = two_forwards["training"]
    diff = checked_json(run("diff", str(path), str(path), "--format", "json").stdout, "diff")
    assert diff["peak_delta_bytes"] == diff["final_delta_bytes"] == 0
    assert diff["first_divergence"] is None
    assert diff["by_category"] == diff["by_op"] == diff["by_storage"] == []


def test_diff_names_a_bad_trace(tmp_path, two_forwards):
    bad = tmp_path / "bad.trace"
    bad.write_text("def f(a):\n  t0 = torch.neg(a\n  return t0\n")
    done = run("diff", str(two_forwards["training"][0]), str(bad))
    assert done.returncode == 1
    assert "bad.trace:3:12: unexpected end of input inside a statement" in done.stderr.decode()
