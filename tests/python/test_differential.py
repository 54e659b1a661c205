"""Differential testing against real PyTorch (python/peakmem/difftest.py).

Random programs, traced by Thunder on the CPU, measured by peakmem.measure
and predicted by the runtime model from the live trace and from its printed
text; forward and, where differentiable, backward. The long run is
`python -m peakmem.difftest --count 5000 --seed 100000` (see README).

The regression cases in tests/data/regressions/ are mismatches the tester
(or the corpus) found once; each is re-measured and re-predicted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from peakmem import difftest

REGRESSIONS = sorted((Path(__file__).resolve().parents[1] / "data" / "regressions").glob("*.json"))
SHORT_RUN = 200


def test_short_differential_run(thunder):
    traced = 0
    failures = []
    for seed in range(SHORT_RUN):
        result = difftest.run_program(difftest.generate(seed))
        assert result.error is None, f"seed {seed} did not trace: {result.error}\n{result.program.source()}"
        traced += 1
        for o in result.mismatches:
            failures.append(
                f"seed {seed} {o.kind}: measured {o.measured}, predicted live {o.predicted_live}, "
                f"text {o.predicted_text}\n{result.program.source()}"
            )
    assert traced == SHORT_RUN
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression_case(case, thunder):
    data = json.loads(case.read_text())
    inputs = [difftest.Var(f"x{i}", tuple(shape)) for i, shape in enumerate(data["inputs"])]
    outcomes = difftest.run_source(data["source"], inputs)
    assert outcomes, "nothing was traced"
    for o in outcomes:
        assert o.ok, f"{case.name} {o.kind}: measured {o.measured}, live {o.predicted_live}, text {o.predicted_text}"

