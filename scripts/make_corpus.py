"""Regenerates peakmem's corpus of real Thunder execution traces, and the model zoo's.

Run from anywhere (CPU only, about a minute):

    .venv/bin/python scripts/make_corpus.py            # every program
    .venv/bin/python scripts/make_corpus.py xyz mlp    # just these

Needs torch and lightning-thunder (the versions pinned in pyproject.toml's
``thunder`` extra) and an installed peakmem (``pip install .``) for the JSON
export and the measurement harness. This script pins nothing itself; it
records the versions it ran with in every ``measured.json``.

Layout (see tests/data/corpus/README.md): each program lives in
``tests/data/corpus/<program>/program.py`` or, for the model zoo's
architectures, ``tests/data/zoo/<program>/program.py`` (names are distinct
across both), written by hand; it is the source of truth and defines

    BACKWARD          whether to make (and keep) a backward trace
    make_function()   the function or nn.Module to ``thunder.jit``
    make_inputs()     the example inputs (tensors; requires_grad as needed)

For each program this script imports ``program.py`` (under the stable file
name ``tests/data/{corpus,zoo}/<program>/program.py``, which is what the traces'
source comments print), runs ``thunder.jit`` with Thunder's default executors
on CPU, calls it, calls ``backward`` with all-ones cotangents on every output
that requires grad, and writes next to it:

    fw.trace, bw.trace    str(trace) of the last forward / backward execution
                          trace (the "(took N milliseconds)" of each
                          "# Constructed by" header is written as "N": it is
                          the only nondeterministic text)
    fw.json, bw.json      peakmem.to_json_export(trace)
    thunder.json          Thunder's get_alloc_memory for each: peak and the
                          breakdown as an ordered list of [key, bytes] pairs
    measured.json         peakmem.measure on CPU (peak, final, input bytes
                          and the allocation events) for each trace, measured
                          twice (the script fails if the two differ), plus
                          the versions and thread count it ran with

A program may define ``EXTRA_MEASUREMENTS``, a dict of name -> (trace
"fw"/"bw", variant); the one variant is ``"tuple_args"``: the same trace
called with every list argument turned into a tuple and the caller keeping
all arguments (``convention="forward"``), so ``clear_mutable_collection``
frees nothing.

The functions here are also used by tests/python (live re-tracing).
"""

from __future__ import annotations

import importlib.metadata
import json
import linecache
import os
import platform
import re
import sys
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "corpus"
ZOO = REPO / "tests" / "data" / "zoo"
ROOTS = (CORPUS, ZOO)

_TOOK = re.compile(r"^(# Constructed by .*\(took )\d+( milliseconds\))$", re.MULTILINE)


def import_thunder():
    from peakmem._thunder_compat import import_thunder as _import

    return _import()


def program_dirs(names: list[str] | None = None) -> list[Path]:
    dirs = sorted((p.parent for root in ROOTS for p in root.glob("*/program.py")), key=lambda d: d.name)
    if names:
        wanted = set(names)
        missing = wanted - {d.name for d in dirs}
        if missing:
            raise SystemExit(f"no such corpus program: {', '.join(sorted(missing))}")
        dirs = [d for d in dirs if d.name in wanted]
    return dirs


def load_program(directory: Path) -> types.ModuleType:
    """Imports directory/program.py under a stable, checkout-independent file name."""
    path = Path(directory) / "program.py"
    filename = path.resolve().relative_to(REPO).as_posix()
    return load_module(path, filename, f"peakmem_corpus_{path.parent.name}")


def load_module(path: Path, filename: str, name: str) -> types.ModuleType:
    """Imports `path` as module `name` with source file name `filename` (what traces print)."""
    source = path.read_text()
    # linecache lets Thunder (and tracebacks) print the source lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module  # dataclasses look their module up here
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _flat_tensors(x: Any) -> list:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for i in x for t in _flat_tensors(i)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat_tensors(v)]
    return []


def _on_device(x: Any, device: Any) -> Any:
    """`x` with every tensor moved to `device`; a leaf that requires grad
    stays a leaf that requires grad (the program's inputs as it made them)."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().to(device).requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_on_device(i, device) for i in x)
    if isinstance(x, dict):
        return {k: _on_device(v, device) for k, v in x.items()}
    return x


def jit_traces(module: types.ModuleType, device: str | None = None,
               executors: list | None = None) -> dict[str, Any]:
    """Runs the program under thunder.jit; returns {"fw": trace, "bw": trace} (bw if BACKWARD).

    `device` (None: where the program makes them, the CPU) is where its
    module and inputs are moved before the call; `executors` is
    ``thunder.jit``'s (None: Thunder's default executors)."""
    import torch

    thunder = import_thunder()
    fn, inputs = module.make_function(), module.make_inputs()
    if device is not None:
        if isinstance(fn, torch.nn.Module):
            fn = fn.to(device)
        inputs = _on_device(inputs, device)
    jfn = thunder.jit(fn) if executors is None else thunder.jit(fn, executors=executors)
    out = jfn(*inputs)
    traces = {"fw": thunder.last_traces(jfn)[-1]}
    if module.BACKWARD:
        outs = [t for t in _flat_tensors(out) if t.requires_grad]
        torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
        traces["bw"] = thunder.last_backward_traces(jfn)[-1]
    return traces


def trace_text(trace: Any) -> str:
    return _TOOK.sub(r"\1N\2", str(trace)) + "\n"


def thunder_estimate(trace: Any) -> dict[str, Any]:
    from thunder.examine.memory_calculation import get_alloc_memory

    peak, breakdown = get_alloc_memory(trace)
    return {"peak": peak, "breakdown": [[k, v] for k, v in breakdown.items()]}


def _tuplify(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return tuple(_tuplify(i) for i in x)
    return x


def measure_trace(trace: Any, variant: str | None = None) -> dict[str, Any]:
    import peakmem
    from peakmem.measure import make_inputs

    if variant is None:
        kw: dict[str, Any] = {}
    elif variant == "tuple_args":
        kw = {"convention": "forward", "inputs": lambda: _tuplify(make_inputs(trace)[0])}
    else:
        raise ValueError(f"unknown measurement variant {variant!r}")
    first = peakmem.measure(trace, **kw)
    second = peakmem.measure(trace, **kw)
    if first != second:
        raise RuntimeError(f"two measurements differ:\n{first}\n{second}")
    if first.ignored_free_bytes:
        raise RuntimeError(f"measurement saw frees of foreign blocks: {first}")
    return {
        "convention": first.convention,
        "peak_bytes": first.peak_bytes,
        "final_bytes": first.final_bytes,
        "input_bytes": first.input_bytes,
        "events": list(first.events),
    }


def versions() -> dict[str, str]:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "lightning-thunder": importlib.metadata.version("lightning-thunder"),
        "peakmem": importlib.metadata.version("peakmem"),
    }


def dump_json(obj: Any) -> str:
    """Indented JSON with every innermost list on one line."""
    text = json.dumps(obj, indent=2)
    return re.sub(r"\[[^\[\]{}]*\]", lambda m: re.sub(r"\s*\n\s*", " ", m.group(0)).replace("[ ", "[").replace(" ]", "]"), text) + "\n"


def make(directory: Path) -> list[str]:
    """Writes every generated file of one program; returns the trace kinds made."""
    import peakmem
    import torch

    module = load_program(directory)
    traces = jit_traces(module)
    measured: dict[str, Any] = {"versions": versions(), "device": "cpu", "num_threads": torch.get_num_threads()}
    estimates: dict[str, Any] = {}
    for kind, trc in traces.items():
        (directory / f"{kind}.trace").write_text(trace_text(trc))
        (directory / f"{kind}.json").write_text(peakmem.to_json_export(trc))
        estimates[kind] = thunder_estimate(trc)
        measured[kind] = measure_trace(trc)
    for name, (kind, variant) in getattr(module, "EXTRA_MEASUREMENTS", {}).items():
        measured[name] = measure_trace(traces[kind], variant)
    for stale in {"fw", "bw"} - traces.keys():
        for ext in ("trace", "json"):
            (directory / f"{stale}.{ext}").unlink(missing_ok=True)
    (directory / "thunder.json").write_text(dump_json(estimates))
    (directory / "measured.json").write_text(dump_json(measured))
    return list(traces)


def main(argv: list[str]) -> int:
    import torch

    torch.manual_seed(0)
    total = 0
    for d in program_dirs(argv):
        kinds = make(d)
        total += len(kinds)
        print(f"{d.name}: {', '.join(kinds)}", flush=True)
    print(f"{total} traces", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    # The tests measure with oneDNN's AVX2 kernels (see tests/python/conftest.py);
    # the stored measurements must come from the same kernels.
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    sys.exit(main(sys.argv[1:]))
