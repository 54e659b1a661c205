"""peakmem.step.call_pricing: one ATen call's arguments as the registry
takes them, and how a statement prints it."""

from __future__ import annotations

import pytest
import torch

from peakmem.step.call_pricing import _arguments, _describe


def test_a_python_number_in_self_or_other_is_wrapped():
    # ATen wraps `2` in a 0-d tensor before the kernel runs (aten_ops.h).
    x = torch.empty(3, 4, device="meta")
    arguments, wraps = _arguments(torch.ops.aten.add.Tensor, (x, 2), {}, "aten.add.Tensor", lambda t: True)
    assert wraps
    assert arguments[0] == ("self", ("tensor", "f32", [3, 4], [4, 1], False))


def test_a_zero_d_cpu_tensor_the_recording_never_saw_is_wrapped():
    x, n = torch.empty(3, device="meta"), torch.tensor(2.0)
    _, wraps = _arguments(torch.ops.aten.mul.Tensor, (x, n), {}, "aten.mul.Tensor", lambda t: t is not n)
    assert wraps


def test_a_dtype_without_a_size_rule_is_named():
    x = torch.empty(2, dtype=torch.uint16, device="meta")
    with pytest.raises(ValueError, match="aten.neg.default: the dtype torch.uint16 has no size rule"):
        _arguments(torch.ops.aten.neg.default, (x,), {}, "aten.neg.default", lambda t: True)


def test_a_call_is_described_by_dtypes_and_shapes():
    assert _describe([torch.empty(2, 3, dtype=torch.bfloat16, device="meta"), 4]) == "[bfloat16[2, 3], 4]"
