"""peakmem.measure, the ground-truth harness, checked on hand-derived cases.

Every expected number below is derived by hand in a comment from the program
(whose exact trace body is asserted first, so the derivation's premise is
checked too), from the sizes of the tensors involved and from the calling
convention. Sizes: f32[4] = 4 elements * 4 B = 16 B; f64[4] = i64[4] = 32 B.

Known CPU kernel behaviour used in derivations (measured, then explained):
* A Python number passed to a tensor op (`torch.mul(x, 2.0)`) is wrapped by
  the Python binding into a 0-dim tensor before dispatch: 8 B (double for a
  float, int64 for an int). When the op's common dtype differs (an f32
  tensor), TensorIterator casts that wrapped input to the common dtype: a
  second, 4 B (f32) tensor. Order: wrapper, cast, then the output; after the
  kernel, the cast (-4) then the wrapper (-8) are freed. For an f64 or i64
  tensor no cast is needed: wrapper, output, -wrapper.
"""

from __future__ import annotations

import re
from collections.abc import MutableSequence
from itertools import accumulate
from types import SimpleNamespace

import pytest
import torch

import peakmem
from peakmem.measure import Measurement, detect_convention, make_inputs

F32_4 = 16  # bytes of an f32[4]


def body(trace) -> list[str]:
    """The statements of a printed trace's function body, comments dropped and
    Thunder's generated names `t<N>` renamed T0, T1, ... in order of appearance
    (their numbers depend on how much Thunder traced before)."""
    lines = str(trace).splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("def "))
    names: dict[str, str] = {}

    def rename(m: re.Match) -> str:
        return names.setdefault(m.group(0), f"T{len(names)}")

    out = []
    for line in lines[start + 1 :]:
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(re.sub(r"\bt\d+\b", rename, s.split("  #")[0].strip()))
    return out


def check_invariants(m: Measurement) -> None:
    assert m.events is not None
    assert sum(m.events) == m.final_bytes
    assert max([0, *accumulate(m.events)]) == m.peak_bytes
    assert m.ignored_free_bytes == 0


class FakeTrace:
    """The duck type measure() accepts: python_callable(), args, kwargs, siginfo()."""

    def __init__(self, fn, params, args=()):
        self._fn = fn
        self._params = params
        self.args = args
        self.kwargs = {}

    def python_callable(self):
        return self._fn

    def siginfo(self):
        return SimpleNamespace(args=[(p, None) for p in self._params], varargs=None)


def clear_mutable_collection(c):
    # Thunder's pythonex implementation: a no-op on a tuple.
    if isinstance(c, MutableSequence):
        c.clear()


# ---------------------------------------------------------------------------
# x * y * z, f32[4] inputs


@pytest.fixture(scope="module")
def xyz(jit_traces):
    def f(x, y, z):
        return x * y * z

    fw, bw = jit_traces(f, *(torch.randn(4, requires_grad=True) for _ in range(3)))
    assert body(fw) == [
        "T0 = torch.mul(x, y)",
        "T1 = torch.mul(T0, z)",
        "return {'output': (T1,), 'flat_args': [x, y, z], 'flat_output': (T1,)}, ((z, T0, y, x), ())",
    ]
    assert body(bw) == [
        "C0, C1, = saved_for_backward",
        "clear_mutable_collection(saved_for_backward)",
        "clear_mutable_collection(C1)",
        "del C1, saved_for_backward",
        "T0, = cotangents",
        "clear_mutable_collection(cotangents)",
        "del cotangents",
        "z, T1, y, x, = C0",
        "clear_mutable_collection(C0)",
        "del C0",
        "T2 = torch.mul(z, T0)",
        "del z",
        "T3 = torch.mul(T1, T0)",
        "del T1, T0",
        "T4 = torch.mul(y, T2)",
        "del y",
        "T5 = torch.mul(x, T2)",
        "del x, T2",
        "return (T4, T5, T3)",
    ]
    return fw, bw


def test_xyz_forward(xyz):
    fw, _ = xyz
    m = peakmem.measure(fw)
    check_invariants(m)
    assert m.convention == "forward"
    # Inputs x, y, z: 3 * 16 = 48 B, created first, one allocation each.
    # T0 = x*y: +16 -> 64; T1 = T0*z: +16 -> 80. No del in the trace.
    # The caller holds x, y, z and the returned T1 and T0 (saved for
    # backward): final = 80.
    assert m.input_bytes == 3 * F32_4
    assert m.events == (16, 16, 16, 16, 16)
    assert (m.peak_bytes, m.final_bytes) == (80, 80)


def test_xyz_backward_as_thunder_calls_it(xyz):
    _, bw = xyz
    assert detect_convention(bw) == "backward"
    m = peakmem.measure(bw)
    check_invariants(m)
    assert m.convention == "backward"
    # Inputs: saved z, T1, y, x and the cotangent T0: 5 * 16 = 80 B.
    # Thunder passes [saved_list, saved_other] and a cotangents list; the
    # trace clears both lists (and the nested C0), so each name is the only
    # owner of its tensor and every `del` frees:
    #   T2 = z*T0    +16 -> 96   (peak)
    #   del z         -16 -> 80
    #   T3 = T1*T0  +16 -> 96
    #   del T1, T0   -32 -> 64
    #   T4 = y*T2   +16 -> 80
    #   del y         -16 -> 64
    #   T5 = x*T2   +16 -> 80
    #   del x, T2    -32 -> 48   = T3, T4, T5 returned.
    assert m.input_bytes == 80
    assert m.events == (16,) * 5 + (16, -16, 16, -16, -16, 16, -16, 16, -16, -16)
    assert (m.peak_bytes, m.final_bytes) == (96, 48)
    # Thunder's own estimate never frees the saved tensors (the clear of the
    # nested, non-argument C0 is ignored): peak 128. peakmem's corpus keeps
    # both numbers (tests/data/corpus/xyz).


def test_xyz_backward_with_tuples_keeps_everything(xyz):
    _, bw = xyz
    # The same trace, every container a tuple the caller keeps:
    # clear_mutable_collection is a no-op, so `del z` etc. free nothing;
    # only T2, an intermediate owned by a name alone, dies at `del x, T2`.
    #   inputs 80; T2 +16 -> 96; T3 +16 -> 112; T4 +16 -> 128;
    #   T5 +16 -> 144 (peak); del x, T2: -16 (T2) -> 128.
    # Final: 80 (arguments, held) + T3, T4, T5 = 128.
    # (These are the 144 / 128 Thunder's estimate gave before the fix of
    # Thunder issue 1029: it counted the arguments as held.)

    def tuples():
        (saved_tensors, saved_other), cotangents = make_inputs(bw)[0]
        return (tuple(saved_tensors), tuple(saved_other)), tuple(cotangents)

    m = peakmem.measure(bw, convention="forward", inputs=tuples)
    check_invariants(m)
    assert m.events == (16,) * 5 + (16, 16, 16, 16, -16)
    assert (m.peak_bytes, m.final_bytes) == (144, 128)


def test_xyz_backward_cotangents_in_a_held_tuple(xyz):
    _, bw = xyz
    # Saved tensors in a list (cleared, so freed as they die) but the
    # cotangent T0 in a tuple the caller keeps: `del T1, T0` frees only T1.
    #   inputs 80; T2 +16 -> 96; del z -> 80; T3 +16 -> 96;
    #   del T1 -> 80; T4 +16 -> 96; del y -> 80; T5 +16 -> 96;
    #   del x, T2 -> 64 = T0 + T3 + T4 + T5.
    def mixed():
        (saved_tensors, saved_other), cotangents = make_inputs(bw)[0]
        return [list(saved_tensors), tuple(saved_other)], tuple(cotangents)

    m = peakmem.measure(bw, convention="forward", inputs=mixed)
    check_invariants(m)
    assert m.events == (16,) * 5 + (16, -16, 16, -16, 16, -16, 16, -16, -16)
    assert (m.peak_bytes, m.final_bytes) == (96, 64)


# ---------------------------------------------------------------------------
# del of intermediates, views, scalar wrappers


def test_del_frees_intermediates(jit_traces):
    def h(x, y):
        a = x * y
        b = a * y
        return b * x

    fw, _ = jit_traces(h, torch.randn(4), torch.randn(4))
    assert body(fw) == [
        "T0 = torch.mul(x, y)",
        "T1 = torch.mul(T0, y)",
        "del T0",
        "T2 = torch.mul(T1, x)",
        "del T1",
        "return (T2,)",
    ]
    m = peakmem.measure(fw)
    check_invariants(m)
    # x, y: 32; T0 +16 -> 48; T1 +16 -> 64 (peak); del T0 -> 48;
    # T2 +16 -> 64; del T1 -> 48 = x, y, T2.
    assert m.events == (16, 16, 16, 16, -16, 16, -16)
    assert (m.peak_bytes, m.final_bytes) == (64, 48)


def test_expand_keeps_its_base_storage(jit_traces):
    def e(x, y):
        return (x * y).unsqueeze(0).expand(3, 4)

    fw, _ = jit_traces(e, torch.randn(4), torch.randn(4))
    assert body(fw) == [
        "T0 = torch.mul(x, y)",
        "T1 = torch.unsqueeze(T0, 0)",
        "del T0",
        "T2 = Tensor.expand(T1, 3, 4)",
        "del T1",
        "return (T2,)",
    ]
    m = peakmem.measure(fw)
    check_invariants(m)
    # x, y: 32; T0 +16 -> 48. unsqueeze and expand are views: no allocation,
    # and deleting T0 and T1 frees nothing while T2 (f32[3, 4], 48 B of
    # view) still refers to T0's 16-byte storage. Final 48.
    assert m.events == (16, 16, 16)
    assert (m.peak_bytes, m.final_bytes) == (48, 48)


def test_python_scalars_are_wrapped_and_cast(jit_traces):
    def s(x):
        return x * 2.0, x + 1, x * 3

    fw, _ = jit_traces(s, torch.randn(4))
    assert body(fw) == [
        "T0 = torch.mul(x, 2.0)",
        "T1 = torch.add(x, 1, alpha=1)",
        "T2 = torch.mul(x, 3)",
        "return (T0, T1, T2)",
    ]
    m = peakmem.measure(fw)
    check_invariants(m)
    # x: 16. Each op: wrapper +8, f32 cast +4, output +16, -4, -8 (see the
    # module docstring; `alpha=1` is not wrapped). Peak inside the third op:
    # 16 + 2 * 16 (T0, T1) + 8 + 4 + 16 = 76. Final: 16 + 3 * 16 = 64.
    assert m.events == (16,) + (8, 4, 16, -4, -8) * 3
    assert (m.peak_bytes, m.final_bytes) == (76, 64)


@pytest.mark.parametrize(
    "dtype, scalar",
    [(torch.float64, 2.0), (torch.int64, 2)],
)
def test_python_scalar_needs_no_cast_when_dtypes_agree(jit_traces, dtype, scalar):
    def s(x):
        return x * scalar

    fw, _ = jit_traces(s, torch.ones(4, dtype=dtype))
    assert body(fw) == [f"T0 = torch.mul(x, {scalar})", "return (T0,)"]
    m = peakmem.measure(fw)
    check_invariants(m)
    # x: f64[4] or i64[4] = 32 B. The 8-byte wrapper already has the common
    # dtype (double / int64): wrapper +8, output +32, -8.
    # Peak 32 + 8 + 32 = 72; final 64.
    assert m.events == (32, 8, 32, -8)
    assert (m.peak_bytes, m.final_bytes) == (72, 64)


# ---------------------------------------------------------------------------
# Containers: a list argument cleared and freed vs a tuple that keeps it


def keep_or_free(xs):
    (x,) = xs
    clear_mutable_collection(xs)
    y = x * x
    del x
    z = y * y
    return z


def test_list_argument_cleared_frees_its_element():
    trace = FakeTrace(keep_or_free, ["xs"])
    m = peakmem.measure(trace, inputs=lambda: ([torch.randn(4)],))
    check_invariants(m)
    # x: 16 (in a list the caller holds). The clear drops the list's
    # reference, so `x` is the only owner: y +16 -> 32 (peak); del x -> 16;
    # z +16 -> 32; return: the local y dies -> 16 = z.
    assert m.events == (16, 16, -16, 16, -16)
    assert (m.peak_bytes, m.final_bytes) == (32, 16)


def test_tuple_argument_keeps_its_element():
    trace = FakeTrace(keep_or_free, ["xs"])
    m = peakmem.measure(trace, inputs=lambda: ((torch.randn(4),),))
    check_invariants(m)
    # x: 16, held by the caller's tuple (clearing it is a no-op):
    # y +16 -> 32; del x frees nothing; z +16 -> 48 (peak); return: y dies
    # -> 32 = x + z.
    assert m.events == (16, 16, 16, -16)
    assert (m.peak_bytes, m.final_bytes) == (48, 32)


def test_backward_convention_makes_lists_the_only_owners():
    # A fake backward: the harness passes [saved_tensors_list, saved_other]
    # and a cotangents list even when the inputs come as tuples.
    def backward_fn(saved_for_backward, cotangents):
        C0, C1 = saved_for_backward
        clear_mutable_collection(saved_for_backward)
        (a,) = C0
        clear_mutable_collection(C0)
        del C0
        (g,) = cotangents
        clear_mutable_collection(cotangents)
        del cotangents
        r = a * g
        del a, g
        return (r,)

    trace = FakeTrace(backward_fn, ["saved_for_backward", "cotangents"])
    assert detect_convention(trace) == "backward"
    m = peakmem.measure(trace, inputs=lambda: (((torch.randn(4),), ()), (torch.randn(4),)))
    check_invariants(m)
    # a, g: 32; r +16 -> 48 (peak); del a, g: both freed (the lists were the
    # only other owners and were cleared) -> 16 = r.
    assert m.events == (16, 16, 16, -16, -16)
    assert (m.peak_bytes, m.final_bytes) == (48, 16)
    # Forced forward convention with the same tuples: nothing is freed.
    # 32; r +16 -> 48; final 48.
    m = peakmem.measure(trace, convention="forward", inputs=lambda: (((torch.randn(4),), ()), (torch.randn(4),)))
    check_invariants(m)
    assert (m.peak_bytes, m.final_bytes) == (48, 48)


# ---------------------------------------------------------------------------
# Inputs


def test_inputs_given_as_a_structure_are_copied_inside_the_region():
    def contiguous(x):
        return x.contiguous()

    trace = FakeTrace(contiguous, ["x"])
    # A [4, 2] f32 view with strides (1, 4): the copy keeps the strides
    # (empty_strided: 8 elements = 32 B), so `contiguous` must copy again:
    # 32 + 32 = 64 peak and final (the caller holds x and the result).
    given = torch.ones(2, 4).t()
    m = peakmem.measure(trace, inputs=(given,))
    check_invariants(m)
    assert m.input_bytes == 32
    assert m.events == (32, 32)
    # A contiguous input: `contiguous` returns it; 32 and nothing else.
    m = peakmem.measure(trace, inputs=(torch.ones(4, 2),))
    check_invariants(m)
    assert m.events == (32,)
    assert (m.peak_bytes, m.final_bytes) == (32, 32)


def test_inputs_from_proxies(jit_traces):
    def f(x, idx, mask):
        return x[idx], mask

    fw, _ = jit_traces(f, torch.randn(8), torch.tensor([1, 2]), torch.tensor([True, False, True]))
    (x, idx, mask), kwargs = make_inputs(fw)
    assert kwargs == {}
    assert x.dtype == torch.float32 and x.shape == (8,)
    # Integer tensors are zeros (valid indices), bool tensors ones.
    assert idx.dtype == torch.int64 and idx.tolist() == [0, 0]
    assert mask.dtype == torch.bool and mask.tolist() == [True, True, True]
    # The same seed gives the same values.
    assert torch.equal(make_inputs(fw, seed=3)[0][0], make_inputs(fw, seed=3)[0][0])


def test_nothing_but_the_trace_is_counted():
    # An empty program: the profiler, the record_function ranges and the
    # harness allocate nothing.
    m = peakmem.measure(FakeTrace(lambda: None, []))
    assert m.events == ()
    assert (m.peak_bytes, m.final_bytes, m.input_bytes) == (0, 0, 0)


# ---------------------------------------------------------------------------
# Profiler quirks (see peakmem/measure.py, "CPU measurement and profiler quirks")


def _raw_memory_events(fn):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return [e.nbytes() for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]


def test_frees_of_blocks_from_an_earlier_session_are_reported_and_ignored():
    from torch.profiler import ProfilerActivity, profile

    held = []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        held.append(torch.ones(10))  # 40 B, allocated while profiling
    # The profiler's size table remembers it: a later session reports its free.
    assert _raw_memory_events(lambda: held.clear()) == [-40]

    # Inside measure(), such a free is left out and accounted separately.
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        held.append(torch.ones(10))

    def inputs():
        held.clear()  # frees the foreign 40 B inside the measured region
        return (torch.randn(4),)

    m = peakmem.measure(FakeTrace(lambda x: x, ["x"]), inputs=inputs)
    assert m.ignored_free_bytes == 40
    assert m.events == (16,)
    assert (m.peak_bytes, m.final_bytes) == (16, 16)


def test_frees_of_blocks_allocated_while_not_profiling_never_count():
    # A block allocated with the profiler off is not in its size table, so
    # its free is not reported ("Memory block of unknown size was allocated
    # before the profiling started") -- unless a stale entry for the same
    # address survives from an earlier profiling run, in which case the free is
    # reported with the *stale* size (seen here: a 40-byte tensor's free
    # reported as -16). Either way measure() leaves it out: its pointer was
    # not allocated in the measured region.
    held = [torch.ones(10)]

    def inputs():
        held.clear()
        return (torch.randn(4),)

    m = peakmem.measure(FakeTrace(lambda x: x, ["x"]), inputs=inputs)
    assert m.events == (16,)
    assert (m.peak_bytes, m.final_bytes) == (16, 16)


def test_tree_events_match_the_flat_event_list():
    # measure() reads allocations from the event tree (it needs pointers);
    # the flat kineto list has the same events in the same order, once each.
    from torch.profiler import ProfilerActivity, profile

    from peakmem.measure import _cpu_allocation_events

    def work():
        x = torch.randn(4)
        y = x * 2.0
        del x
        return y.sum()

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        work()
    flat = [e.nbytes() for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    tree = [size for _, _, size, _, _ in _cpu_allocation_events(prof)]
    # x +16, wrapper +8, cast +4, y +16, -4, -8, -16 (x); sum: s +4; then
    # y (-16) and s (-4) die when work() returns.
    assert tree == flat == [16, 8, 4, 16, -4, -8, -16, 4, -16, -4]


# ---------------------------------------------------------------------------
# Errors and devices


def test_rejects_non_traces_and_bad_conventions():
    with pytest.raises(TypeError, match="expects a Thunder TraceCtx"):
        peakmem.measure(object())
    with pytest.raises(ValueError, match="convention"):
        peakmem.measure(FakeTrace(lambda: None, []), convention="sideways")
    with pytest.raises(ValueError, match="cpu' or 'cuda"):
        peakmem.measure(FakeTrace(lambda: None, []), device="meta")


def test_inputs_are_made_on_the_measured_device_only(thunder):
    # A trace whose argument lives on CUDA cannot be measured on CPU: its
    # ops would run elsewhere (or mix devices) and the numbers would lie.
    from thunder.core import devices, dtypes
    from thunder.core.proxies import TensorProxy
    from thunder.core.trace import TraceCtx, tracectx

    with tracectx(TraceCtx()):
        x = TensorProxy(name="x", shape=(4,), device=devices.Device("cuda:0"), dtype=dtypes.float32)
    with pytest.raises(ValueError, match="argument x lives on cuda:0 but the measurement is on cpu"):
        peakmem.measure(FakeTrace(lambda x: x, ["x"], args=(x,)))


def test_measure_is_reachable_both_ways():
    # `peakmem.measure` is the function; the submodule stays importable.
    import importlib

    module = importlib.import_module("peakmem.measure")
    assert callable(peakmem.measure) and peakmem.measure is module.measure

    assert peakmem.measure(FakeTrace(lambda: None, [])) == module.measure(FakeTrace(lambda: None, []))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_unavailable_is_an_error():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        peakmem.measure(FakeTrace(lambda: None, []), device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda(thunder):
    def f(x, y, z):
        return x * y * z

    from thunder.extend import get_executor

    # The torch executor only: no nvFuser fusion, eager kernels.
    jf = thunder.jit(f, executors=[get_executor("torch")])
    jf(*(torch.randn(4, device="cuda") for _ in range(3)))
    fw = thunder.last_traces(jf)[-1]
    assert body(fw) == ["T0 = torch.mul(x, y)", "T1 = torch.mul(T0, z)", "del T0", "return (T1,)"]
    m = peakmem.measure(fw, device="cuda")
    # Requested bytes: x, y, z: 48; T0 +16 -> 64; T1 +16 -> 80 (peak);
    # del T0 -> 64. (No grad: nothing is saved for backward.) The caching
    # allocator rounds each 16-byte request up to a 512-byte block.
    assert (m.peak_bytes, m.final_bytes, m.input_bytes) == (80, 64, 48)
    assert m.events is None
    assert m.allocated_peak_bytes >= 5 * 512
    assert m.reserved_peak_bytes >= m.allocated_peak_bytes


def test_temporaries_of_input_creation_are_not_counted():
    # An inputs callable that makes x through a temporary: randn [2, 4] (32 B),
    # .t().contiguous() copies into x (32 B), then the temporary is freed.
    # What the call starts with is x alone: 32 B. Identity trace: peak and
    # final 32, one event.
    def inputs():
        return (torch.randn(2, 4).t().contiguous(),)

    m = peakmem.measure(FakeTrace(lambda x: x, ["x"]), inputs=inputs)
    check_invariants(m)
    assert m.input_bytes == 32
    assert m.events == (32,)
    assert (m.peak_bytes, m.final_bytes) == (32, 32)
