"""`import peakmem` makes a plain `import thunder` work under torch 2.13,
without importing torch or thunder itself; `peakmem.thunder.jit` is
thunder.jit. Each case runs in a fresh interpreter (the test process has
thunder imported already)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}:\n{r.stderr[-3000:]}"
    return r.stdout


def test_bare_thunder_import_fails_under_this_torch():
    # The failure peakmem works around (if torch had the methods, the
    # work-around would be unneeded and this test would say so).
    r = subprocess.run([sys.executable, "-c", "import thunder"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "align_as" in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("first", ["peakmem", "torch, peakmem"])
def test_import_peakmem_then_thunder(first):
    out = _run(f"""
import sys
import {first}
print('torch' in sys.modules, 'thunder' in sys.modules)
import thunder, torch
f = thunder.jit(lambda a, b: a * b + 1)
print(f(torch.full((2,), 3.0), torch.full((2,), 2.0)).tolist())
""")
    imported_torch = "torch" in first
    assert out.split("\n")[:2] == [f"{imported_torch} False", "[7.0, 7.0]"]


def test_peakmem_thunder_jit_runs_a_module():
    out = _run("""
import torch, peakmem
model = torch.nn.Linear(3, 2)
with torch.no_grad():
    model.weight.fill_(1.0); model.bias.fill_(0.5)
jm = peakmem.thunder.jit(model)
print(jm(torch.ones(4, 3)).tolist())
""")
    assert out.strip() == str([[3.5, 3.5]] * 4)
