"""The Python package's import graph has layers and no circle: each module
imports only from the layers below its own, directly or through others, and
no package's modules import each other in a circle. The layers are declared
in pyproject.toml ([tool.importlinter], every module placed) and checked by
import-linter on the package's source (python/peakmem), as peakmem_layers
checks the C++ folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _lint(source_root: Path, config: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(source_root)}
    return subprocess.run([str(lint), "--no-cache", "--no-logo", str(config)], cwd=source_root, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_package_keeps_its_layers_and_has_no_circle():
    r = _lint(REPO / "python", REPO / "pyproject.toml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Contracts: 3 kept, 0 broken." in r.stdout, r.stdout


def test_an_upward_import_a_circle_and_an_unplaced_module_are_each_caught(tmp_path):
    # The same contracts on altered copies of the package: each alteration
    # alone breaks the contract that forbids it.
    def altered(name: str, path: str, text: str) -> str:
        root = tmp_path / name
        shutil.copytree(REPO / "python" / "peakmem", root / "peakmem")
        target = root / "peakmem" / path
        target.write_text((target.read_text() if target.exists() else "") + text)
        r = _lint(root, REPO / "pyproject.toml")
        assert r.returncode != 0, f"{name}: lint-imports passed:\n{r.stdout}"
        return r.stdout

    upward = altered("upward", "recompute.py", "\nfrom . import batch_search\n")
    assert "peakmem.recompute -> peakmem.batch_search" in upward, upward
    circle = altered("circle", "step/compiled.py", "\nfrom . import frontend\n")
    assert "peakmem.step.compiled -> peakmem.step.frontend" in circle, circle
    unplaced = altered("unplaced", "new_module.py", "\n")
    assert "peakmem.new_module" in unplaced, unplaced
