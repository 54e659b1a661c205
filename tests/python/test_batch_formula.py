"""max_batch_size by formula (peakmem.batch_formula): Thunder traces three
sizes, the step at every other size is derived and simulated. Its answer is
checked against the search's (a Thunder trace per size), against
estimate_step at the answer and one more, and against measurement; a step
whose program changes with the size falls back to the search, saying why."""

from __future__ import annotations

import pytest

from step_models import ADAMW, GPT, LlamaLM, _tokens


@pytest.fixture
def count_traces(monkeypatch):
    """How many times Thunder has traced a step since the test began: every
    step estimate_step, peak_formula and max_batch_size trace goes through
    step.tracing._step_program."""
    import peakmem.step.tracing

    calls = []
    real = peakmem.step.tracing._step_program

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(peakmem.step.tracing, "_step_program", counted)
    return lambda: len(calls)


def _tokens_on(device: str, seq: int = 128, batch: int | None = None):
    import torch

    def make(n: int) -> tuple:
        b, s = (n, seq) if batch is None else (batch, n)
        return tuple(t.to(device) for t in _tokens(batch=b, seq=s)) if device != "meta" else (
            torch.randint(0, 512, (b, s), device="meta"), torch.randint(0, 512, (b, s), device="meta"))

    return make


def _same_answer_as_the_search(make_model, budget, low, high, count_traces):
    import torch

    import peakmem

    with torch.device("meta"):
        model = make_model()
    setup = {**ADAMW, "steps": 2}
    make = _tokens_on("meta")
    before = count_traces()
    f = peakmem.max_batch_size(model, make, budget, low=low, high=high, **setup, frontend="thunder")
    assert count_traces() - before == f.traces == 3
    assert (f.method, f.reason) == ("formula", None)
    s = peakmem.max_batch_size(model, make, budget, low=low, high=high, method="search", **setup, frontend="thunder")
    assert s.method == "search" and s.traces == len(s.tried) > 3
    # A real bisection: the answer is strictly inside the range.
    assert low < f.batch_size == s.batch_size < high
    assert f.report.peak_bytes == s.report.peak_bytes <= budget and f.report.fits
    assert f.tried[f.batch_size + 1] == s.tried[s.batch_size + 1] > budget
    return f


def test_gpt_lm_the_formula_finds_the_searchs_batch_and_measurement_agrees(thunder, count_traces):
    import torch

    import peakmem

    budget = 95_000_000  # between the GPT LM's steps at batch 2 and 12 (AdamW, 2 steps)
    f = _same_answer_as_the_search(GPT, budget, 2, 12, count_traces)
    # The truth: the step run for real fits at the answer, and one more does not.
    torch.manual_seed(0)
    model = GPT()
    setup = {**ADAMW, "steps": 2}
    make = _tokens_on("cpu")
    assert peakmem.measure_step(model, *make(f.batch_size), **setup,
                                frontend="thunder").peak_bytes == f.report.peak_bytes
    assert peakmem.measure_step(model, *make(f.batch_size + 1), **setup, frontend="thunder").peak_bytes > budget


def test_llama_stack_the_formula_finds_the_searchs_batch(thunder, count_traces):
    # One block keeps each trace short; 36 MB lies between the step's peaks
    # at batch 2 and 12 (AdamW, 2 steps), which the search itself checks.
    _same_answer_as_the_search(lambda: LlamaLM(layers=1), 36_000_000, 2, 12, count_traces)


def test_gpt_lm_sequence_length(thunder, count_traces):
    """make_inputs scales the sequence (batch 2): attention's [B, H, S, S]
    scores are quadratic in S, each of their dimensions affine. The answer
    is checked against estimate_step (a Thunder trace each) at it and one
    more, and the derived step against Thunder's at a size far from the
    traced ones."""
    import torch

    import peakmem

    with torch.device("meta"):
        model = GPT()  # 128 positions: sequences up to 128
    setup = {**ADAMW, "steps": 2}
    make = _tokens_on("meta", batch=2)
    budget = 40_000_000
    before = count_traces()
    r = peakmem.max_batch_size(model, make, budget, high=128, **setup, frontend="thunder")
    assert count_traces() - before == r.traces == 3 and r.method == "formula"
    assert 4 < r.batch_size < 128
    at, above = (peakmem.estimate_step(model, *make(n), budget=budget, **setup, frontend="thunder")
                 for n in (r.batch_size, r.batch_size + 1))
    assert at.fits and at.peak_bytes == r.report.peak_bytes
    assert not above.fits and above.peak_bytes == r.tried[r.batch_size + 1]
    formula = peakmem.peak_formula(model, make, **setup)
    assert formula.verified and formula.sizes == (2, 3, 4)
    assert formula.peak_bytes(128) == peakmem.estimate_step(model, *make(128), **setup, frontend="thunder").peak_bytes


def _branching(rule):
    import torch
    import torch.nn as nn

    class Branching(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(64, 256)

        def forward(self, x):
            y = self.fc(x)
            if rule(x.shape[0]):
                y = torch.tanh(y)
            return y.pow(2).mean()

    return Branching()


@pytest.mark.parametrize("rule, says", [
    # Odd sizes run one more op: the traces at 2 and 3 already differ.
    (lambda n: n % 2 == 1, "differ otherwise than in integers"),
    # From 4 on: 2 and 3 agree and derive a formula, which 4 refutes.
    (lambda n: n >= 4, "derived for n=4"),
], ids=["odd-sizes", "from-4-on"])
def test_a_step_whose_program_changes_with_n_falls_back_to_the_search(thunder, count_traces, rule, says):
    import torch

    import peakmem

    model = _branching(rule).to("meta")

    def make(n):
        return (torch.randn(n, 64, device="meta"),)

    budget = 2_000_000
    searched = peakmem.max_batch_size(model, make, budget, high=512, method="search", frontend="thunder")
    before = count_traces()
    with pytest.warns(UserWarning, match="max_batch_size: .*" + says):
        r = peakmem.max_batch_size(model, make, budget, high=512, frontend="thunder")
    assert (r.method, says in r.reason) == ("search", True)
    # The traces the formula made are reused by the search, not traced again.
    assert r.traces == count_traces() - before == len(r.tried)
    assert (r.batch_size, r.report.peak_bytes) == (searched.batch_size, searched.report.peak_bytes)
    with pytest.raises(peakmem.batch_formula.StructureChanges, match=says) as e:
        peakmem.peak_formula(model, make)
    assert says in e.value.reason


def test_the_formula_is_the_traced_step_at_every_traced_size(thunder):
    """The derived step at a traced size is Thunder's, to the character
    (but the timing comment Thunder prints first)."""
    import torch

    import peakmem
    from peakmem.batch_formula import _HEADER
    from peakmem.step import TrainingStep
    from peakmem.step.tracing import _traced_program

    with torch.device("meta"):
        model = GPT(layers=1)
    make = _tokens_on("meta")
    formula = peakmem.peak_formula(model, make, verify=False, sizes=(2, 5))
    assert (formula.traces, formula.verified) == (2, False)
    for n in (2, 5, 3):
        program, _ = _traced_program(model, make(n), TrainingStep())
        derived = formula.program(n)
        assert derived.forward == _HEADER.sub("", str(program.forward))
        assert derived.backward == _HEADER.sub("", str(program.backward))
        assert derived.spec == program.spec
    with pytest.raises(ValueError, match="derived for n >= 2"):
        formula.program(1)


def test_bad_arguments(thunder):
    import torch

    import peakmem
    from step_models import MLP, mse_loss

    make = lambda b: (torch.randn(b, 256),)  # noqa: E731
    with pytest.raises(ValueError, match="method must be"):
        peakmem.max_batch_size(MLP(), make, "1GiB", loss_fn=mse_loss, method="guess", frontend="thunder")
    with pytest.raises(ValueError, match="sizes must be 3 distinct positive integers"):
        peakmem.max_batch_size(MLP(), make, "1GiB", loss_fn=mse_loss, sizes=(2, 2, 3), frontend="thunder")
    with pytest.raises(ValueError, match="sizes must be 2 distinct positive integers"):
        peakmem.peak_formula(MLP(), make, loss_fn=mse_loss, sizes=(2,), verify=False)
