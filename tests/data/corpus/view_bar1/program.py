"""`bar1` from Thunder's thunder/tests/test_examine_memory.py::test_view_ops."""

import torch

BACKWARD = True


def bar1(a, b, c):  # [4], [1,4,4], [4,1,4]
    a_1 = torch.unsqueeze(a, 0)  # [1,4]
    a_2 = torch.unsqueeze(a_1, 1)  # [1,1,4]
    a_3 = a_2.expand(1, 4, 4)
    a_4 = a_2.expand(4, 1, 4)
    return b + a_3, c + a_4


def make_function():
    return bar1


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(s, generator=g, requires_grad=True) for s in [(4,), (1, 4, 4), (4, 1, 4)])
