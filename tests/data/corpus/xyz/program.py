"""`x * y * z` with f32[4] inputs (Thunder issue 1029 and the PR that fixed it).

Its backward is also measured with every container passed as a tuple that the
caller keeps (measured.json "bw_tuple_args"): `clear_mutable_collection` is
then a no-op and no saved tensor dies before the call returns.
"""

import torch

BACKWARD = True
EXTRA_MEASUREMENTS = {"bw_tuple_args": ("bw", "tuple_args")}


def f(x, y, z):
    return x * y * z


def make_function():
    return f


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(4, generator=g, requires_grad=True) for _ in range(3))
