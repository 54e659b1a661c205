"""The calls a CPU foreach op's slow kernel makes (peakmem.step.cpu_foreach),
as ForeachOpsKernels.cpp writes them: one single-tensor op per tensor, with
the scalar, the list's i-th scalar or the other list's i-th tensor. The
eager step corpus's foreach optimizers (tests/python/test_step.py) check
the scratch priced from them against measurement."""

from __future__ import annotations

import torch

from peakmem.step.cpu_foreach import per_tensor_calls

aten = torch.ops.aten


def test_each_foreach_form_becomes_its_single_tensor_calls():
    a, b = [torch.zeros(2), torch.zeros(3)], [torch.ones(2), torch.ones(3)]
    # A scalar: the same `other` each call.
    assert [(str(f), kw["other"]) for f, _, kw in per_tensor_calls(aten._foreach_mul_.Scalar, (a, 0.9), {})] == \
        [("aten.mul_.Scalar", 0.9), ("aten.mul_.Scalar", 0.9)]
    # A list of scalars: the i-th to the i-th call.
    calls = per_tensor_calls(aten._foreach_div_.ScalarList, (a, [2.0, 3.0]), {})
    assert [(str(f), kw["other"]) for f, _, kw in calls] == [("aten.div_.Scalar", 2.0), ("aten.div_.Scalar", 3.0)]
    # A list of tensors, with alpha: add_.Tensor(self[i], other[i], alpha=...).
    calls = per_tensor_calls(aten._foreach_add_.List, (a, b), {"alpha": 2})
    assert [str(f) for f, _, _ in calls] == ["aten.add_.Tensor"] * 2
    assert calls[1][2]["other"] is b[1] and calls[1][2]["alpha"] == 2
    # Pointwise: addcdiv_(self[i], tensor1[i], tensor2[i], value=scalars[i]).
    calls = per_tensor_calls(aten._foreach_addcdiv_.ScalarList, (a, b, b, [0.1, 0.2]), {})
    assert [(str(f), kw["tensor1"] is b[i], kw["value"]) for i, (f, _, kw) in enumerate(calls)] == \
        [("aten.addcdiv_.default", True, 0.1), ("aten.addcdiv_.default", True, 0.2)]
    # Unary: sqrt(self[i]).
    assert [str(f) for f, _, _ in per_tensor_calls(aten._foreach_sqrt.default, (a,), {})] == ["aten.sqrt.default"] * 2


def test_what_is_no_foreach_op_or_has_no_single_op_is_none():
    assert per_tensor_calls(aten.add_.Tensor, (torch.zeros(2), torch.zeros(2)), {}) is None
    # maximum has no in-place single op for _foreach_maximum_ to call by name.
    assert per_tensor_calls(aten._foreach_maximum_.List, ([torch.zeros(2)], [torch.zeros(2)]), {}) is None
