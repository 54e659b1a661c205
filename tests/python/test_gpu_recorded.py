"""The GPU check's recorded runs as test data: every table kept under
tests/data/gpu (``scripts/gpu-check --keep DIR``; on a GPU the default)
is predicted again here, without the device, from the programs it kept:

- a trace: ``peakmem.analyze`` of its printed text with the caching
  allocator (a CUDA trace takes CUDA's rules, execution_context.h);
- a Thunder step: ``peakmem step FILE --allocator cuda-caching`` on the
  exported step file;
- an eager step: ``estimate_step(..., frontend="eager", device=TARGET)`` of
  the step-corpus entry, in a warm process (the run's own estimate).

Each row compared when it was measured is checked against the measurement,
the truth: a row that was exact stays exact, and one that differed may not
differ more (a rule that improves it passes; one that makes it worse
fails). A run on a CPU (``--dry-run``) measures requested bytes with the
profiler, so its tables check those rows alike."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import cli

REPO = Path(__file__).resolve().parents[2]
TABLES = sorted((REPO / "tests" / "data" / "gpu").glob("*/table.json"))
KEYS = {"requested peak": "peak_bytes", "requested final": "final_bytes",
        "allocated peak": "allocated_peak_bytes", "allocated final": "allocated_final_bytes",
        "reserved peak": "reserved_peak_bytes", "reserved final": "reserved_final_bytes",
        "segments final": "segments_final"}


def _gpu_check():
    spec = importlib.util.spec_from_file_location("peakmem_gpu_check", REPO / "scripts" / "gpu_check.py")
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "run"):
        spec.loader.exec_module(module)
    return module


def _figures(report: dict, allocator: dict | None) -> dict[str, int | None]:
    out = {"requested peak": report["peak_bytes"], "requested final": report["final_bytes"]}
    for quantity, key in KEYS.items():
        if quantity.startswith("requested"):
            continue
        out[quantity] = None if allocator is None else allocator.get(key)
    return out


def _predict(folder: Path, how: str, steady: bool = False) -> dict[str, int | None]:
    """The figures of one kept program, predicted again."""
    import peakmem

    if how.endswith(".trace"):
        r = peakmem.analyze(folder / how, allocator="cuda-caching")
        return _figures({"peak_bytes": r.peak_bytes, "final_bytes": r.final_bytes}, r.allocator)
    if how.endswith(".step.json"):
        p = subprocess.run([cli(), "step", str(folder / how), "--format", "json", "--allocator", "cuda-caching"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        report = json.loads(p.stdout)
        return _figures(report, report["allocator"])
    kind, name, target_name = how.split(" ")
    assert kind == "eager", how
    from peakmem.step.device_target import device_target

    entry = _gpu_check()._entry(name)
    torch.manual_seed(0)
    model, inputs = entry.make(), entry.inputs()
    target = device_target(target_name, model)
    if target.cuda:
        target = target.libraries_warm()
    # A table recorded before the steady default measured one step where
    # the entry names none (measure_step's default then).
    setup = dict(entry.setup) if steady else {"steps": 1, **entry.setup}
    r = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, allocator="cuda-caching", **setup,
                              frontend="eager", device=target)
    figures = _figures({"peak_bytes": r.peak_bytes, "final_bytes": r.final_bytes}, r.allocator)
    figures["segments final"] = (r.allocator or {}).get("segments_final")
    return figures


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.parent.name)
def test_recorded_rows_are_predicted_again(thunder, table):
    data = json.loads(table.read_text())
    rows = [r for r in data["rows"] if r["measured"] is not None and r["predicted"] is not None]
    assert rows, f"{table}: no compared row"
    checked = 0
    for label, how in data["kept"].items():
        predicted = _predict(table.parent, how, data.get("steady_default", False))
        for row in (r for r in rows if r["program"] == label):
            now = predicted[row["quantity"]]
            measured = row["measured"]
            worst = abs(row["measured"] - row["predicted"])  # 0 for a row that was exact
            assert now is not None and abs(measured - now) <= worst, (
                f"{table.parent.name}: {label} {row['quantity']}: predicted {now:,}, measured {measured:,} "
                f"(the recorded run's prediction was off by {worst:,})")
            checked += 1
    assert checked == sum(1 for r in rows if r["program"] in data["kept"]) > 0
