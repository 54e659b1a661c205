"""What a benchmark's JSON results record about the run that made them."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib.metadata import version


def provenance() -> dict:
    """The commit the results are of, the torch and transformers releases,
    the oneDNN instruction set asked for, the threads and the machine."""
    import torch

    here = os.path.dirname(os.path.abspath(__file__))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                            text=True).stdout.strip()
    return {"commit": commit, "torch": torch.__version__, "transformers": version("transformers"),
            "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "the machine's"),
            "threads": torch.get_num_threads(), "machine": platform.machine()}


def write_rows(path: str | None, rows: list, indent: int = 2) -> None:
    """The rows, with the run's provenance, as JSON at `path` (None: not written)."""
    import json

    if path:
        with open(path, "w") as f:
            json.dump({**provenance(), "rows": rows}, f, indent=indent)


def side_by_side_summary(rows: list, theirs: str, label: str) -> None:
    """Prints each tool's misses (a row's ``<tool>_error``) and on how many
    of the rows with a measured figure peakmem and the tool `theirs` (its
    rows' key prefix, printed as `label`) are exact (``<tool>_off`` 0)."""
    for r in rows:
        for tool in ("peakmem", theirs):
            if f"{tool}_error" in r:
                print(f"{r['step']}: {tool} raised {r[tool + '_error']}")
    measured = [r for r in rows if r.get("measured") is not None]
    print(f"peakmem exact on {sum(r.get('peakmem_off') == 0 for r in measured)} of {len(measured)} steps; "
          f"{label} exact on {sum(r.get(theirs + '_off') == 0 for r in measured)} of {len(measured)}")
