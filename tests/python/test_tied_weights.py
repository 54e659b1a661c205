"""Tied weights: one parameter under two module paths (an LM head tied to
its embedding); and one input tensor passed twice (``model(ids, ids)``, the
ids as their own labels). Thunder's trace takes it once per path and its backward
returns a gradient for each; autograd adds the second into the first in
AccumulateGrad's input buffer before AccumulateGrad steals the sum
(torch/csrc/autograd/input_buffer.cpp, InputBuffer::add). Each step is
measured for real on the CPU (measure_step, the profiler) under Thunder and
eagerly; the estimate equals it to the byte."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
import torch.nn.functional as F

import peakmem

VOCAB, WIDTH = 1000, 64


class TiedLM(torch.nn.Module):
    """Embedding, a hidden layer and a head; `tie`: the head's weight is
    the embedding's. `loss_inside`: the forward takes the labels and shifts
    them as transformers' causal LMs do (`labels[..., 1:].contiguous()`, a
    copy of a strided slice)."""

    def __init__(self, tie: bool = True, loss_inside: bool = False) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, WIDTH)
        self.mid = torch.nn.Linear(WIDTH, WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB, bias=False)
        if tie:
            self.head.weight = self.emb.weight
        self.loss_inside = loss_inside

    def forward(self, idx, labels=None):
        logits = self.head(torch.relu(self.mid(self.emb(idx))))
        if not self.loss_inside:
            return logits
        shifted = logits[..., :-1, :].contiguous()
        return F.cross_entropy(shifted.view(-1, VOCAB), labels[..., 1:].contiguous().view(-1))


def _step(loss_inside: bool) -> dict:
    if loss_inside:
        return {"optimizer": torch.optim.AdamW}
    return {"optimizer": torch.optim.AdamW, "model_inputs": 1,
            "loss_fn": lambda out, idx, labels: F.cross_entropy(out.flatten(0, 1), labels.flatten())}


def _inputs() -> tuple:
    torch.manual_seed(0)
    return torch.randint(0, VOCAB, (4, 32)), torch.randint(0, VOCAB, (4, 32))


@pytest.mark.parametrize("frontend", ["thunder", "eager"])
@pytest.mark.parametrize("loss_inside", [False, True], ids=["loss_fn", "shifted_labels_inside"])
@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_a_tied_head_step_is_exact(thunder, frontend, loss_inside, tie):
    torch.manual_seed(0)
    model = TiedLM(tie, loss_inside)
    inputs = _inputs()
    step = {**_step(loss_inside), "frontend": frontend}
    estimate = peakmem.estimate_step(model, *inputs, **step)
    measured = peakmem.measure_step(model, *inputs, **step)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    if tie:  # by hand: the untied step keeps one parameter more after step() (zero_grad drops the
        # gradients): the head's weight, its AdamW exp_avg and exp_avg_sq (VOCAB x WIDTH float32 each)
        # and its step count (a 0-d float32)
        untied = peakmem.estimate_step(TiedLM(False, loss_inside), *inputs, **step)
        assert untied.final_bytes - estimate.final_bytes == 3 * VOCAB * WIDTH * 4 + 4

@pytest.mark.parametrize("frontend", ["thunder", "eager"])
@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_the_ids_passed_again_as_labels_are_one_tensor(thunder, frontend, tie):
    torch.manual_seed(0)
    model = TiedLM(tie, loss_inside=True)
    ids = _inputs()[0]
    step = {"optimizer": torch.optim.AdamW, "frontend": frontend}
    estimate = peakmem.estimate_step(model, ids, ids, **step)
    measured = peakmem.measure_step(model, ids, ids, **step)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    # by hand: the step holds one ids tensor, not two (4 x 32 int64)
    apart = peakmem.estimate_step(model, ids, ids.clone(), **step)
    assert apart.final_bytes - estimate.final_bytes == 4 * 32 * 8


def test_a_tied_step_file_travels_with_its_ties(thunder, tmp_path):
    """export_step writes the tie (forward.tied); the CLI, C++ alone,
    gives the measured step."""
    from conftest import cli

    torch.manual_seed(0)
    model, inputs = TiedLM(True, True), _inputs()
    measured = peakmem.measure_step(model, *inputs, optimizer=torch.optim.AdamW, frontend="thunder")
    path = tmp_path / "step.json"
    peakmem.export_step(model, *inputs, path=str(path), optimizer=torch.optim.AdamW, frontend="thunder")
    assert json.loads(path.read_text())["forward"]["tied"] == {"t_head_weight": "t_emb_weight"}
    out = subprocess.run([cli(), "step", str(path), "--format", "json"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert (r["peak_bytes"], r["final_bytes"]) == (measured.peak_bytes, measured.final_bytes)
