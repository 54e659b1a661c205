"""Differential testing of whole training steps (difftest/steps.py): random
modules, losses, optimizers, step counts and zero_grad settings;
estimate_step must equal measure_step, peak and final, to the byte, on
Thunder's front end and on the eager one.

160 programs (40 on the eager front end) in SHARDS tests of fixed seeds (every run tests the same
programs; separate tests so that pytest-xdist's workers share them). The
long run is `python -m tests.python.difftest --steps --count 2000
[--frontend eager]` from the repository root (docs/manual.md, "Testing").
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, note, seed, settings

from difftest.steps import check_step, step_programs

SHARDS = 8
PER_SHARD = 20  # 160 programs on Thunder's front end
EAGER_SHARDS = 2  # and 40 on the eager one, with the first 2 shards' seeds


def _shard(k: int, frontend: str = "thunder"):
    @seed(20261201 + k)
    @settings(max_examples=PER_SHARD, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(program=step_programs())
    def run(program, thunder):
        source = program.source()
        note(source)
        # The eager front end names in its diagnostics each statement whose
        # kernel's allocation it does not count (bf16 layer-norm backward's
        # partial sums, say): there, and only there, it may differ.
        check_step(source, frontend, flagged_may_differ=frontend == "eager")

    return run


@pytest.mark.parametrize("k", range(SHARDS))
def test_random_steps(k, thunder):
    _shard(k)(thunder=thunder)


@pytest.mark.parametrize("k", range(EAGER_SHARDS))
def test_random_steps_on_the_eager_front_end(k, thunder):
    _shard(k, "eager")(thunder=thunder)
