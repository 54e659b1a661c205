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
