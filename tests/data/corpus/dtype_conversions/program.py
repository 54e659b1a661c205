"""dtype conversions: float32 -> bfloat16 -> float64 -> float32, and to float16."""

import torch

BACKWARD = True


def program(x):
    a = x.to(torch.bfloat16)
    b = (a * a).to(torch.float64)
    c = b.sum(dim=1).to(torch.float32)
    return c, x.half()


def make_function():
    return program


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 4, generator=g, requires_grad=True),)
