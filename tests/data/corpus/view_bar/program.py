"""`bar` from Thunder's thunder/tests/test_examine_memory.py::test_view_ops.

The same program as tests/data/nvfusion_broadcast_fw.trace, here
with the torch executor on CPU (no fusion).
"""

import torch

BACKWARD = True


def bar(a, b):  # [4] [2,2]
    a_1 = torch.unsqueeze(a, 0)  # [1,4]
    a_2 = torch.unsqueeze(a_1, 1)  # [1,1,4]
    a_3 = a_2.expand(2, 3, 4)  # [2,3,4]

    b_1 = torch.reshape(b, (4,))  # [4]
    b_2 = torch.unsqueeze(b_1, 0)  # [1,4]
    b_3 = torch.unsqueeze(b_2, 1)  # [1,1,4]
    b_4 = b_3.expand(2, 3, 4)  # [2,3,4]

    result1 = a_2 + b_3
    result2 = b_4 + a_3
    return result1, result2


def make_function():
    return bar


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(s, generator=g, requires_grad=True) for s in [(4,), (2, 2)])
