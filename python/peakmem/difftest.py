"""Differential testing: random tensor programs, traced by Thunder, measured
by PyTorch, predicted by peakmem's runtime model.

    python -m peakmem.difftest --count 5000 --seed 0 --save tests/data/regressions

Each program is generated from a seed as Python source (chains and DAGs of
elementwise ops, scalar ops, reductions, matmuls, views — unsqueeze, expand,
permute, transpose, slicing, split, reshape, contiguous — in-place ops and
dtype conversions, on random shapes), compiled with ``thunder.jit`` on the
CPU, run forward and (when it is differentiable) backward. For the forward
and the backward execution trace, the measured peak and final bytes
(``peakmem.measure``) are compared with the runtime model's prediction from
the live trace and from its printed text. A mismatch is shrunk to a minimal
program (statements removed one at a time while the mismatch persists) and
can be saved as a regression case.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

FLOAT_DTYPES = ("torch.float32", "torch.float64", "torch.bfloat16")


@dataclass
class Var:
    name: str
    shape: tuple[int, ...]
    dtype: str = "torch.float32"


@dataclass
class Program:
    seed: int
    inputs: list[Var]
    lines: list[str]
    returned: list[str]
    in_place: bool = False

    def source(self, lines: list[str] | None = None, returned: list[str] | None = None) -> str:
        lines = self.lines if lines is None else lines
        returned = self.returned if returned is None else returned
        params = ", ".join(v.name for v in self.inputs)
        body = "\n".join(f"    {line}" for line in lines) or "    pass"
        ret = ", ".join(returned)
        return f"import torch\n\ndef prog({params}):\n{body}\n    return {ret}\n"


class _Generator:
    """Builds one random program. Every op knows the shapes it accepts."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.pool: list[Var] = []
        self.lines: list[str] = []
        self.counter = 0
        self.in_place = False

    def fresh(self, shape: tuple[int, ...], dtype: str) -> Var:
        v = Var(f"v{self.counter}", tuple(shape), dtype)
        self.counter += 1
        return v

    def pick(self, pred=lambda v: True) -> Var | None:
        candidates = [v for v in self.pool if pred(v)]
        if not candidates:
            return None
        # Prefer recent values: programs become chains with some fan-out.
        weights = [1 + i for i in range(len(candidates))]
        return self.rng.choices(candidates, weights=weights)[0]

    def emit(self, expr: str, shape: tuple[int, ...], dtype: str) -> Var:
        v = self.fresh(shape, dtype)
        self.lines.append(f"{v.name} = {expr}")
        self.pool.append(v)
        return v

    # ---- ops: each returns True if it emitted something
    def op_binary(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        same = [v for v in self.pool if v.shape == a.shape and v.dtype == a.dtype]
        tail = [v for v in self.pool if len(a.shape) >= 1 and v.shape == a.shape[-1:] and v.dtype == a.dtype]
        b = self.rng.choice(same + tail) if (same or tail) else a
        op = self.rng.choice(["+", "-", "*", "/"])
        return bool(self.emit(f"{a.name} {op} {b.name}", a.shape, a.dtype))

    def op_scalar(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        c = self.rng.choice(["2.0", "0.5", "1", "3"])
        op = self.rng.choice(["+", "*", "-"])
        return bool(self.emit(f"{a.name} {op} {c}", a.shape, a.dtype))

    def op_unary(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        f = self.rng.choice(["torch.neg", "torch.exp", "torch.tanh", "torch.relu", "torch.sigmoid"])
        return bool(self.emit(f"{f}({a.name})", a.shape, a.dtype))

    def op_reduce(self) -> bool:
        a = self.pick(lambda v: len(v.shape) >= 2)
        if a is None:
            return False
        dim = self.rng.randrange(len(a.shape))
        keep = self.rng.random() < 0.5
        f = self.rng.choice(["sum", "mean"])
        shape = list(a.shape)
        if keep:
            shape[dim] = 1
        else:
            del shape[dim]
        return bool(self.emit(f"{a.name}.{f}({dim}, keepdim={keep})", tuple(shape), a.dtype))

    def op_matmul(self) -> bool:
        a = self.pick(lambda v: len(v.shape) == 2 and v.dtype != "torch.bfloat16")
        if a is None:
            return False
        if self.rng.random() < 0.5:
            return bool(self.emit(f"{a.name} @ {a.name}.t()", (a.shape[0], a.shape[0]), a.dtype))
        return bool(self.emit(f"torch.matmul({a.name}.t(), {a.name})", (a.shape[1], a.shape[1]), a.dtype))

    def op_unsqueeze_expand(self) -> bool:
        a = self.pick(lambda v: 1 <= len(v.shape) <= 2)
        if a is None:
            return False
        n = self.rng.choice([2, 3])
        u = self.emit(f"{a.name}.unsqueeze(0)", (1,) + a.shape, a.dtype)
        return bool(self.emit(f"{u.name}.expand({n}, {', '.join(str(d) for d in a.shape)})", (n,) + a.shape, a.dtype))

    def op_permute(self) -> bool:
        a = self.pick(lambda v: len(v.shape) >= 2)
        if a is None:
            return False
        if len(a.shape) == 2 or self.rng.random() < 0.3:
            d0, d1 = self.rng.sample(range(len(a.shape)), 2)
            shape = list(a.shape)
            shape[d0], shape[d1] = shape[d1], shape[d0]
            return bool(self.emit(f"{a.name}.transpose({d0}, {d1})", tuple(shape), a.dtype))
        perm = list(range(len(a.shape)))
        self.rng.shuffle(perm)
        return bool(self.emit(f"{a.name}.permute({', '.join(map(str, perm))})", tuple(a.shape[p] for p in perm), a.dtype))

    def op_slice(self) -> bool:
        a = self.pick(lambda v: len(v.shape) >= 1 and v.shape[-1] >= 2)
        if a is None:
            return False
        if len(a.shape) >= 2 and a.shape[0] >= 2 and self.rng.random() < 0.5:
            return bool(self.emit(f"{a.name}[1:]", (a.shape[0] - 1,) + a.shape[1:], a.dtype))
        idx = ", ".join([":"] * (len(a.shape) - 1) + ["1:"])
        return bool(self.emit(f"{a.name}[{idx}]", a.shape[:-1] + (a.shape[-1] - 1,), a.dtype))

    def op_split(self) -> bool:
        a = self.pick(lambda v: len(v.shape) >= 1 and v.shape[0] >= 2)
        if a is None:
            return False
        first = a.shape[0] // 2
        p0 = self.fresh((first,) + a.shape[1:], a.dtype)
        p1 = self.fresh((a.shape[0] - first,) + a.shape[1:], a.dtype)
        f = self.rng.choice(["split", "chunk"])
        arg = f"[{first}, {a.shape[0] - first}]" if f == "split" else 2
        if f == "chunk":
            size = -(-a.shape[0] // 2)
            p0.shape = (size,) + a.shape[1:]
            p1.shape = (a.shape[0] - size,) + a.shape[1:]
            if p1.shape[0] == 0:
                return False
        self.lines.append(f"{p0.name}, {p1.name} = torch.{f}({a.name}, {arg})")
        self.pool.extend([p0, p1])
        return True

    def op_reshape(self) -> bool:
        a = self.pick(lambda v: len(v.shape) >= 1)
        if a is None:
            return False
        numel = 1
        for d in a.shape:
            numel *= d
        r = self.rng.random()
        if r < 0.4:
            return bool(self.emit(f"{a.name}.reshape(-1)", (numel,), a.dtype))
        if r < 0.7 and len(a.shape) >= 2:
            return bool(self.emit(f"{a.name}.flatten()", (numel,), a.dtype))
        divisors = [d for d in range(2, numel) if numel % d == 0]
        if not divisors:
            return bool(self.emit(f"{a.name}.reshape({numel})", (numel,), a.dtype))
        d = self.rng.choice(divisors)
        return bool(self.emit(f"{a.name}.reshape({d}, {numel // d})", (d, numel // d), a.dtype))

    def op_contiguous(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        return bool(self.emit(f"{a.name}.contiguous()", a.shape, a.dtype))

    def op_to(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        dtype = self.rng.choice([d for d in FLOAT_DTYPES if d != a.dtype] + [a.dtype])
        return bool(self.emit(f"{a.name}.to({dtype})", a.shape, dtype))

    def op_in_place(self) -> bool:
        # Only on a fresh intermediate: in-place on an input that requires grad is an error.
        a = self.pick(lambda v: not v.name.startswith("x"))
        if a is None:
            return False
        c = self.emit(f"{a.name} * 1.0", a.shape, a.dtype)
        b = self.pick(lambda v: v.shape == a.shape and v.dtype == a.dtype)
        self.in_place = True
        if b is not None and self.rng.random() < 0.5:
            self.lines.append(f"{c.name}.add_({b.name})")
        else:
            self.lines.append(f"{c.name}.mul_(2.0)")
        return True

    def op_cat(self) -> bool:
        a = self.pick(lambda v: len(v.shape) >= 1)
        if a is None:
            return False
        b = self.pick(lambda v: v.shape == a.shape and v.dtype == a.dtype)
        if b is None:
            return False
        return bool(self.emit(f"torch.cat([{a.name}, {b.name}], 0)", (2 * a.shape[0],) + a.shape[1:], a.dtype))

    def build(self) -> Program:
        n_inputs = self.rng.choice([1, 2, 3])
        m = self.rng.choice([2, 3, 4, 5, 8])
        n = self.rng.choice([2, 3, 4, 6])
        inputs = []
        for i in range(n_inputs):
            shape = self.rng.choice([(m, n), (m, n), (n,), (2, m, n)])
            inputs.append(Var(f"x{i}", shape))
        self.pool.extend(inputs)
        ops = [
            (self.op_binary, 4), (self.op_scalar, 2), (self.op_unary, 2), (self.op_reduce, 1),
            (self.op_matmul, 1), (self.op_unsqueeze_expand, 1), (self.op_permute, 2),
            (self.op_slice, 1), (self.op_split, 1), (self.op_reshape, 2), (self.op_contiguous, 1),
            (self.op_to, 1), (self.op_in_place, 1), (self.op_cat, 1),
        ]
        funcs, weights = zip(*ops)
        target = self.rng.randint(2, 10)
        tries = 0
        while len(self.lines) < target and tries < 100:
            tries += 1
            self.rng.choices(funcs, weights=weights)[0]()
        made = [v for v in self.pool if not v.name.startswith("x")] or self.pool
        returned = [made[-1].name]
        extra = [v.name for v in made[:-1] if self.rng.random() < 0.2]
        return Program(self.seed, inputs, self.lines, returned + extra, self.in_place)


def generate(seed: int) -> Program:
    return _Generator(seed).build()


@dataclass
class Outcome:
    seed: int
    kind: str  # "fw" or "bw"
    measured: tuple[int, int]
    predicted_live: tuple[int, int]
    predicted_text: tuple[int, int] | None
    ok: bool
    error: str | None = None


@dataclass
class RunResult:
    program: Program
    outcomes: list[Outcome] = field(default_factory=list)
    error: str | None = None  # the program itself failed to trace/run

    @property
    def mismatches(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]


def _compile(source: str):
    namespace: dict[str, Any] = {}
    exec(compile(source, "<difftest>", "exec"), namespace)
    return namespace["prog"]


def run_source(source: str, inputs: list[Var], seed: int = 0) -> list[Outcome]:
    """Traces, measures and predicts one program given as source."""
    from peakmem._thunder_compat import import_thunder

    thunder = import_thunder()
    import torch

    import peakmem
    from peakmem.measure import measure

    fn = _compile(source)
    gen = torch.Generator().manual_seed(seed)
    args = [torch.randn(v.shape, generator=gen, dtype=torch.float32).requires_grad_(True) for v in inputs]
    jf = thunder.jit(fn)
    out = jf(*args)
    outs = out if isinstance(out, tuple) else (out,)
    traces = [("fw", thunder.last_traces(jf)[-1])]
    diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    if diff:
        loss = sum(o.float().sum() for o in diff)
        loss.backward()
        bw = thunder.last_backward_traces(jf)
        if bw:
            traces.append(("bw", bw[-1]))
    results = []
    for kind, trc in traces:
        m = measure(trc)
        live = peakmem.analyze(trc, model="runtime")
        text = peakmem.analyze(str(trc) + "\n", model="runtime")
        measured = (m.peak_bytes, m.final_bytes)
        pl = (live.peak_bytes, live.final_bytes)
        pt = (text.peak_bytes, text.final_bytes)
        results.append(Outcome(seed, kind, measured, pl, pt, ok=(pl == measured and pt == measured)))
    return results


def run_program(program: Program) -> RunResult:
    result = RunResult(program)
    try:
        result.outcomes = run_source(program.source(), program.inputs, program.seed)
    except Exception as e:  # a program Thunder cannot trace is not a peakmem finding
        result.error = f"{type(e).__name__}: {e}"
    return result


def shrink(program: Program, kind: str) -> str:
    """Removes statements while the `kind` trace still mismatches; returns the source."""
    lines = list(program.lines)
    returned = list(program.returned)

    def still_fails(candidate_lines: list[str], candidate_ret: list[str]) -> bool:
        try:
            outs = run_source(program.source(candidate_lines, candidate_ret), program.inputs, program.seed)
        except Exception:
            return False
        return any(o.kind == kind and not o.ok for o in outs)

    changed = True
    while changed:
        changed = False
        for i in range(len(lines)):
            cand = lines[:i] + lines[i + 1 :]
            if still_fails(cand, returned):
                lines = cand
                changed = True
                break
        if len(returned) > 1:
            for i in range(len(returned)):
                cand_ret = returned[:i] + returned[i + 1 :]
                if still_fails(lines, cand_ret):
                    returned = cand_ret
                    changed = True
                    break
    return program.source(lines, returned)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="first seed; programs use seed..seed+count-1")
    parser.add_argument("--save", help="directory to save shrunk mismatches as regression cases")
    parser.add_argument("--no-shrink", action="store_true")
    args = parser.parse_args(argv)
    start = time.time()
    ran = traced = mismatched = 0
    failures = []
    for seed in range(args.seed, args.seed + args.count):
        r = run_program(generate(seed))
        ran += 1
        if r.error:
            continue
        traced += 1
        if r.mismatches:
            mismatched += 1
            for o in r.mismatches:
                source = r.program.source() if args.no_shrink else shrink(r.program, o.kind)
                failures.append({"seed": seed, "kind": o.kind, "measured": o.measured,
                                 "predicted_live": o.predicted_live, "predicted_text": o.predicted_text,
                                 "source": source, "inputs": [list(v.shape) for v in r.program.inputs]})
                print(f"MISMATCH seed={seed} {o.kind}: measured {o.measured} live {o.predicted_live} "
                      f"text {o.predicted_text}\n{source}", flush=True)
                if args.save:
                    os.makedirs(args.save, exist_ok=True)
                    with open(os.path.join(args.save, f"seed{seed}_{o.kind}.json"), "w") as f:
                        json.dump(failures[-1], f, indent=1)
    elapsed = time.time() - start
    print(json.dumps({"programs": ran, "traced": traced, "mismatched_programs": mismatched,
                      "untraceable": ran - traced, "seconds": round(elapsed, 1)}))
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
