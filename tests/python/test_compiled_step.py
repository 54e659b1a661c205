"""torch.compile'd steps (peakmem.step.inductor_replay, peakmem.step.compiled).

A module made by ``torch.compile`` is estimated from the programs Inductor
generates and checked against the compiled step run for real and measured
(``measure_step`` runs the user's own compiled module: Inductor compiles it
in the warm-up step, and the measured steps run its kernels). What is not
modelled is refused, never answered as the eager step: each other way a
model runs compiled code is named with where it is; code
torch._dynamo.disable runs eagerly is not compiled and is estimated as it
runs.
"""

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


class Block(torch.nn.Module):
    def __init__(self, d: int = 256):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)

    def forward(self, x):
        return torch.tanh(self.lin(x)) * torch.sigmoid(x) + torch.sin(x)


class Broken(torch.nn.Module):
    """Two compiled regions and the eager code between them: a graph break
    (torch._dynamo.graph_break) after the first block, and a tensor the
    eager code makes there."""

    def __init__(self, d: int = 128):
        super().__init__()
        self.first, self.second = MLP(d), MLP(d)

    def forward(self, x):
        y = self.first(x)
        torch._dynamo.graph_break()
        return self.second(y * 2 + 1)


def _sum(out, *_inputs):
    return out.sum()


def _compiled_and_measured(model, *inputs, **options):
    """(estimate, measurement) of the compiled model's step."""
    compiled = torch.compile(model)
    return (peakmem.estimate_step(compiled, *inputs, **options),
            peakmem.measure_step(compiled, *inputs, **options))


def test_a_compiled_block_is_its_programs_not_the_eager_step():
    # The 4-layer block of tanh(linear(x)) * sigmoid(x) + sin(x) on 2048 x 256
    # float32: compiled, the step is below the eager one (fused pointwise
    # chains keep fewer intermediates), and the estimate is the measurement.
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block() for _ in range(4)])
    x = torch.randn(2048, 256)
    estimate, measured = _compiled_and_measured(model, x, loss_fn=_sum)
    assert estimate.frontend == measured.frontend == "compile"
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    eager = peakmem.estimate_step(torch.compile(model), x, loss_fn=_sum, frontend="eager")
    assert eager.frontend == "eager"
    assert eager.peak_bytes == peakmem.measure_step(model, x, loss_fn=_sum).peak_bytes
    assert estimate.peak_bytes < eager.peak_bytes
    assert "Inductor's programs recorded (1 forward and 1 backward, of 1 compiled modules; 0 graph breaks" in \
        estimate.report.diagnostics[0]


def test_a_graph_break_is_two_programs_and_the_eager_code_between():
    torch.manual_seed(0)
    x = torch.randn(64, 128)
    estimate, measured = _compiled_and_measured(Broken(), x, loss_fn=_sum, optimizer=torch.optim.AdamW, steps=2)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    assert "(2 forward and 2 backward, of 1 compiled modules; 1 graph breaks" in estimate.report.diagnostics[0]


def test_a_convolution_net_takes_the_layouts_inductor_states():
    # Inductor lays a convolution's input channels-last on the CPU and
    # asserts the CPU kernel's output layout: the meta stand-ins take it.
    from step_models import SmallCNN, class_zero_loss

    torch.manual_seed(0)
    estimate, measured = _compiled_and_measured(SmallCNN(), torch.randn(8, 3, 32, 32), loss_fn=class_zero_loss,
                                                optimizer=torch.optim.SGD, optimizer_kwargs={"lr": 0.01})
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_transformers_models_compiled_on_the_cpu_and_on_meta(family):
    # GPT-2's forward breaks the graph once (Dynamo's own break in the
    # model's code); on meta the same programs are compiled (the graphs are
    # traced as the CPU runs them), so the meta estimate is the CPU one.
    import eager_models

    model, kwargs = eager_models.FAMILIES[family]("cpu")
    estimate, measured = _compiled_and_measured(model, kwinputs=kwargs, optimizer=torch.optim.AdamW)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    meta_model, meta_kwargs = eager_models.FAMILIES[family]("meta")
    on_meta = peakmem.estimate_step(torch.compile(meta_model), kwinputs=meta_kwargs, optimizer=torch.optim.AdamW)
    assert (on_meta.peak_bytes, on_meta.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_a_compile_that_fails_is_named():
    class FullGraphBreak(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = self.lin(x)
            torch._dynamo.graph_break()
            return y

    with pytest.raises(CompiledStepError, match=r"could not compile the step .*Unsupported: Call to "
                                                r"`torch._dynamo.graph_break\(\)`"):
        peakmem.estimate_step(torch.compile(FullGraphBreak(), fullgraph=True), torch.randn(4, 8), loss_fn=_sum)


def test_the_largest_batch_and_the_step_file_of_a_compiled_step(tmp_path):
    # max_batch_size records the compiled step at each size; the measured
    # compiled step at the size it finds fits the budget, one more does not.
    # export_step writes the compiled step's recording, and `peakmem step`
    # gives the measured step's figures from it.
    import json
    import subprocess

    from conftest import cli

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(64) for _ in range(2)])
    compiled = torch.compile(model)
    budget = 1 << 20
    found = peakmem.max_batch_size(compiled, lambda n: (torch.randn(n, 64),), budget, loss_fn=_sum, high=4096,
                                   progress=False)
    assert found.report.frontend == "compile"
    n = found.batch_size
    # The estimates' compiles leave the user's module alone: its first
    # compile, here, is of static shapes as without them.
    assert peakmem.measure_step(compiled, torch.randn(n, 64), loss_fn=_sum).peak_bytes <= budget
    torch._dynamo.reset()  # a second shape would compile dynamic shapes; n + 1 as a first compile
    assert peakmem.measure_step(compiled, torch.randn(n + 1, 64), loss_fn=_sum).peak_bytes > budget
    path = tmp_path / "compiled.json"
    x = torch.randn(256, 64)
    peakmem.export_step(compiled, x, loss_fn=_sum, optimizer=torch.optim.SGD, path=str(path))
    measured = peakmem.measure_step(compiled, x, loss_fn=_sum, optimizer=torch.optim.SGD)
    out = subprocess.run([cli(), "step", str(path), "--format", "json"], capture_output=True, text=True,
                         check=True).stdout
    report = json.loads(out)
    assert (report["peak_bytes"], report["final_bytes"]) == (measured.peak_bytes, measured.final_bytes)


def test_what_the_compile_front_end_does_not_model_is_refused():
    x = _x()
    with pytest.raises(CompiledStepError, match=r"backend 'aot_eager'"):
        peakmem.estimate_step(torch.compile(Net(), backend="aot_eager"), x)
    with pytest.raises(CompiledStepError, match="max_autotune"):
        peakmem.estimate_step(torch.compile(Net(), mode="max-autotune-no-cudagraphs"), x)
    with pytest.raises(CompiledStepError, match="modelled on the CPU only"):
        peakmem.estimate_step(torch.compile(Net()), x, device="cuda:h100")
    inner = Net()
    inner.block = torch.compile(inner.block)
    with pytest.raises(CompiledStepError, match=r"block is compiled inside a compiled module"):
        peakmem.estimate_step(torch.compile(inner), x)
    # Thunder traces the module itself: a compiled one is refused there.
    with pytest.raises(CompiledStepError, match=r"\(top\): made by torch.compile \(Net\)"):
        peakmem.estimate_step(torch.compile(Net()), x, frontend="thunder")
    with pytest.raises(ValueError, match="frontend='compile' records the programs of a model's torch.compile'd"):
        peakmem.estimate_step(Net(), x, frontend="compile")


def test_a_module_compiled_in_place_is_refused_on_both_front_ends():
    net = Net()
    net.block.compile()
    for frontend in ("eager", "thunder"):
        with pytest.raises(CompiledStepError, match=r"block: MLP.compile\(\) compiled it in place"):
            peakmem.estimate_step(net, _x(), frontend=frontend)


def test_compiled_blocks_are_their_programs_and_a_compiled_forward_is_named():
    # A block compiled by torch.compile and one compiled in place, inside a
    # model that runs eagerly around them: the compile front end records
    # each block's programs and the eager code between them.
    torch.manual_seed(0)
    model = torch.nn.Sequential(MLP(128), torch.nn.LayerNorm(128), MLP(128), MLP(128))
    model[0] = torch.compile(model[0])
    model[3].compile()
    x = torch.randn(64, 128)
    estimate = peakmem.estimate_step(model, x, loss_fn=_sum, optimizer=torch.optim.SGD)
    measured = peakmem.measure_step(model, x, loss_fn=_sum, optimizer=torch.optim.SGD)
    assert estimate.frontend == "compile"
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    assert "(2 forward and 2 backward, of 2 compiled modules" in estimate.report.diagnostics[0]
    # The user's model is not touched: its blocks are compiled as they were.
    assert type(model[0]).__name__ == "OptimizedModule" and model[3]._compiled_call_impl is not None
    assert model[1].weight.device.type == "cpu"
    # On the eager front end, said outright, compiled blocks are refused.
    with pytest.raises(CompiledStepError, match=r"0: made by torch.compile \(MLP\)"):
        peakmem.estimate_step(model, x, loss_fn=_sum, frontend="eager")
    with pytest.raises(CompiledStepError, match=r"CompiledForward.forward is a torch.compile'd function: a "
                                                r"compiled forward function is not modelled"):
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


@pytest.mark.long
@pytest.mark.parametrize("name", [e.name for e in __import__("step_models").ENTRIES])
def test_the_step_corpus_compiled(name):
    from step_models import ENTRIES

    entry = next(e for e in ENTRIES if e.name == name)
    torch.manual_seed(0)
    estimate, measured = _compiled_and_measured(entry.make(), *entry.inputs(), loss_fn=entry.loss_fn,
                                                **entry.setup)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
