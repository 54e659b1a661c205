"""The Thunder front end on Hugging Face ``transformers`` models.

Thunder 0.2.6 cannot trace a training step of the pinned transformers
(5.25): its interpreter fails inside the models' own code. The error says
so and names Thunder's reason, and points at the eager front end (which
test_eager_step.py shows exact on the same models). The newest release whose
ViT step Thunder traces, with the model's own loss, is 5.1.0
(scripts/thunder_transformers_check.py tells, release by release):
scripts/install-thunder-transformers installs it beside the pinned one
(build/thunder-transformers), and a subprocess with it first on the path
shows the Thunder path's estimate equal to the step measured under Thunder.
Under transformers 4.57.6 (build/thunder-transformers-4) Thunder traces the
causal LMs whose heads are tied to their embeddings, Falcon, BLOOM and
GPT-Neo: their estimates are exact too, tied and untied.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import peakmem
from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import thunder_transformers_check as check  # noqa: E402

OLD_TRANSFORMERS = REPO / "build" / "thunder-transformers"
TRANSFORMERS_4 = REPO / "build" / "thunder-transformers-4"


# Thunder's reason, as its interpreter words it for each model: ViT's
# attribute store, T5's generator (transformers 5.25's own code).
@pytest.mark.parametrize("family,reason", [
    ("vit", "AssertionError: trying to set .global_var of ProvenanceRecord("),
    pytest.param("t5", "TypeError: object of type 'generator' has no len()", marks=pytest.mark.long),
])
def test_where_thunder_cannot_trace_the_error_says_so_and_names_why(thunder, family, reason):
    torch.manual_seed(0)
    wrapper, inputs = check.build(family)
    with pytest.raises(RuntimeError) as info:
        peakmem.estimate_step(wrapper, *inputs, optimizer=torch.optim.AdamW, frontend="thunder")
    message = str(info.value)
    assert message.startswith("Thunder 0.2.6 could not trace the step: "), message
    assert reason in message, message
    assert "frontend='eager'" in message, message


def test_thunder_traces_vit_of_the_newest_transformers_it_can_exactly():
    assert (OLD_TRANSFORMERS / ".complete").exists(), (
        f"{OLD_TRANSFORMERS} is missing: scripts/install-thunder-transformers installs it "
        "(scripts/setup-python runs it)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(OLD_TRANSFORMERS), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]))
    # The check builds ViT from its config, estimates one AdamW step through
    # Thunder and measures the same step run by Thunder on the CPU under the
    # profiler; exit status 0 when peak and final bytes are equal.
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "thunder_transformers_check.py"),
                          "--families", "vit", "--hide", "kernels"],
                         env=env, capture_output=True, text=True, timeout=900)
    assert "transformers 5.1.0" in run.stdout, run.stdout + run.stderr
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    row = next(line for line in run.stdout.splitlines() if line.startswith("vit "))
    assert row.split()[1] == "ok" and "yes" in row.split(), row


def _check_beside(installed, *arguments: str) -> subprocess.CompletedProcess:
    """scripts/thunder_transformers_check.py with `installed` first on the path."""
    assert (installed / ".complete").exists(), (
        f"{installed} is missing: scripts/install-thunder-transformers installs it "
        "(scripts/setup-python runs it)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(installed), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]))
    return subprocess.run([sys.executable, str(REPO / "scripts" / "thunder_transformers_check.py"), *arguments],
                          env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("tie", [True, pytest.param(False, marks=pytest.mark.long)], ids=["tied", "untied"])
def test_thunder_steps_of_tied_lm_heads_are_exact(tie):
    # Each family's tiny model with its own loss, one AdamW step estimated
    # through Thunder and measured as Thunder runs it on the CPU under the
    # profiler; exit status 0 when every peak and final figure is equal.
    families = ("falcon", "bloom", "gpt_neo")
    run = _check_beside(TRANSFORMERS_4, "--families", ",".join(families), "--hide", "kernels",
                        *(() if tie else ("--untie",)))
    assert "transformers 4.57.6" in run.stdout, run.stdout + run.stderr
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    rows = {f: line.split() for line in run.stdout.splitlines() for f in families if line.startswith(f + " ")}
    assert set(rows) == set(families), run.stdout
    assert all(r[1] == "ok" and "yes" in r for r in rows.values()), run.stdout
