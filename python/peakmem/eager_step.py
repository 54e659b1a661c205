"""The eager front end's old import path: ``peakmem.eager_step`` is
``peakmem.step.eager``, the same module object (its functions, and any
attribute set on it, are that module's)."""

import sys

from .step import eager

sys.modules[__name__] = eager
