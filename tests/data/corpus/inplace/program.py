"""In-place ops on intermediates: `add_` and `copy_` (Thunder functionalizes
them; the trace keeps `copy_` statements that write into their destination).
"""

import torch

BACKWARD = True


def program(x, y):
    a = x * y
    a.add_(y)  # in-place on an intermediate
    b = torch.zeros_like(a)
    b.copy_(a)  # copy_ into a fresh tensor
    return b * x


def make_function():
    return program


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(4, 4, generator=g, requires_grad=True) for _ in range(2))
