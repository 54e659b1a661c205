"""scripts/gpu-check: its dry run on the CPU (peakmem's predictions against
peakmem.measure's profiler measurement, requested bytes exact), what it says
without a GPU, and, on a machine with a CUDA GPU, the real check."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu-check"


@pytest.fixture(scope="module")
def gpu_check():
    """scripts/gpu_check.py as a module."""
    spec = importlib.util.spec_from_file_location("peakmem_gpu_check", REPO / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_script(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_dry_run_predicts_the_cpu_measurement(thunder, gpu_check):
    # Two programs, forward and backward, and a training step: the
    # requested bytes peakmem predicts are the profiler's; the allocator's
    # figures are predictions only (a CPU has no caching allocator).
    result = gpu_check.run(torch.device("cpu"), ["xyz", "mlp"], ["mlp"], time_budget=None)
    assert not result.failures and not result.not_run
    labels = {r.program for r in result.rows}
    assert labels == {"xyz fw", "xyz bw", "mlp fw", "mlp bw", "step mlp"}
    requested = [r for r in result.rows if r.quantity.startswith("requested")]
    assert len(requested) == 10 and all(r.compared for r in requested)
    assert result.mismatches == [] and result.status == gpu_check.OK
    allocator = [r for r in result.rows if not r.quantity.startswith("requested")]
    assert len(allocator) == 5 * 5 and all(r.predicted is not None and r.measured is None for r in allocator)
    # Every request is rounded up to a 512-byte block, so the allocated
    # peak is at least the requested one.
    by = {(r.program, r.quantity): r.predicted for r in result.rows}
    for label in labels:
        assert by[label, "allocated peak"] >= by[label, "requested peak"] > 0
    text = gpu_check.report_text(result)
    assert "DIFFERS" not in text and "n/a" in text and "0 differ, 0 failed" in text


def test_the_table_names_a_difference_and_fails(gpu_check):
    result = gpu_check.Result(device="cuda:0", versions={})
    result.rows = [gpu_check.Row("p fw", "requested peak", 1024, 1024),
                   gpu_check.Row("p fw", "reserved peak", 2097152, 4194304),
                   gpu_check.Row("p fw", "allocated final", 512, None)]
    assert [r.quantity for r in result.mismatches] == ["reserved peak"]
    assert result.status == gpu_check.DIFFERENT
    text = gpu_check.report_text(result)
    assert "+2,097,152  DIFFERS" in text and "DIFFERS: p fw: reserved peak +2,097,152" in text
    assert "| p fw | allocated final | 512 | n/a |  |" in gpu_check.report_text(result, markdown=True)
    result.rows = result.rows[:1]
    result.not_run = ["step mlp"]
    assert result.status == gpu_check.INCOMPLETE


def test_dry_run_from_the_command_line(thunder, tmp_path):
    out = tmp_path / "table.json"
    p = run_script("--dry-run", "--programs", "xyz", "--steps", "none", "--eager-steps", "none", "--output", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "xyz bw" in p.stdout and "DIFFERS" not in p.stdout
    data = json.loads(out.read_text())
    assert data["device"] == "cpu" and data["status"] == 0 and len(data["rows"]) == 14
    assert not any(r["mismatch"] for r in data["rows"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here: test_real_check runs")
def test_without_a_gpu_it_says_so_and_passes():
    p = run_script(timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no CUDA GPU here" in p.stdout


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_real_check(thunder, tmp_path):
    # The quick set on a real GPU, every compared row exact. It includes
    # programs the recorded H200 run found differing (docs/gpu-check.md:
    # nanogpt_block, gpt2 and gpt_block_sgd_3_steps by CUDA kernels' scratch
    # the model does not know; the eager front end's attention, whose CUDA
    # backends are not modelled, is in the eager quick set too), so today it
    # fails on a GPU naming those rows: it is the check that says when they
    # are fixed, not a check that passes.
    out = tmp_path / "table.json"
    p = run_script("--quick", "--output", str(out), "--keep", str(tmp_path / "kept"), timeout=600)
    data = json.loads(out.read_text())
    assert data["device"].startswith("cuda") and data["rows"]
    assert any(r["quantity"] == "reserved peak" and r["measured"] is not None for r in data["rows"])
    assert p.returncode == 0, p.stdout[-8000:] + p.stderr[-4000:]


def _wheel(tmp_path: Path, name: str, version: str, into: Path) -> None:
    """Builds a one-module wheel `name`-`version` into `into` (setuptools,
    no network)."""
    src = tmp_path / f"src-{name}-{version}"
    (src / name).mkdir(parents=True)
    (src / name / "__init__.py").write_text(f"VERSION = {version!r}\n")
    (src / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "{version}"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation",
                    "-w", str(into), str(src)], check=True, capture_output=True)


def test_wheelhouse_installs_offline_what_is_missing(tmp_path):
    # A wheelhouse of a distribution this Python lacks and one it has
    # (pytest, at another version): the first is installed into the target
    # and imported from there, the second left alone.
    house, target = tmp_path / "house", tmp_path / "site"
    _wheel(tmp_path, "gpu_check_probe", "1.0", house)
    _wheel(tmp_path, "pytest", "0.0.1", house)
    code = ("import sys, importlib.util; from pathlib import Path\n"
            f"spec = importlib.util.spec_from_file_location('g', {str(REPO / 'scripts' / 'gpu_check.py')!r})\n"
            "g = sys.modules['g'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)\n"
            f"g.install_wheelhouse(Path({str(house)!r}), Path({str(target)!r}))\n"
            "import gpu_check_probe, pytest, importlib.metadata as md\n"
            "print(gpu_check_probe.VERSION, gpu_check_probe.__file__, md.version('pytest'))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    version, where, pytest_version = p.stdout.split()
    assert version == "1.0" and Path(where).is_relative_to(target)
    assert pytest_version != "0.0.1" and not any(target.glob("pytest*"))


def test_dry_run_checks_the_eager_front_end(gpu_check):
    # An eager step as a user sizing it asks (estimate_step(...,
    # frontend="eager", device=<the run's target>)) against measure_step on
    # the same device: on the CPU the profiler's requested bytes, exact.
    result = gpu_check.run(torch.device("cpu"), [], [], eager_steps=["mlp_adamw_3_steps", "gpt_block"],
                           time_budget=None)
    assert not result.failures and not result.not_run
    requested = [r for r in result.rows if r.quantity.startswith("requested")]
    assert {r.program for r in requested} == {"eager mlp_adamw_3_steps", "eager gpt_block"}
    assert len(requested) == 4 and all(r.compared and not r.mismatch for r in requested)
