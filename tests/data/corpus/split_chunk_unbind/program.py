"""`split`, `chunk` and `unbind` of a [6, 4] tensor: views of one storage."""

import torch

BACKWARD = True


def program(x, w):
    h = x * w
    s0, s1, s2 = torch.split(h, 2)  # 3 x [2, 4]
    c0, c1 = torch.chunk(h, 2, dim=1)  # 2 x [6, 2]
    u0, u1 = torch.unbind(s1)  # 2 x [4]
    return s0 * s2, c0 + c1, u0 - u1


def make_function():
    return program


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(6, 4, generator=g, requires_grad=True), torch.randn(6, 4, generator=g, requires_grad=True)
