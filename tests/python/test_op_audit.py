"""The op audit (peakmem.op_audit, scripts/audit_ops.py) in CI: every op call
of every corpus and zoo trace, and the grid's single-op programs at one
shape in float32, contiguous and transposed, on 2 threads, must be exact
call by call (the bytes a call leaves and the highest it climbs inside,
measured by the profiler, equal the runtime model's), except the ops in
KNOWN_GAPS; a call the model does not cover must show as a miss. The full grid (two
shapes, float32 and bfloat16, four layouts, 1 and 2 threads) is the long
run `scripts/audit_ops.py`, whose table is docs/op-audit.md.
"""

from __future__ import annotations

import pytest

from conftest import corpus_programs
from peakmem import op_audit

# (case, layout) pairs of the CI grid: the layouts each case takes.
CASES = [(c, layout) for c in op_audit.GRID for layout in ("contiguous", "transposed") if layout in c.layouts]


def _misses(audit: op_audit.TraceAudit) -> list[op_audit.CallAudit]:
    return [c for c in audit.calls + audit.unattributed if not c.exact]


def test_the_audit_measures_a_call_as_derived_by_hand():
    # a * 0.5 on f32[8, 6]: the output (192 bytes) stays; inside the call the
    # binding wraps 0.5 as a double (8) and TensorIterator casts it to f32
    # (4), both freed before the call returns: net 192, rise 204. The
    # backward of sum(a * 0.5) multiplies the ones cotangent by 0.5 the
    # same way.
    case = op_audit.OpCase("mul scalar", "a * 0.5")
    results = op_audit.audit_program(case, (8, 6), "float32", "contiguous", 2)
    assert [r.error for r in results] == ["", ""]
    fw = [c for c in results[0].audit.calls if c.op == "mul"]
    assert [c.measured for c in fw] == [(192, 204)]
    assert all(c.exact for c in fw)


def test_the_audit_sees_what_the_model_does_not_count():
    # A convolution padded past what oneDNN's direct kernel takes (3x3,
    # padding 3) runs its GEMM convolution, whose im2col buffer the model
    # does not count (it says so in the diagnostics): the audit must report
    # the call as inexact, with more measured inside the call than predicted.
    case = op_audit.OpCase("conv2d gemm", "F.conv2d(a, b, padding=3)",
                           ("torch.randn(2, 8, 8, 6, generator=gen)", "torch.randn(8, 8, 3, 3, generator=gen)"),
                           backward=False)
    results = op_audit.audit_program(case, (8, 6), "float32", "contiguous", 2)
    convs = [c for r in results for c in r.audit.calls if c.op in ("convolution", "conv2d")]
    assert convs and all(not c.exact and c.measured[1] > c.predicted[1] for c in convs)


@pytest.mark.parametrize("case,layout", CASES, ids=[f"{c.op}-{layout}" for c, layout in CASES])
def test_grid_case_is_exact_call_by_call(case, layout):
    results = op_audit.audit_program(case, (8, 6), "float32", layout, 2)
    errors = [r.error for r in results if r.error]
    assert not errors, errors
    misses = [c for r in results for c in _misses(r.audit) if c.op not in op_audit.KNOWN_GAPS]
    assert not misses, "\n".join(f"{c.source}: measured {c.measured}, predicted {c.predicted}" for c in misses)


@pytest.mark.parametrize("program", corpus_programs())
def test_every_call_of_a_corpus_or_zoo_trace_is_exact(program, live_corpus):
    for kind, trace in live_corpus(program).items():
        if trace is None:
            continue
        misses = [c for c in _misses(op_audit.audit_trace(trace)) if c.op not in op_audit.KNOWN_GAPS]
        assert not misses, f"{program} {kind}:\n" + "\n".join(
            f"{c.source}: measured {c.measured}, predicted {c.predicted}" for c in misses)


# A rank of the distributed corpus per kind of collective (FSDP: all-gather,
# reduce-scatter, wait; DDP: all-reduce) and the DTensor programs on an
# uneven shard, each re-traced in its own process under the fake process
# group (scripts/audit_ops.py's DISTRIBUTED_RANKS has the rest).
RANKS = [("distributed", "fsdp-zero2", 2, 1), ("distributed", "ddp", 2, 1), ("dtensor", "", 4, 3)]


@pytest.mark.parametrize("corpus,strategy,world_size,rank", RANKS,
                         ids=[f"{c}-{s or 'programs'}-ws{w}-rank{r}" for c, s, w, r in RANKS])
def test_every_call_of_a_distributed_rank_is_exact(corpus, strategy, world_size, rank):
    import sys

    from conftest import REPO

    sys.path.insert(0, str(REPO / "scripts"))
    import audit_ops

    audits = audit_ops.distributed_audits(corpus, strategy, world_size, rank)
    ops = {c.op for _, _, a in audits for c in a.calls}
    assert audits and ops & {"torch_all_gather_prim_impl", "torch_all_reduce_prim_impl", "dtensor_mul_prim"}
    misses = [(where, c) for where, _, a in audits for c in _misses(a) if c.op not in op_audit.KNOWN_GAPS]
    assert not misses, "\n".join(f"{w}: {c.source}: measured {c.measured}, predicted {c.predicted}" for w, c in misses)
