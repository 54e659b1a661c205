"""Random training steps: a module, a loss, an optimizer and a step count,
estimated by peakmem.estimate_step and measured by peakmem.measure_step.

A `StepProgram` prints as Python source (a `Model` class, `inputs()` and the
step's setup) so that a shrunk failure reads, and replays, as a program.
The module is a stack drawn from the layers real models are made of:
linear layers (with or without bias, some frozen), LayerNorm, activations,
residual branches, an optional token embedding in front; the loss is a sum,
a mean of squares or a cross-entropy against integer targets; the optimizer
is none, SGD, Adam or AdamW with options drawn from what peakmem models
(foreach=True among them: the foreach implementation);
1 to 3 steps, with or without zero_grad; float32 or bfloat16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

ACTIVATIONS = ("relu", "gelu", "tanh", "silu")
TOKENS = [0, 0, 4]

OPTIMIZERS = {
    "SGD": st.fixed_dictionaries({"lr": st.just(0.01)}, optional={
        "momentum": st.sampled_from([0.0, 0.9]), "weight_decay": st.sampled_from([0.0, 1e-2]),
        "maximize": st.booleans(), "foreach": st.booleans()}),
    "Adam": st.fixed_dictionaries({}, optional={
        "weight_decay": st.sampled_from([0.0, 1e-2]), "amsgrad": st.booleans(),
        "maximize": st.booleans(), "foreach": st.booleans()}),
    "AdamW": st.fixed_dictionaries({}, optional={"amsgrad": st.booleans(),
                                                 "maximize": st.booleans(), "foreach": st.booleans()}),
}


@dataclass(frozen=True)
class StepProgram:
    layers: tuple            # ("linear", out, bias, frozen) | ("norm",) | ("act", name) | ("residual", name)
    batch: int
    features: int
    tokens: int              # 0: float inputs (batch, features); else (batch, tokens) ids, embedded
    loss: str                # "sum", "mse" or "cross_entropy"
    dtype: str               # "float32" or "bfloat16"
    optimizer: str | None
    optimizer_kwargs: dict
    steps: int
    zero_grad: bool

    def source(self) -> str:
        init, body = [], []
        width = self.features
        if self.tokens:
            init.append(f"self.embed = nn.Embedding(64, {width})")
            body.append("h = self.embed(x)")
        else:
            body.append("h = x")
        for i, layer in enumerate(self.layers):
            kind = layer[0]
            if kind == "linear":
                _, out, bias, frozen = layer
                init.append(f"self.l{i} = nn.Linear({width}, {out}, bias={bias})")
                if frozen:
                    init.append(f"self.l{i}.requires_grad_(False)")
                body.append(f"h = self.l{i}(h)")
                width = out
            elif kind == "norm":
                init.append(f"self.l{i} = nn.LayerNorm({width})")
                body.append(f"h = self.l{i}(h)")
            elif kind == "act":
                body.append(f"h = F.{layer[1]}(h)")
            else:  # residual
                init.append(f"self.l{i} = nn.Linear({width}, {width})")
                body.append(f"h = h + self.l{i}(F.{layer[1]}(h))")
        body.append({"sum": "return h.sum()", "mse": "return h.pow(2).mean()",
                     "cross_entropy": "return F.cross_entropy(h.reshape(-1, h.shape[-1]), y.reshape(-1))"}
                    [self.loss])
        shape = (self.batch, self.tokens) if self.tokens else (self.batch, self.features)
        x = (f"torch.randint(0, 64, {shape}, generator=g)" if self.tokens else
             f"torch.randn({shape}, generator=g).to(torch.{self.dtype})")
        y = f"torch.randint(0, {width}, {shape[:1] if not self.tokens else shape}, generator=g)"
        optimizer = "None" if self.optimizer is None else f"torch.optim.{self.optimizer}"
        lines = [
            "import torch", "import torch.nn as nn", "import torch.nn.functional as F", "",
            "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()",
            *[f"        {line}" for line in init],
            "", "    def forward(self, x, y):", *[f"        {line}" for line in body], "",
            f"DTYPE = torch.{self.dtype}", "",
            "def inputs():", "    g = torch.Generator().manual_seed(0)", f"    return ({x}, {y})", "",
            f"SETUP = {{'optimizer': {optimizer}, 'optimizer_kwargs': {self.optimizer_kwargs!r}, "
            f"'steps': {self.steps}, 'zero_grad': {self.zero_grad}}}",
        ]
        return "\n".join(lines) + "\n"


@st.composite
def _layers(draw, features: int) -> tuple:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["linear", "linear", "norm", "act", "residual"]))
        if kind == "linear":
            out.append(("linear", draw(st.sampled_from([8, 16, 24, 32])), draw(st.booleans()),
                        draw(st.integers(0, 5)) == 0))
        elif kind == "norm":
            out.append(("norm",))
        else:
            out.append((kind, draw(st.sampled_from(ACTIVATIONS))))
    if not any(layer[0] in ("linear", "residual") and not (layer[0] == "linear" and layer[3])
               for layer in out):
        out.append(("linear", 8, True, False))  # something to train
    return tuple(out)


@st.composite
def step_programs(draw) -> StepProgram:
    features = draw(st.sampled_from([8, 16, 32]))
    optimizer = draw(st.sampled_from([None, "SGD", "Adam", "AdamW"]))
    return StepProgram(
        layers=draw(_layers(features)), batch=draw(st.integers(1, 16)), features=features,
        tokens=draw(st.sampled_from(TOKENS)), loss=draw(st.sampled_from(["sum", "mse", "cross_entropy"])),
        dtype=draw(st.sampled_from(["float32", "float32", "bfloat16"])), optimizer=optimizer,
        optimizer_kwargs=draw(OPTIMIZERS[optimizer]) if optimizer else {},
        steps=draw(st.integers(1, 3)), zero_grad=draw(st.booleans()))


class StepMismatch(AssertionError):
    """estimate_step disagreed with measure_step on one step program."""

    def __init__(self, source: str, measured: tuple[int, int], estimated: tuple[int, int]) -> None:
        super().__init__(f"step: measured (peak, final) {measured}, estimated {estimated}\n{source}")
        self.source = source


def run_step_source(source: str, frontend: str = "thunder",
                    diagnostics: list | None = None) -> tuple[tuple[int, int], tuple[int, int]]:
    """(measured, estimated) (peak, final) of the step a StepProgram's source
    describes, on `frontend` ("thunder" or "eager"); the estimate's
    diagnostics appended to `diagnostics` when given."""
    import torch

    import peakmem

    namespace: dict[str, Any] = {}
    exec(compile(source, "<difftest step>", "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Model"]().to(namespace["DTYPE"])
    inputs = namespace["inputs"]()
    setup = namespace["SETUP"]
    m = peakmem.measure_step(model, *inputs, **setup, frontend=frontend)
    e = peakmem.estimate_step(model, *inputs, **setup, frontend=frontend)
    if diagnostics is not None:
        diagnostics.extend(e.report.diagnostics)
    return (m.peak_bytes, m.final_bytes), (e.peak_bytes, e.final_bytes)


def flags_a_statement(diagnostics: list) -> bool:
    """Whether a diagnostic names one statement whose op's allocation is not
    counted (``statement N (op): ... not counted``, or ``not modelled``): the
    estimate says where it is unsure. The list of ops missing from the
    registry, which most eager steps carry, does not count."""
    return any(d.startswith("statement ") and ("not counted" in d or "not modelled" in d) for d in diagnostics)


def check_step(source: str, frontend: str = "thunder", flagged_may_differ: bool = False) -> None:
    """StepMismatch unless the estimate equals the measurement; with
    `flagged_may_differ`, a difference is allowed where the estimate flags a
    statement (flags_a_statement)."""
    diagnostics: list = []
    measured, estimated = run_step_source(source, frontend, diagnostics)
    if measured != estimated and not (flagged_may_differ and flags_a_statement(diagnostics)):
        raise StepMismatch(source, measured, estimated)
