"""The DTensor corpus's programs (scripts/make_dtensor_corpus.py), written by
hand: each case is a function and its arguments' global shapes and
placements over a 1-d mesh of the world size.

BACKWARD names the cases Thunder 0.2.6 differentiates (its DTensor mul, exp
and transpose have gradient rules; add and linear do not).
"""

import torch
from torch.distributed.tensor import Replicate, Shard

BACKWARD = ("mul-shard0", "mul-replicate", "exp-mul-shard1", "exp-mul-uneven", "transpose-shard0",
            "mixed-placements")


def mul(a, b):
    return a * b


def exp_mul(a, b):
    return torch.exp(a) * b


def exp_of_mul(a, b):
    return torch.exp(a * b)


def transpose_mul(a, b):
    return torch.transpose(a, 0, 1) * b


def linear(x, w):
    return torch.nn.functional.linear(x, w)


CASES = {
    "mul-shard0": (mul, [((16, 16), Shard(0)), ((16, 16), Shard(0))]),
    "mul-replicate": (mul, [((16, 16), Replicate()), ((16, 16), Replicate())]),
    "exp-mul-shard1": (exp_mul, [((16, 16), Shard(1)), ((16, 16), Shard(1))]),
    # 10 rows over 4 ranks: torch.chunk gives 3, 3, 3, 1.
    "exp-mul-uneven": (exp_of_mul, [((10, 16), Shard(0)), ((10, 16), Shard(0))]),
    "transpose-shard0": (transpose_mul, [((16, 16), Shard(0)), ((16, 16), Shard(1))]),
    "linear-shard1": (linear, [((8, 16), Shard(1)), ((12, 16), Shard(1))]),
    "mixed-placements": (mul, [((16, 16), Shard(0)), ((16, 16), Replicate())]),
}
