"""The README's accuracy table is what the models predict today."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_accuracy_table_is_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "accuracy_table.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
