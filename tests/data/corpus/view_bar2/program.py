"""`bar2` from Thunder's thunder/tests/test_examine_memory.py::test_view_ops."""

import torch

BACKWARD = True


def bar2(a, b):  # [5,2], [2,2]
    a_1, a_2, a_3 = torch.split(a, 2)
    c = a_1 + b
    d = a + a
    return c, d, a_2, a_3  # We have to use all the outputs of torch.split due to #1043


def make_function():
    return bar2


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(s, generator=g, requires_grad=True) for s in [(5, 2), (2, 2)])
