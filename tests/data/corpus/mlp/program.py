"""A two-layer MLP: Linear(16, 64) -> GELU -> Linear(64, 16) on a [4, 16] batch."""

import torch
import torch.nn as nn

BACKWARD = True


class MLP(nn.Module):
    def __init__(self, dim=16, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def make_function():
    torch.manual_seed(0)
    return MLP()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 16, generator=g, requires_grad=True),)
