"""A `permute` followed by a `reshape` that must copy, next to one that is a view.

h is [2, 3, 4] contiguous (strides 12, 4, 1). h.permute(1, 0, 2) is [3, 2, 4]
with strides (4, 12, 1); merging its first two dims into 6 would need stride
4 == 12 * 2, so reshape(6, 4) copies (96 bytes). h.reshape(6, 4) is a view.
"""

import torch

BACKWARD = True


def program(x, w):
    h = x * w
    z = h.permute(1, 0, 2).reshape(6, 4)  # copies
    v = h.reshape(6, 4)  # view
    return z + v


def make_function():
    return program


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 4, generator=g, requires_grad=True), torch.randn(2, 3, 4, generator=g, requires_grad=True)
