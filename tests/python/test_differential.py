"""Differential testing against real PyTorch (the difftest package beside this file).

Random programs (Hypothesis strategies, difftest/programs.py), traced by
Thunder on the CPU, measured by peakmem.measure and predicted by the runtime
model from the live trace and from its printed text; forward and, where
differentiable, backward. Peak and final bytes must match exactly.

The sample here is derandomized: every run tests the same programs, so the
suite is deterministic (Hypothesis then keeps no example database; the long
run does). A failure is shrunk by Hypothesis and printed as a program. The
long run is `python -m tests.python.difftest --count 5000` from the
repository root (see docs/manual.md, "Testing").

The regression cases in tests/data/regressions/ are mismatches the tester
(or the corpus) found once; each is re-measured and re-predicted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings

import difftest

REGRESSIONS = sorted((Path(__file__).resolve().parents[1] / "data" / "regressions").glob("*.json"))
SHORT_RUN = 80


@settings(max_examples=SHORT_RUN, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(program=difftest.programs())
def test_random_programs(program, thunder):
    source = program.source()
    note(source)
    difftest.check(source, program.input_shapes)


@pytest.mark.parametrize("case", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression_case(case, thunder):
    data = json.loads(case.read_text())
    difftest.check(data["source"], data["inputs"])
