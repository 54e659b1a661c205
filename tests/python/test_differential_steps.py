"""Differential testing of whole training steps (difftest/steps.py): random
modules, losses, optimizers, step counts and zero_grad settings;
estimate_step must equal measure_step, peak and final, to the byte.

200 programs in SHARDS tests of fixed seeds (every run tests the same
programs; separate tests so that pytest-xdist's workers share them). The
long run is `python -m tests.python.difftest --steps --count 2000` from the
repository root (docs/manual.md, "Testing").
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, note, seed, settings

from difftest.steps import check_step, step_programs

SHARDS = 10
PER_SHARD = 20  # 200 programs


def _shard(k: int):
    @seed(20261201 + k)
    @settings(max_examples=PER_SHARD, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(program=step_programs())
    def run(program, thunder):
        source = program.source()
        note(source)
        check_step(source)

    return run


@pytest.mark.parametrize("k", range(SHARDS))
def test_random_steps(k, thunder):
    _shard(k)(thunder=thunder)
