"""torch.optim's step() written as a program (peakmem/optimizer_program.py),
simulated by the runtime model, against the same step() run for real under
the profiler: peak and final bytes above the parameters, gradients and kept
state, to the byte, for the first step (the state is made) and a later one;
the single-tensor step and the foreach one (foreach=True, on the CPU the
per-tensor fallback of the _foreach_* ops).
"""

from __future__ import annotations

import pytest

SHAPES = [(8, 16), (16,), (4, 4, 2)]

CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.1, "maximize": True, "weight_decay": 0.01, "dampening": 0.1, "momentum": 0.5}),
    ("SGD", {"lr": 1, "maximize": True, "momentum": 1, "weight_decay": 1}),  # ints: wrapped as int64
    ("Adam", {}),
    ("Adam", {"weight_decay": 0.1}),
    ("Adam", {"amsgrad": True}),
    ("Adam", {"maximize": True, "weight_decay": 0.1}),
    ("Adam", {"eps": 0}),  # an int eps: add_(0) wraps an int64
    ("Adam", {"maximize": True, "amsgrad": True}),
    ("AdamW", {}),
    ("AdamW", {"amsgrad": True, "maximize": True}),
]


def _dtypes(dtype):
    """One dtype per parameter of SHAPES (`dtype`: one for all, or a list)."""
    return dtype if isinstance(dtype, list) else [dtype] * len(SHAPES)


def _measured(cls, kwargs, dtype):
    """(peak, final) above what is held before each step(), for steps 1 and 2."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from peakmem.measure import _cpu_allocation_events

    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, generator=g).to(d)) for s, d in zip(SHAPES, _dtypes(dtype))]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g).to(p.dtype)
    opt = cls(params, **kwargs)
    out = []
    for _ in range(2):
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            opt.step()
        total = peak = 0
        for _t, _ptr, size, _inputs, _warm_up in _cpu_allocation_events(prof):
            total += size
            peak = max(peak, total)
        out.append((peak, total))
    return out


def _simulated(cls, kwargs, dtype):
    from peakmem import _core
    from peakmem.optimizer_program import ParamInfo, optimizer_program, resolve_optimizer

    spec = resolve_optimizer(cls, kwargs)
    infos = [ParamInfo(s, d) for s, d in zip(SHAPES, _dtypes(dtype))]
    out = []
    for first in (True, False):
        r = _core.analyze_text(optimizer_program(spec, infos, first).text, "<opt>", "runtime", "plain")
        assert r.diagnostics == []
        args = r.statements[0].live_bytes - r.statements[0].delta_bytes
        out.append((r.peak_bytes - args, r.final_bytes - args))
    return out


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=lambda c: str(c))
def test_program_equals_the_real_step(thunder, name, kwargs, dtype_name, foreach):
    import torch

    cls, dtype = getattr(torch.optim, name), getattr(torch, dtype_name)
    kwargs = {**kwargs, "foreach": foreach}
    assert _simulated(cls, kwargs, dtype) == _measured(cls, kwargs, dtype)


# foreach over parameters of two dtypes: one group each, visited in the order
# torch's grouping gives, a group's temporaries alive into the next group's
# ops (Adam's exp_avg_sq_sqrt until the next one is made).
MIXED_CASES = [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "maximize": True}),
    ("Adam", {"maximize": True}),
    ("AdamW", {"amsgrad": True, "weight_decay": 0.1}),
]


@pytest.mark.parametrize("name,kwargs", MIXED_CASES, ids=lambda c: str(c))
def test_foreach_over_dtype_groups_equals_the_real_step(thunder, name, kwargs):
    import torch

    cls, kwargs = getattr(torch.optim, name), {**kwargs, "foreach": True}
    dtypes = [torch.float32, torch.bfloat16, torch.float32]
    assert _simulated(cls, kwargs, dtypes) == _measured(cls, kwargs, dtypes)


def test_state_names_are_the_state(thunder):
    import torch

    from peakmem.optimizer_program import ParamInfo, optimizer_program, resolve_optimizer

    spec = resolve_optimizer(torch.optim.Adam, {"amsgrad": True})
    program = optimizer_program(spec, [ParamInfo((4,), torch.float32)], True)
    # Adam keeps step, exp_avg, exp_avg_sq and max_exp_avg_sq per parameter.
    assert program.state_names == {"s0", "m0", "v0", "x0"}
    assert "return (s0, m0, v0, x0)" in program.text


@pytest.mark.parametrize("foreach", [False, True])
def test_tensors_are_on_their_parameters_device_and_step_counters_on_the_cpu(thunder, foreach):
    """On a GPU, Adam's moments are made like their parameters (zeros_like)
    and its ``step`` counters on the CPU (torch/optim/adam.py, not
    capturable: ``torch.tensor(0.0, dtype=_get_scalar_dtype())``; foreach's
    increment ``torch.tensor(1.0, device="cpu")``)."""
    import torch

    from peakmem.optimizer_program import ParamInfo, optimizer_program, resolve_optimizer

    spec = resolve_optimizer(torch.optim.Adam, {"foreach": foreach})
    for first in (True, False):
        text = optimizer_program(spec, [ParamInfo((4, 8), torch.float32, "cuda:0")], first).text
        assert '# p0: "cuda:0 f32[4, 8]"' in text
        assert '"cpu f32[]"' in text  # the step counter
        assert '"cpu f32[4, 8]"' not in text  # nothing of the parameter's shape off its device
