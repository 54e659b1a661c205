"""One program, traced by Thunder, measured by PyTorch, predicted by peakmem.

`run_source` compiles a program given as Python source (a function `prog`),
runs it under `thunder.jit` on the CPU with float32 inputs that require grad,
and, when an output is differentiable, runs backward on the sum of the
outputs. For the forward and the backward execution trace it compares the
measured peak and final bytes (`peakmem.measure`, the truth) with the runtime
model's prediction from the live trace and from the trace's printed text.
`check` turns a disagreement into a `Mismatch`, the failure Hypothesis
shrinks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Outcome:
    kind: str  # "fw" or "bw"
    measured: tuple[int, int]  # (peak bytes, final bytes)
    predicted_live: tuple[int, int]
    predicted_text: tuple[int, int]

    @property
    def ok(self) -> bool:
        return self.predicted_live == self.measured and self.predicted_text == self.measured

    def describe(self) -> str:
        return (f"{self.kind}: measured (peak, final) {self.measured}, predicted from the live trace "
                f"{self.predicted_live}, from its text {self.predicted_text}")


class Mismatch(AssertionError):
    """The runtime model disagreed with measurement on one trace of `source`."""

    def __init__(self, source: str, input_shapes: list[list[int]], outcome: Outcome) -> None:
        super().__init__(f"{outcome.describe()}\n{source}")
        self.source = source
        self.input_shapes = input_shapes
        self.outcome = outcome

    def regression_case(self) -> dict[str, Any]:
        """The case in tests/data/regressions/ form."""
        return {"found_by": "difftest (Hypothesis, shrunk)", "mismatch": self.outcome.describe(),
                "inputs": self.input_shapes, "source": self.source}


# Separate types so that Hypothesis treats a forward and a backward
# disagreement as distinct failures and shrinks each on its own.
class ForwardMismatch(Mismatch):
    pass


class BackwardMismatch(Mismatch):
    pass


def _compile(source: str):
    namespace: dict[str, Any] = {}
    exec(compile(source, "<difftest>", "exec"), namespace)
    return namespace["prog"]


def run_source(source: str, input_shapes: list[list[int]], seed: int = 0) -> list[Outcome]:
    """Traces, measures and predicts one program; one Outcome per trace."""
    from peakmem._thunder_compat import import_thunder

    thunder = import_thunder()
    import torch

    import peakmem

    fn = _compile(source)
    gen = torch.Generator().manual_seed(seed)
    args = [torch.randn(tuple(shape), generator=gen, dtype=torch.float32).requires_grad_(True)
            for shape in input_shapes]
    jf = thunder.jit(fn)
    out = jf(*args)
    outs = out if isinstance(out, tuple) else (out,)
    traces = [("fw", thunder.last_traces(jf)[-1])]
    diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    if diff:
        sum(o.float().sum() for o in diff).backward()
        bw = thunder.last_backward_traces(jf)
        if bw:
            traces.append(("bw", bw[-1]))
    outcomes = []
    for kind, trc in traces:
        m = peakmem.measure(trc)
        live = peakmem.analyze(trc, memory_model="runtime")
        text = peakmem.analyze(str(trc) + "\n", memory_model="runtime")
        outcomes.append(Outcome(kind, (m.peak_bytes, m.final_bytes), (live.peak_bytes, live.final_bytes),
                                (text.peak_bytes, text.final_bytes)))
    return outcomes


def check(source: str, input_shapes: list[list[int]]) -> list[Outcome]:
    """run_source, raising ForwardMismatch or BackwardMismatch (the forward
    first) when a prediction differs from measurement."""
    outcomes = run_source(source, input_shapes)
    assert outcomes, "nothing was traced"
    for o in outcomes:
        if not o.ok:
            raise (ForwardMismatch if o.kind == "fw" else BackwardMismatch)(source, input_shapes, o)
    return outcomes
