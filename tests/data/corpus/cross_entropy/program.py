"""Cross-entropy loss of [8, 10] logits against int64 class targets."""

import torch
import torch.nn.functional as F

BACKWARD = True


def loss(logits, target):
    return F.cross_entropy(logits, target)


def make_function():
    return loss


def make_inputs():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 10, generator=g, requires_grad=True)
    target = torch.randint(0, 10, (8,), generator=g)
    return logits, target
