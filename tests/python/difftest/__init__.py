"""The differential tester: random tensor programs (Hypothesis strategies),
traced by Thunder, measured by PyTorch, predicted by peakmem's runtime model.

Used by tests/python/test_differential.py (a short, derandomized sample and
the regression cases) and, from the repository root, by the long run:

    python -m tests.python.difftest --count 5000 [--seed N] [--save tests/data/regressions]
"""

from .harness import BackwardMismatch, ForwardMismatch, Mismatch, Outcome, check, run_source
from .programs import FLOAT_DTYPES, Program, Var, programs

__all__ = ["BackwardMismatch", "FLOAT_DTYPES", "ForwardMismatch", "Mismatch", "Outcome", "Program", "Var",
           "check", "programs", "run_source"]
