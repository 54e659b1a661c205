"""max_batch_size against the truth: the size it returns fits when measured,
and one more does not (the search here; the formula in test_batch_formula.py)."""

from __future__ import annotations

import re

import copy

import pytest

from step_models import MLP, mse_loss


def test_the_largest_batch_fits_and_one_more_does_not(thunder):
    import torch

    import peakmem

    torch.manual_seed(0)
    model = MLP()
    setup = {"loss_fn": mse_loss, "optimizer": torch.optim.AdamW, "steps": 2}
    # The budget: what batch 37 measures (so the answer is 37 if the peak
    # grows with every row, as each row adds activations).
    budget = peakmem.measure_step(model, torch.randn(37, 256), **setup, frontend="thunder").peak_bytes
    meta_model = copy.deepcopy(model).to("meta")
    r = peakmem.max_batch_size(meta_model, lambda b: (torch.randn(b, 256, device="meta"),),
                               budget, high=64, method="search", **setup, frontend="thunder")
    assert r.batch_size == 37
    assert r.report.fits and r.report.peak_bytes == budget
    assert peakmem.measure_step(model, torch.randn(38, 256), **setup, frontend="thunder").peak_bytes > budget
    assert r.tried[38] > budget and list(r.tried) == sorted(r.tried)
    assert {1, 2, 4, 8, 16, 32, 64} <= set(r.tried)


@pytest.mark.parametrize("method", ["formula", "search"])
def test_nothing_fits_raises(thunder, method):
    import torch

    import peakmem

    # The parameters alone (2,102,272 bytes) exceed 1 KiB: not even batch 1
    # fits; the step needs at least the parameters and their gradients.
    with pytest.raises(ValueError, match=r"nothing fits in 1,024 bytes: the step at n=1, .* needs [\d,]+ bytes") as e:
        peakmem.max_batch_size(MLP(), lambda b: (torch.randn(b, 256),), 1024, loss_fn=mse_loss, method=method,
                               frontend="thunder")
    needed = int(re.search(r"needs ([\d,]+) bytes", str(e.value)).group(1).replace(",", ""))
    parameters = sum(p.numel() * p.element_size() for p in MLP().parameters())
    assert parameters == 2_102_272 and needed >= 2 * parameters


def test_bad_arguments(thunder):
    import torch

    import peakmem

    make = lambda b: (torch.randn(b, 256),)  # noqa: E731
    with pytest.raises(ValueError, match="needs a budget"):
        peakmem.max_batch_size(MLP(), make, None, loss_fn=mse_loss, frontend="thunder")
    with pytest.raises(ValueError, match="need 1 <= low <= high"):
        peakmem.max_batch_size(MLP(), make, "1GiB", low=4, high=2, loss_fn=mse_loss, frontend="thunder")
    with pytest.raises(ValueError, match="optimizer RMSprop is not modelled yet"):
        peakmem.max_batch_size(MLP(), make, "1GiB", loss_fn=mse_loss,
                               optimizer=torch.optim.RMSprop, frontend="thunder")


def test_progress_shows_each_size_traced_and_judged_on_stderr(thunder, capsys):
    import torch

    import peakmem

    torch.manual_seed(0)
    model = MLP()
    setup = {"loss_fn": mse_loss, "optimizer": torch.optim.AdamW, "steps": 2}
    budget = peakmem.measure_step(model, torch.randn(37, 256), **setup,
                                  frontend="thunder").peak_bytes  # batch 37 measured
    capsys.readouterr()
    r = peakmem.max_batch_size(copy.deepcopy(model).to("meta"), lambda b: (torch.randn(b, 256, device="meta"),),
                               budget, high=64, **setup, frontend="thunder")  # progress: on by default
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("max_batch_size: ") for line in lines), lines
    traced = [int(m.group(1)) for m in map(re.compile(r"max_batch_size: n=(\d+): traced in [\d.]+ s$").match, lines)
              if m]
    assert traced == [2, 3, 4]  # the formula's three sizes, in order
    judged = [(int(m.group(1)), int(m.group(2).replace(",", "")), m.group(3) == "fits") for m in map(
        re.compile(r"max_batch_size: n=(\d+): peak ([\d,]+) bytes, (fits|does not fit) in [\d,]+ \(simulated").match,
        lines) if m]
    # Doubling from 2 up to high=64 (all fit: 37 is the measured answer),
    # then bisection between 32 and 64: 48, 40, 36, 38, 37.
    assert [n for n, _, _ in judged] == [2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    assert all(fits == (n <= 37) == (peak <= budget) for n, peak, fits in judged)
    assert re.fullmatch(rf"max_batch_size: n=37 is the largest that fits \({budget:,} bytes\); 3 Thunder traces, "
                        r"11 sizes tried, [\d.]+ s", lines[-1]), lines[-1]
    assert r.batch_size == 37


def test_progress_goes_to_a_callable_or_nowhere(thunder, capsys):
    import torch

    import peakmem

    make = lambda b: (torch.randn(b, 256, device="meta"),)  # noqa: E731
    got: list[str] = []
    meta = MLP().to("meta")
    r = peakmem.max_batch_size(meta, make, "1GiB", high=4, loss_fn=mse_loss, method="search", progress=got.append,
                               frontend="thunder")
    assert [line.split(":")[1].strip() for line in got if "tracing" in line] == ["n=1", "n=2", "n=4"]
    assert r.batch_size == 4 and "traced in" in got[1] and capsys.readouterr().err == ""
    peakmem.max_batch_size(meta, make, "1GiB", high=4, loss_fn=mse_loss, method="search", progress=False,
                           frontend="thunder")
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="progress must be True, False or a callable"):
        peakmem.max_batch_size(meta, make, "1GiB", loss_fn=mse_loss, progress="yes", frontend="thunder")
