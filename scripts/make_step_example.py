"""Writes tests/data/steps/gpt_lm_adamw.step.json: two AdamW training steps
of the step corpus's GPT language model (tests/python/step_models.py: 2
blocks, dim 256, vocab 512; batch 2, sequence 128) as peakmem.export_step
writes them, and prints the estimate and the measured step (the truth the
file's README records). Run from the repository root with .venv's python."""

import sys
from pathlib import Path

import torch

import peakmem

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from step_models import GPT  # noqa: E402

torch.manual_seed(0)
model = GPT()
idx, targets = torch.randint(0, 512, (2, 128)), torch.randint(0, 512, (2, 128))
setup = {"optimizer": torch.optim.AdamW, "steps": 2}
peakmem.export_step(model, idx, targets, path=str(REPO / "tests/data/steps/gpt_lm_adamw.step.json"), **setup,
                    frontend="thunder")
r = peakmem.estimate_step(model, idx, targets, **setup, frontend="thunder")
m = peakmem.measure_step(model, idx, targets, **setup, frontend="thunder")
print(f"estimate peak {r.peak_bytes} final {r.final_bytes}; measured peak {m.peak_bytes} final {m.final_bytes}; "
      f"torch threads {torch.get_num_threads()}")
