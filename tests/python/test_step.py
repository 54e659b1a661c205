"""estimate_step against measure_step on the training-step corpus
(step_models.py), to the byte, on both front ends (Thunder's traces and the
eager recording), and the estimate on meta inputs equal to it.

measure_step is the truth: the step run for real on the CPU under the
PyTorch profiler, parameters and inputs added (peakmem/step.py says how).
"""

from __future__ import annotations

import copy

import pytest
import torch

from step_models import ENTRIES, MLP, Entry, mse_loss


def _fresh(entry: Entry):
    import torch

    torch.manual_seed(0)
    return entry.make(), entry.inputs()


def check_timeline(report, setup: dict) -> None:
    """The step's timeline: its phases in the order the step runs them, no
    category ever negative, parameters and inputs held throughout, and its
    highest in-statement point is the peak (which the caller has checked
    against measurement), reached in the phase and step the report names."""
    t = report.timeline
    phases = ["forward", "backward"] + (["optimizer"] if setup.get("optimizer") else [])
    want = [(name, k) for k in range(1, report.steps + 1) for name in phases]
    assert [(p.name, p.step) for p in t.phases] == want
    assert t.phases[0].start == 0 and t.phases[-1].end == len(t.statement_peak)
    assert all(a.end == b.start for a, b in zip(t.phases, t.phases[1:]))
    for category, values in t.series.items():
        assert len(values) == len(t.statement_peak) and min(values) >= 0, category
    assert set(t.series["parameters"]) == {report.by_category["parameters"]}
    assert set(t.series["inputs"]) == {report.by_category["inputs"]}
    peak = max(t.statement_peak)
    assert peak == report.peak_bytes
    at = t.statement_peak.index(peak)
    phase = next(p for p in t.phases if p.start <= at < p.end)
    assert (phase.name, phase.step) == (report.phase_at_peak, report.step_at_peak)
    assert all(t.total(i) <= t.statement_peak[i] for i in range(len(t.statement_peak)))


@pytest.mark.parametrize("frontend", ["thunder", "eager"])
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_estimate_equals_measurement(thunder, entry: Entry, frontend: str):
    import peakmem

    model, inputs = _fresh(entry)
    measured = peakmem.measure_step(model, *inputs, loss_fn=entry.loss_fn, **entry.setup, frontend=frontend)
    estimated = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, **entry.setup, frontend=frontend)
    assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    assert sum(estimated.by_category.values()) == estimated.peak_bytes
    # By module: the same bytes; the inputs (and the loss) are the top's.
    assert sum(estimated.by_module.values()) == estimated.peak_bytes
    assert estimated.by_module.get("", 0) >= estimated.by_category["inputs"]
    assert estimated.by_category["parameters"] == measured.by_category["parameters"]
    assert estimated.phase_at_peak in ("forward", "backward", "optimizer")
    check_timeline(estimated, entry.setup)

    # The same on meta: nothing allocated, the same numbers.
    meta_model = copy.deepcopy(model).to("meta")
    meta_inputs = tuple(x.to("meta") for x in inputs)
    on_meta = peakmem.estimate_step(meta_model, *meta_inputs, loss_fn=entry.loss_fn, **entry.setup, frontend=frontend)
    assert (on_meta.peak_bytes, on_meta.final_bytes) == (estimated.peak_bytes, estimated.final_bytes)


@pytest.mark.parametrize("name", ["gpt_lm_sgd_accumulating", "mlp_adamw_3_steps",
                                  "cnn_sgd_momentum_2_steps"])
def test_a_step_file_gives_the_measured_step_without_python(thunder, tmp_path, name: str):
    """export_step's file, simulated by the CLI (`peakmem step`), equals
    the measured step: the traces travel as printed text, the join runs in
    C++ alone."""
    import json
    import subprocess

    import peakmem
    from conftest import cli

    entry = next(e for e in ENTRIES if e.name == name)
    model, inputs = _fresh(entry)
    measured = peakmem.measure_step(model, *inputs, loss_fn=entry.loss_fn, **entry.setup, frontend="thunder")
    path = tmp_path / "step.json"
    written = peakmem.export_step(model, *inputs, path=str(path), loss_fn=entry.loss_fn, **entry.setup,
                                  frontend="thunder")
    assert json.loads(path.read_text()) == json.loads(json.dumps(written))
    out = subprocess.run([cli(), "step", str(path), "--format", "json"], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert (r["peak_bytes"], r["final_bytes"]) == (measured.peak_bytes, measured.final_bytes)
    assert sum(r["by_category"].values()) == sum(r["by_module"].values()) == r["peak_bytes"]


def test_corpus_is_big_enough():
    assert len(ENTRIES) >= 10


def test_budget_says_whether_it_fits(thunder):
    import torch

    import peakmem

    model, x = MLP(), torch.randn(64, 256)
    r = peakmem.estimate_step(model, x, loss_fn=mse_loss, frontend="thunder")
    fits = peakmem.estimate_step(model, x, loss_fn=mse_loss, budget=r.peak_bytes, frontend="thunder")
    assert (fits.fits, fits.headroom_bytes, fits.budget) == (True, 0, r.peak_bytes)
    tight = peakmem.estimate_step(model, x, loss_fn=mse_loss, budget=r.peak_bytes - 1, frontend="thunder")
    assert (tight.fits, tight.headroom_bytes) == (False, -1)
    assert peakmem.estimate_step(model, x, loss_fn=mse_loss, budget="1GiB", frontend="thunder").budget == 1 << 30
    assert r.fits is None and r.budget is None


def test_unmodelled_optimizers_are_errors(thunder):
    import torch

    import peakmem

    model, x = MLP(), torch.randn(8, 256)
    with pytest.raises(ValueError, match="optimizer RMSprop is not modelled yet"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, optimizer=torch.optim.RMSprop, frontend="thunder")
    with pytest.raises(ValueError, match="AdamW with fused=True is not modelled yet: peakmem models the "
                                         "single-tensor and foreach steps"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, optimizer=torch.optim.AdamW,
                              optimizer_kwargs={"fused": True}, frontend="thunder")
    with pytest.raises(ValueError, match="SGD with differentiable=True is not modelled yet"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, optimizer=torch.optim.SGD,
                              optimizer_kwargs={"lr": 0.1, "foreach": True, "differentiable": True}, frontend="thunder")
    with pytest.raises(ValueError, match="Adam with tensor-valued hyperparameters"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, optimizer=torch.optim.Adam,
                              optimizer_kwargs={"lr": torch.tensor(1e-3)}, frontend="thunder")
    with pytest.raises(ValueError, match="rejects optimizer_kwargs"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, optimizer=torch.optim.SGD,
                              optimizer_kwargs={"lr": 0.1, "nesterov": True}, frontend="thunder")  # needs momentum
    with pytest.raises(ValueError, match="optimizer_kwargs given without an optimizer"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, optimizer_kwargs={"lr": 0.1}, frontend="thunder")


def test_a_loss_that_is_not_a_scalar_is_an_error(thunder):
    import torch

    import peakmem

    with pytest.raises(ValueError, match=r"the loss must be a scalar tensor; the step returned shape \(8, 256\)"):
        peakmem.estimate_step(MLP(), torch.randn(8, 256), frontend="thunder")
    with pytest.raises(ValueError, match="the loss must be a scalar tensor"):
        peakmem.measure_step(MLP(), torch.randn(8, 256), frontend="thunder")


def test_a_module_thunder_cannot_trace_is_an_error(thunder):
    import torch

    import peakmem

    class DataDependent(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.fc(x)
            if y.sum() > 0:  # a branch on a tensor's value: Thunder cannot trace it
                return y.sum()
            return y.mean()

    with pytest.raises(RuntimeError, match=r"Thunder [0-9.]+ could not trace the step"):
        peakmem.estimate_step(DataDependent(), torch.randn(2, 4), frontend="thunder")


def test_a_loss_that_raises_is_reported_as_the_losss_error_not_thunders(thunder):
    import torch

    import peakmem

    def loss_fn(output, x):
        return {"mean": output.mean()}["sum"]  # the user's bug: a KeyError without Thunder too

    for run in (peakmem.estimate_step, peakmem.measure_step):
        with pytest.raises(RuntimeError, match=r"the model or loss raises KeyError: 'sum' \(run without Thunder"):
            run(MLP(), torch.randn(2, 256), loss_fn=loss_fn, frontend="thunder")


def test_bad_arguments(thunder):
    import torch

    import peakmem

    with pytest.raises(ValueError, match="steps must be a positive integer"):
        peakmem.estimate_step(MLP(), torch.randn(2, 256), loss_fn=mse_loss, steps=0, frontend="thunder")
    with pytest.raises(ValueError, match="cannot read the size"):
        peakmem.estimate_step(MLP(), torch.randn(2, 256), loss_fn=mse_loss, budget="lots", frontend="thunder")
    # measure_step runs for real, on one device, the CPU or CUDA (its CUDA
    # path reads torch.cuda.memory_stats; this machine has no GPU).
    with pytest.raises(ValueError, match="runs on one device; the model and inputs are on cpu, meta"):
        peakmem.measure_step(MLP(), torch.randn(2, 256, device="meta"), loss_fn=mse_loss, frontend="thunder")
    with pytest.raises(ValueError, match="runs on the CPU or a CUDA device; a tensor is on meta"):
        peakmem.measure_step(MLP().to("meta"), torch.randn(2, 256, device="meta"), loss_fn=mse_loss, frontend="thunder")


def test_an_input_given_twice_is_one_tensor(thunder):
    import torch

    import peakmem

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(64, 32)

        def forward(self, x, y):
            return (self.embed(x) * y.unsqueeze(-1)).pow(2).mean()

    torch.manual_seed(0)
    model, x = Embed(), torch.randint(0, 64, (15, 4))
    # x passed as both arguments: the step holds one index tensor (15 * 4
    # int64, 480 bytes), though the forward's trace takes it as two
    # arguments (the spec's forward.tied).
    measured = peakmem.measure_step(model, x, x, frontend="thunder")
    assert measured.by_category["inputs"] == 15 * 4 * 8
    estimate = peakmem.estimate_step(model, x, x, frontend="thunder")
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    assert estimate.by_category["inputs"] == 15 * 4 * 8


def test_step_report_plots_and_shows_in_jupyter(thunder):
    import matplotlib

    import peakmem

    matplotlib.use("Agg")
    torch.manual_seed(0)
    report = peakmem.estimate_step(MLP(), torch.randn(64, 256), loss_fn=mse_loss,
                                   optimizer=torch.optim.AdamW, steps=2, frontend="thunder")
    ax = report.plot()
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["forward 1", "backward 1", "optimizer 1", "forward 2", "backward 2", "optimizer 2"]
    assert f"peak {report.peak_bytes} bytes" in ax.get_legend_handles_labels()[1]
    view = report._repr_html_()
    assert f"peak {report.peak_bytes:,} bytes" in view and "<svg" in view
    top_module, top_bytes = next(iter(report.by_module.items()))
    assert f"<td>{top_module}</td><td style='text-align:right'>{top_bytes:,}</td>" in view
    measured = peakmem.measure_step(MLP(), torch.randn(64, 256), loss_fn=mse_loss, frontend="thunder")
    with pytest.raises(ValueError, match="no timeline"):
        measured.plot()


def test_meta_inputs_thunder_takes_for_aliases_are_a_clear_error(thunder):
    # Thunder 0.2.6 groups tensor inputs by storage address; every meta
    # tensor's is 0, so with an in-place update in the program (batch norm's
    # running statistics) it takes two meta inputs for views of one tensor
    # and fails: the error must say so, not only Thunder's reshape message.
    import peakmem

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3)
            self.bn = torch.nn.BatchNorm2d(8)

        def forward(self, images, labels):
            return torch.nn.functional.cross_entropy(self.bn(self.conv(images)).mean((2, 3)), labels)

    with pytest.raises(RuntimeError, match="every meta tensor's is 0"):
        peakmem.estimate_step(Net().to("meta"), torch.randn(4, 3, 8, 8, device="meta"),
                              torch.randint(0, 8, (4,), device="meta"), frontend="thunder")
