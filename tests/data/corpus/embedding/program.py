"""An embedding lookup: [10, 8] weight, int64 indices [2, 5] (zeros are valid indices)."""

import torch
import torch.nn.functional as F

BACKWARD = True


def program(idx, weight):
    return F.embedding(idx, weight)


def make_function():
    return program


def make_inputs():
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 10, (2, 5), generator=g)
    weight = torch.randn(10, 8, generator=g, requires_grad=True)
    return idx, weight
