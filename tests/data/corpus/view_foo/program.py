"""`foo` from Thunder's thunder/tests/test_examine_memory.py::test_view_ops."""

import torch

BACKWARD = True


def foo(a, b):  # [4] [4]
    a_1 = torch.unsqueeze(a, 0)  # [1,4]
    b_2 = torch.unsqueeze(b, 0)  # [1,4]
    return (a_1 + b_2,)


def make_function():
    return foo


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(s, generator=g, requires_grad=True) for s in [(4,), (4,)])
