"""An `expand` whose base is deleted: the returned [3, 4] view keeps the 16-byte
storage of `b` alive (the view's numel is 12, its storage 4 floats)."""

import torch

BACKWARD = True


def program(x, y):
    b = x * y  # [4]
    c = b.unsqueeze(0).expand(3, 4)  # [3, 4] view of b's 16 bytes
    return c, c * y


def make_function():
    return program


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, generator=g, requires_grad=True), torch.randn(4, generator=g, requires_grad=True)
