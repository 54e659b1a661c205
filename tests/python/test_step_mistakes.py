"""Mistakes a new user makes with estimate_step, each refused before Thunder
traces, with an error naming the cause and the fix, and the fix then giving
the measured step."""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F


class Regressor(torch.nn.Module):
    """A model whose forward takes the targets too, as the fix says (unused: the loss reads them)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, x, targets=None):
        return self.net(x)


def test_targets_captured_by_a_loss_fn_closure_are_named_not_taken_for_tied_weights(thunder):
    import peakmem

    torch.manual_seed(0)
    model, x, y = Regressor(), torch.randn(8, 16), torch.randn(8, 4)

    def make_loss(targets):
        return lambda output, x: F.mse_loss(output, targets)

    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"loss_fn reads a tensor that is not an input of the step: `targets` "
                                         r"\(shape \(8, 4\), captured by its closure\).*Pass it as an input"):
        peakmem.estimate_step(model, x, loss_fn=make_loss(y), frontend="thunder")
    assert time.perf_counter() - start < 1.0  # refused before Thunder traces
    # The fix the error gives: the targets an input, the loss reading them as one.
    fixed = {"loss_fn": lambda output, x, targets: F.mse_loss(output, targets), "optimizer": torch.optim.SGD,
             "model_inputs": 1}
    estimate = peakmem.estimate_step(model, x, y, **fixed, frontend="thunder")
    measured = peakmem.measure_step(model, x, y, **fixed, frontend="thunder")
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_targets_captured_by_a_closure_are_named_on_the_eager_front_end():
    # Recorded on meta stand-ins, the step cannot mix in a real tensor from
    # outside: named, with the fix, instead of torch's device error.
    import peakmem

    model, x, y = Regressor(), torch.randn(8, 16), torch.randn(8, 4)
    with pytest.raises(ValueError, match=r"loss_fn reads a tensor that is not an input of the step: `y` "
                                         r"\(shape \(8, 4\), captured by its closure\).*meta stand-ins.*"
                                         r"Pass it as an input"):
        peakmem.estimate_step(model, x, loss_fn=lambda output, x: F.mse_loss(output, y), frontend="eager")
    fixed = {"loss_fn": lambda output, x, targets: (output - targets).pow(2).sum(), "frontend": "eager",
             "model_inputs": 1}
    estimate = peakmem.estimate_step(model, x, y, **fixed)
    measured = peakmem.measure_step(model, x, y, **fixed)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_a_tensor_bound_by_functools_partial_is_named():
    import functools

    import peakmem

    y = torch.randn(8, 4)
    with pytest.raises(ValueError, match=r"`target` \(shape \(8, 4\), bound by functools.partial\)"):
        peakmem.estimate_step(Regressor(), torch.randn(8, 16),
                              loss_fn=functools.partial(lambda output, x, target: F.mse_loss(output, target),
                                                        target=y), frontend="thunder")


def test_an_optimizer_instance_is_told_to_pass_the_class_with_its_settings():
    import peakmem

    model = Regressor()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, betas=(0.8, 0.99))
    with pytest.raises(TypeError) as e:
        peakmem.estimate_step(model, torch.randn(8, 16), optimizer=optimizer,
                              loss_fn=lambda output, x: output.pow(2).mean(), frontend="thunder")
    # AdamW's defaults are lr=0.001, betas=(0.9, 0.999): the two set differently are the kwargs.
    assert str(e.value) == (
        "optimizer= takes the optimizer's class, not an instance (got an instance of AdamW): peakmem makes "
        "the optimizer for the traced step itself; pass optimizer=torch.optim.AdamW, "
        "optimizer_kwargs={'lr': 0.01, 'betas': (0.8, 0.99)}")


def test_a_cpu_model_with_meta_inputs_is_refused_at_once_naming_both_devices(thunder):
    import peakmem

    torch.manual_seed(0)
    model, x = Regressor(), torch.randn(8, 16)
    loss = {"loss_fn": lambda output, x: output.pow(2).mean()}
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"the model's parameters are on cpu but input 0 \(shape \(8, 16\)\) is "
                                         r"on meta: .* put the model on meta too \(model.to\('meta'\)"):
        peakmem.estimate_step(model, x.to("meta"), **loss, frontend="thunder")
    assert time.perf_counter() - start < 1.0
    with pytest.raises(ValueError, match=r"parameters are on meta but input 0 .* is on cpu: .* make the inputs "
                                         r"on meta, or move the model with model.to\('cpu'\)"):
        peakmem.estimate_step(Regressor().to("meta"), x, **loss, frontend="thunder")
    # The fix: the model on meta too; the estimate is the step measured on the CPU.
    import copy

    on_meta = peakmem.estimate_step(copy.deepcopy(model).to("meta"), x.to("meta"), **loss, frontend="thunder")
    measured = peakmem.measure_step(model, x, **loss, frontend="thunder")
    assert (on_meta.peak_bytes, on_meta.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_a_forward_returning_a_tuple_gets_a_hint_to_pass_loss_fn():
    import peakmem

    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            return y, y.detach()

    with pytest.raises(ValueError, match=r"the loss must be a tensor; the step returned a tuple \(the model's "
                                         r"output: pass loss_fn=lambda output, \*inputs: \.\.\."):
        peakmem.estimate_step(Pair(), torch.randn(2, 4), frontend="eager")


def test_a_size_without_a_unit_is_refused_and_an_int_is_bytes():
    import peakmem

    model, x = torch.nn.Linear(16, 4), torch.randn(8, 16)
    loss = lambda output, x: output.sum()  # noqa: E731
    with pytest.raises(ValueError, match=r"budget='80' has no unit: give a size such as 80GiB.*budget=80\)"):
        peakmem.estimate_step(model, x, loss_fn=loss, budget="80")
    with pytest.raises(ValueError, match=r"device_memory='1.5' has no unit"):
        peakmem.estimate_step(model, x, loss_fn=loss, allocator="cuda-caching", device_memory="1.5")
    with pytest.raises(ValueError, match="has no unit"):
        peakmem.max_batch_size(model, lambda n: (torch.randn(n, 16),), "80", loss_fn=loss, progress=False)
    # An int is bytes; a size with its unit is read as written (80 GiB = 80 x 2^30 bytes).
    assert peakmem.estimate_step(model, x, loss_fn=loss, budget=80).budget == 80
    assert peakmem.estimate_step(model, x, loss_fn=loss, budget="80GiB").budget == 80 * 2**30


def test_targets_go_to_the_loss_alone_with_model_inputs(thunder):
    # An nn.Sequential cannot take the targets: model_inputs=1 calls
    # model(x) and loss_fn(output, x, y). The estimate is the measured step
    # on both front ends, and the largest batch takes the option too.
    import peakmem

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    loss = lambda output, x, y: F.cross_entropy(output, y)  # noqa: E731
    for frontend in ("eager", "thunder"):
        options = {"loss_fn": loss, "model_inputs": 1, "optimizer": torch.optim.AdamW, "frontend": frontend}
        estimated = peakmem.estimate_step(model, x, y, **options)
        measured = peakmem.measure_step(model, x, y, **options)
        assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)
        assert estimated.by_category["inputs"] == x.nbytes + y.nbytes  # the targets are the step's inputs
    found = peakmem.max_batch_size(model, lambda n: (torch.randn(n, 16), torch.randint(0, 4, (n,))), "64KiB",
                                   high=64, loss_fn=loss, model_inputs=1, frontend="eager", progress=False)
    assert found.report.peak_bytes <= 64 * 1024 and 1 <= found.batch_size <= 64
    # Without the option the model is given the targets too, and says so.
    with pytest.raises(TypeError):
        peakmem.estimate_step(model, x, y, loss_fn=loss, frontend="eager")
    with pytest.raises(ValueError, match="model_inputs= leaves inputs to the loss alone: it needs loss_fn="):
        peakmem.estimate_step(model, x, y, model_inputs=1)
    with pytest.raises(ValueError, match="model_inputs=3 but the step has 2 inputs"):
        peakmem.estimate_step(model, x, y, loss_fn=loss, model_inputs=3)
