"""Basic slicing (ranges, steps, an integer index) of an [8, 6] intermediate."""

import torch

BACKWARD = True


def program(x, w):
    h = x * w
    a = h[1:5, ::2]  # [4, 3] view, strided
    b = h[0:4, 1::2]  # [4, 3] view
    c = h[:, 0]  # [8] view
    return a * b, c + c


def make_function():
    return program


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 6, generator=g, requires_grad=True), torch.randn(8, 6, generator=g, requires_grad=True)
