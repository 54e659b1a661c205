"""Every Thunder dtype is sized as PyTorch allocates it (runtime model) and as
Thunder counts it (thunder model).

The truth: for each dtype in thunder.core.dtypes, a real CPU tensor of n
elements, torch.empty(n, dtype=...), and its storage's byte size; Thunder's
count is numel * dtype.bytes (thunder/examine/memory_calculation.py). The
two differ for the packed fp4 type float4_e2m1fn_x2 only: PyTorch stores one
byte per element (two 4-bit values), Thunder counts half a byte.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import peakmem
from peakmem._thunder_compat import import_thunder

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    thunder = import_thunder()
from thunder.core import dtypes  # noqa: E402


def _thunder_dtypes():
    """One strong dtype per short name, with its torch dtype."""
    seen = {}
    for name in dir(dtypes):
        d = getattr(dtypes, name)
        if isinstance(d, dtypes.dtype) and not d.is_weak and d.shortname() not in seen:
            seen[d.shortname()] = (d, dtypes.to_torch_dtype(d))
    return sorted(seen.items())


DTYPES = _thunder_dtypes()


def test_every_thunder_dtype_is_covered():
    assert len(DTYPES) >= 20
    assert "f4_e2m1fn_x2" in dict(DTYPES)


@pytest.mark.parametrize("short,pair", DTYPES, ids=[s for s, _ in DTYPES])
@pytest.mark.parametrize("n", [1, 3, 4, 6])
def test_argument_bytes_match_pytorch_and_thunder(short, pair, n):
    thunder_dtype, torch_dtype = pair
    text = f'def computation(x):\n  # x: "cpu {short}[{n}]"\n  return x\n'
    # The runtime model: the argument is held to the end (final bytes).
    measured = torch.empty(n, dtype=torch_dtype).untyped_storage().nbytes()
    assert peakmem.analyze(text, memory_model="runtime").final_bytes == measured
    # The thunder model: numel * dtype.bytes, when that is a whole number.
    thunder_count = n * thunder_dtype.bytes
    if thunder_count == int(thunder_count):
        assert peakmem.analyze(text, memory_model="thunder").final_bytes == int(thunder_count)
    else:
        with pytest.raises(peakmem.TraceError, match=r"as \d+\.5 bytes"):
            peakmem.analyze(text, memory_model="thunder")
