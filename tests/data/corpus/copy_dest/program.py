"""`copy_` returns its destination, and `add_` on an argument (inference, no grad).

The result is the argument `dst` itself: nothing new is held after return.
"""

import torch

BACKWARD = False


def program(dst, src):
    out = dst.copy_(src)
    out.add_(src)
    return out


def make_function():
    return program


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g)
