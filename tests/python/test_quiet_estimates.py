"""An estimate prints nothing of its own libraries' noise: Thunder's warning
that the optional transformer_engine package is missing (on its import) and
transformers' notes about a config at a model's first forward. Each is
printed, without peakmem, by the same calls in a fresh process (checked
first, so the test sees the noise it removes)."""

from __future__ import annotations

import subprocess
import sys

STEP = """
import torch, transformers
with torch.device("meta"):
    model = transformers.AutoModelForCausalLM.from_config(transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2))
ids = torch.zeros(1, 16, dtype=torch.int64, device="meta")
"""


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout + r.stderr


def test_the_libraries_say_it_without_peakmem():
    printed = _run(STEP + "model(input_ids=ids, labels=ids)\n"
                   "import peakmem._thunder_compat as c; c.patch_torch(); import thunder\n")
    assert "loss_type=None" in printed and "transformer_engine module not found" in printed, printed


def test_an_estimate_on_either_front_end_prints_none_of_it():
    printed = _run(STEP + """
import peakmem
peakmem.estimate_step(model, kwinputs={"input_ids": ids, "labels": ids}, optimizer=torch.optim.AdamW)
m = torch.nn.Linear(8, 8)
peakmem.estimate_step(m, torch.randn(4, 8), loss_fn=lambda o, x: o.sum(), frontend="thunder")
""")
    assert "loss_type" not in printed and "transformer_engine" not in printed, printed
