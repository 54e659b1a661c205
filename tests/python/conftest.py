"""Shared fixtures for peakmem's Python tests.

lightning-thunder 0.2.6 does not import under torch 2.13 by itself; every
test that needs it goes through the `thunder` fixture (peakmem's compat shim).
"""

from __future__ import annotations

import os

# The CPU measurements the tests compare against are made with oneDNN's AVX2
# kernels. On CPUs with AVX-512 or AMX, oneDNN's bf16 linear allocates a
# scratch buffer whose size depends on the instruction set, which peakmem
# does not model yet: measured for linear of bf16 [6, 24] by [8, 24] with a
# bias, 1,152 bytes (AVX512_CORE), 11,008 (AVX512_CORE_BF16), 5,120
# (AVX512_CORE_AMX), none with AVX2. Set before torch loads oneDNN; test
# subprocesses inherit it.
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")

import importlib.util
import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "corpus"
ZOO = REPO / "tests" / "data" / "zoo"
REPORT_SCHEMA = REPO / "docs" / "report.schema.json"


@cache
def _report_validator():
    from jsonschema import Draft202012Validator

    schema = json.loads(REPORT_SCHEMA.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def venv_free(text: str) -> str:
    """A trace's text without where the venv that made it lies: source-location
    comments name files under it (`# <venv>/lib/python3.11/site-packages/torch/...`)."""
    return re.sub(r"# \S*?/site-packages/", "# <site-packages>/", text)


def checked_json(text: str | bytes, kind: str = "report") -> Any:
    """Parses JSON that peakmem wrote and validates it against
    docs/report.schema.json; `kind` ("report" or "diff") is which of the
    schema's two forms it must be. Every test reading peakmem's JSON output
    reads it through this."""
    data = json.loads(text)
    errors = sorted(_report_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, f"not valid under {REPORT_SCHEMA.name}: " + "; ".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors[:5]
    )
    assert ("model" in data) == (kind == "report") and ("peak_delta_bytes" in data) == (kind == "diff"), kind
    return data


def cli() -> str:
    """The peakmem CLI the tests run: $PEAKMEM_CLI, else build/peakmem."""
    path = os.environ.get("PEAKMEM_CLI", str(REPO / "build" / "peakmem"))
    assert Path(path).is_file(), f"the peakmem CLI is not at {path} (build it, or set PEAKMEM_CLI)"
    return path


@pytest.fixture(scope="session")
def thunder():
    from peakmem._thunder_compat import import_thunder

    return import_thunder()


@pytest.fixture(scope="session")
def make_corpus(thunder):
    """scripts/make_corpus.py as a module (its loader and tracing helpers)."""
    name = "peakmem_make_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "make_corpus.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def jit_traces(thunder):
    """jit_traces(fn, *inputs) -> (forward trace, backward trace or None).

    Runs `fn` under thunder.jit (CPU, default executors). When an output
    requires grad, calls backward with all-ones cotangents on every such
    output and returns the backward execution trace too.
    """
    import torch

    def run(fn, *inputs):
        jfn = thunder.jit(fn)
        out = jfn(*inputs)
        fw = thunder.last_traces(jfn)[-1]
        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
        outs = [o for o in outs if o.requires_grad]
        if not outs:
            return fw, None
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
        return fw, thunder.last_backward_traces(jfn)[-1]

    return run


def corpus_programs() -> list[str]:
    """Names of the corpus programs and the model zoo's
    (tests/data/{corpus,zoo}/<name>/program.py; the names are distinct)."""
    return sorted(p.parent.name for root in (CORPUS, ZOO) for p in root.glob("*/program.py"))


def program_dir(name: str) -> Path:
    """The directory of corpus or zoo program `name`."""
    return CORPUS / name if (CORPUS / name / "program.py").exists() else ZOO / name


@pytest.fixture(scope="session")
def live_corpus(make_corpus):
    """live_corpus(name) -> {"fw": trace, "bw": trace}: the program re-traced
    now by thunder.jit, once per session."""
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            cache[name] = make_corpus.jit_traces(make_corpus.load_program(program_dir(name)))
        return cache[name]

    return get
