"""A torch.compile'd step is refused, never answered as the eager step
(peakmem.step.compiled): compiling changes what the step allocates, and
peakmem does not model Inductor's program yet. Each way a model runs
compiled code is named with where it is; code torch._dynamo.disable runs
eagerly is not compiled and is estimated as it runs."""

from __future__ import annotations

import pytest
import torch

import peakmem
from peakmem.step.compiled import CompiledStepError


class MLP(torch.nn.Module):
    def __init__(self, d: int = 64):
        super().__init__()
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(torch.tanh(self.up(x)))


class Net(torch.nn.Module):
    def __init__(self, activation=torch.sin):
        super().__init__()
        self.block, self.activation = MLP(), activation

    def forward(self, x):
        return self.activation(self.block(x)).sum()


def _sin_times_two(x):
    return torch.sin(x) * 2


class CompiledForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(64, 64)

    @torch.compile
    def forward(self, x):
        return self.lin(x).sum()


def _x() -> torch.Tensor:
    return torch.randn(8, 64)


def test_a_module_compiled_by_torch_compile_is_refused():
    with pytest.raises(CompiledStepError, match=r"\(top\): made by torch.compile \(Net\)"):
        peakmem.estimate_step(torch.compile(Net()), _x())


def test_a_module_compiled_in_place_is_refused_on_both_front_ends():
    net = Net()
    net.block.compile()
    for frontend in ("eager", "thunder"):
        with pytest.raises(CompiledStepError, match=r"block: MLP.compile\(\) compiled it in place"):
            peakmem.estimate_step(net, _x(), frontend=frontend)


def test_a_compiled_submodule_and_a_compiled_forward_are_named():
    net = Net()
    net.block = torch.compile(net.block)
    with pytest.raises(CompiledStepError, match=r"block: made by torch.compile \(MLP\)"):
        peakmem.estimate_step(net, _x())
    with pytest.raises(CompiledStepError, match=r"CompiledForward.forward is a torch.compile'd function"):
        peakmem.estimate_step(CompiledForward(), _x())


def test_a_compiled_function_the_forward_calls_is_named_with_its_line():
    net = Net(activation=torch.compile(_sin_times_two))
    with pytest.raises(CompiledStepError, match=r"the step calls _sin_times_two \(.*test_compiled_step.py:\d+\)"):
        peakmem.estimate_step(net, _x())
    # Thunder interprets the compiled call itself: refused there too (its
    # interpreter hides the function's name).
    with pytest.raises(CompiledStepError, match="the step calls a compiled function"):
        peakmem.estimate_step(net, _x(), frontend="thunder")
    # Every entry point refuses, the largest batch among them.
    with pytest.raises(CompiledStepError):
        peakmem.max_batch_size(net, lambda b: (torch.randn(b, 64),), budget="1 GiB")
    # On meta too: the recording refuses before any kernel would run.
    with torch.device("meta"):
        meta_net = Net(activation=torch.compile(_sin_times_two))
    with pytest.raises(CompiledStepError, match="_sin_times_two"):
        peakmem.estimate_step(meta_net, torch.randn(8, 64, device="meta"))


def test_code_dynamo_is_told_to_skip_runs_eagerly_and_is_estimated():
    # torch._dynamo.disable's wrapper runs the function as it is: the step is
    # the eager one, so the estimate is the plain step's and the measurement's.
    torch.manual_seed(0)
    plain = Net(activation=_sin_times_two)
    wrapped = Net(activation=torch._dynamo.disable(_sin_times_two))
    wrapped.load_state_dict(plain.state_dict())
    x = _x()
    estimate = peakmem.estimate_step(wrapped, x)
    assert estimate.peak_bytes == peakmem.estimate_step(plain, x).peak_bytes
    assert estimate.peak_bytes == peakmem.measure_step(wrapped, x).peak_bytes
