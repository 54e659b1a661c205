"""A training step as an exact function of its size, from a few Thunder traces.

    f = peakmem.peak_formula(model, lambda n: (torch.randn(n, 256, device="meta"),),
                             loss_fn=mse_loss, optimizer=torch.optim.AdamW)
    f.peak_bytes(512), f.estimate(512, budget="80GiB").fits, f.traces

`make_inputs(n)` makes the step's inputs at size `n`: a batch size, or a
sequence length, or whatever else the caller makes scale. Thunder traces the
step (``estimate_step``'s step, made by the same code) at two sizes ``a`` and
``b``. Where the step is the same program at every size, its two printed
traces differ only in integer literals (shapes, reshape targets, numels), and
each such integer is ``c + s * n`` with integers ``c`` and ``s``: what a shape
is when every dimension is a constant or a multiple of `n` (``[B, H, S, S]``
in `S` included: its dimensions are affine, their product is not, and the
product is the simulation's to take). So the step at any `n` is written down
without Thunder: each integer of the two texts paired, ``s = (v_b - v_a) /
(b - a)`` (not an integer: not affine), and the same for the integers of the
spec (``input_bytes``, ``input_storages``, ``cotangent_bytes``, ...); every
other token, every name and the optimizer's programs must be equal. The
step's peak at `n` is then the C++ simulation of that text (milliseconds to
seconds; no Thunder).

A third traced size verifies it (``verify=True``, the default): the derived
texts at the third size must equal Thunder's own, integer for integer, and
the two simulated steps the same peak. Two points always fit a line; the
third is what says the integers are affine rather than assumed so.

Where the traces differ otherwise (a branch on ``x.shape[0]``, a size at
which Thunder broadcasts otherwise), the step's structure changes with `n`
and ``peak_formula`` raises ``StructureChanges`` saying where;
``max_batch_size`` then searches with a trace per size, and says so.

The default sizes are 2, 3 and 4, not 1: at size 1 a dimension of 1 changes
the program (Thunder's backward of a position embedding broadcast over the
batch sums over one dimension fewer at batch 1 and unsqueezes instead: the
step corpus's GPT LM), so a formula is derived for ``n >= min(sizes)`` only,
and smaller sizes are traced one by one.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Unpack

from .step.options import EstimateOptions, takes

__all__ = ["PeakFormula", "StructureChanges", "peak_formula"]

DEFAULT_SIZES = (2, 3, 4)

# A number of a printed trace: a float (`1e-06`, `0.5`) or an integer; not the
# digits of a name (`t1169`, `float32`, `t_blocks_0_ln_1_bias`).
_NUMBER = re.compile(r"(?<![A-Za-z_0-9.])(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)")
# Thunder's header comment says how long its pass took (`# Constructed by
# Delete Last Used (took 26 milliseconds)`): a comment, which no simulation
# reads, and a number that differs from run to run. Dropped from every text.
_HEADER = re.compile(r"^# Constructed by [^\n]*\n", re.M)


class StructureChanges(ValueError):
    """The step is not one program at every size: its traces (or spec) at two
    sizes differ otherwise than in affine integers. ``reason`` says where."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _parts(text: str) -> list[str]:
    """`text` without Thunder's timing header, split at its numbers: the
    text between numbers at even indices, the numbers at odd ones."""
    return _NUMBER.split(_HEADER.sub("", text))


def _is_int(token: str) -> bool:
    return token.isdigit()


def _line_of(parts: list[str], index: int) -> tuple[int, str]:
    """The 1-based line of `parts[index]` and that line's text."""
    before = "".join(parts[:index])
    start = before.rfind("\n") + 1
    rest = "".join(parts[index:index + 64])
    end = rest.find("\n")
    return before.count("\n") + 1, (before[start:] + (rest if end < 0 else rest[:end])).strip()


def _linear(va: int, vb: int, a: int, b: int, what: str) -> tuple[int, int]:
    """(intercept, slope) of the integer that is `va` at size `a` and `vb` at
    `b`; StructureChanges when the slope is not an integer."""
    slope, remainder = divmod(vb - va, b - a)
    if remainder:
        raise StructureChanges(f"{what} is {va} at n={a} and {vb} at n={b}: not an integer multiple of n "
                               "plus a constant")
    return va - slope * a, slope


@dataclass(frozen=True)
class _AffineText:
    """A printed trace as a function of n: `texts[i]`, then the integer
    `slots[i]` = intercept + slope * n, ..., then `texts[-1]`. Integers that do
    not change with n are in the texts."""

    name: str
    texts: tuple[str, ...]
    slots: tuple[tuple[int, int], ...]

    @classmethod
    def derive(cls, name: str, text_a: str, a: int, text_b: str, b: int) -> "_AffineText":
        pa, pb = _parts(text_a), _parts(text_b)
        texts: list[str] = []
        slots: list[tuple[int, int]] = []
        pending: list[str] = []
        for i, (x, y) in enumerate(zip(pa, pb)):
            if i % 2 == 0 or x == y:
                if x != y:
                    raise StructureChanges(_differs(name, pa, pb, i, a, b))
                pending.append(x)
            elif _is_int(x) and _is_int(y):
                where = "{} line {}, {!r}".format(name, *_line_of(pa, i))
                c, s = _linear(int(x), int(y), a, b, where)
                texts.append("".join(pending))
                pending = []
                slots.append((c, s))
            elif not _is_int(x) and not _is_int(y):
                # Float literals that differ (a mean's 1 / numel, a scale)
                # are scalars: no tensor's bytes depend on them, so the
                # first size's stands for every size.
                pending.append(x)
            else:
                raise StructureChanges(_differs(name, pa, pb, i, a, b))
        if len(pa) != len(pb):
            raise StructureChanges(_differs(name, pa, pb, min(len(pa), len(pb)) - 1, a, b))
        texts.append("".join(pending))
        return cls(name, tuple(texts), tuple(slots))

    def at(self, n: int) -> str:
        out = [self.texts[0]]
        for (c, s), text in zip(self.slots, self.texts[1:]):
            v = c + s * n
            if v < 0:
                raise ValueError(f"{self.name}: an integer of the trace is {c} + {s} * n, negative at n={n}")
            out.append(str(v))
            out.append(text)
        return "".join(out)

    def mismatch(self, text: str, n: int) -> str | None:
        """None when `text` (Thunder's trace at `n`) is this text at `n`,
        integer for integer (floats may differ, as in ``derive``); else where
        they differ."""
        pd, pt = _parts(self.at(n)), _parts(text)
        for i, (x, y) in enumerate(zip(pd, pt)):
            if x != y and (i % 2 == 0 or _is_int(x) or _is_int(y)):
                line, got = _line_of(pt, i)
                return (f"the {self.name} derived for n={n} has {x!r} where Thunder's has {y!r} "
                        f"(line {line}: {got!r})")
        if len(pd) != len(pt):
            return f"the {self.name} derived for n={n} is not as long as Thunder's"
        return None


def _differs(name: str, pa: list[str], pb: list[str], i: int, a: int, b: int) -> str:
    la, ta = _line_of(pa, i)
    lb, tb = _line_of(pb, i)
    return f"the {name} at n={a} and n={b} differ otherwise than in integers: line {la} {ta!r} vs line {lb} {tb!r}"


@dataclass(frozen=True)
class _Linear:
    """An integer of the spec as a function of n."""

    intercept: int
    slope: int


def _derive_value(x: Any, y: Any, a: int, b: int, where: str) -> Any:
    """The spec value `x` (at size `a`) and `y` (at `b`) as a function of n:
    the same structure with each integer that differs a _Linear."""
    if type(x) is not type(y):
        raise StructureChanges(f"the step's {where} is a {type(x).__name__} at n={a} and a "
                               f"{type(y).__name__} at n={b}")
    if isinstance(x, int) and not isinstance(x, bool):
        return x if x == y else _Linear(*_linear(x, y, a, b, f"the step's {where}"))
    if isinstance(x, (list, tuple)):
        if len(x) != len(y):
            raise StructureChanges(f"the step's {where} has {len(x)} entries at n={a} and {len(y)} at n={b}")
        return type(x)(_derive_value(u, v, a, b, f"{where}[{i}]") for i, (u, v) in enumerate(zip(x, y)))
    if isinstance(x, dict):
        if list(x) != list(y):
            keys = sorted(set(x) ^ set(y))
            raise StructureChanges(f"the step's {where} has other keys at n={a} and n={b}"
                                   + (f" ({', '.join(map(str, keys[:5]))})" if keys else " (in another order)"))
        return {k: _derive_value(x[k], y[k], a, b, f"{where}[{k!r}]") for k in x}
    if x != y:
        raise StructureChanges(f"the step's {where} is {x!r} at n={a} and {y!r} at n={b}")
    return x


def _value_at(x: Any, n: int) -> Any:
    if isinstance(x, _Linear):
        return x.intercept + x.slope * n
    if isinstance(x, (list, tuple)):
        return type(x)(_value_at(v, n) for v in x)
    if isinstance(x, dict):
        return {k: _value_at(v, n) for k, v in x.items()}
    return x


@dataclass(frozen=True)
class PeakFormula:
    """The step at every size ``n >= min(sizes)``, derived from Thunder's
    traces at `sizes` (``traces`` of them; ``verified``: the last size was
    traced and matched, see the module docstring).

    ``program(n)``: the step at `n` as estimate_step simulates it (printed
    traces); ``peak_bytes(n)``: its simulated peak; ``fits(n, budget)``;
    ``estimate(n, budget=)``: its StepReport, made as estimate_step makes
    one (``seconds`` there are this formula's: Thunder's for every trace,
    and the simulation at `n`). ``seconds``: Thunder's time over all the
    traces (``"thunder"``) and peakmem's for deriving and verifying
    (``"peakmem"``)."""

    sizes: tuple[int, ...]
    traces: int
    verified: bool
    seconds: dict[str, float]
    pricing: dict
    _forward: _AffineText = field(repr=False)
    _backward: _AffineText = field(repr=False)
    _spec: dict = field(repr=False)
    _optimizer: tuple = field(repr=False)  # (first, later, description)

    def program(self, n: int) -> Any:
        from .step.tracing import _StepProgram

        if not isinstance(n, int) or isinstance(n, bool) or n < min(self.sizes):
            raise ValueError(f"the formula is derived for n >= {min(self.sizes)} (its smallest traced size), "
                             f"not n={n!r}")
        first, later, description = self._optimizer
        return _StepProgram(self._forward.at(n), self._backward.at(n), first, later, description,
                            _value_at(self._spec, n))

    def judging(self, budget: int | str | None) -> Any:
        """How a size's step is judged against `budget`, as estimate_step
        judges it (peakmem.step.budget.judging: a GPU model's memory and
        CUDA context, its caching allocator)."""
        from .step.budget import judging
        from .step.device_target import device_target

        return judging(self.pricing, budget, device_target(self.pricing.get("device"), None))

    def simulate(self, n: int, budget: int | str | None = None) -> tuple[int, bool | None]:
        """The peak bytes at `n` and whether the step fits `budget` (None
        without one, and no GPU model to default it): the verdict
        estimate_step gives (peakmem.step.report.judge). No events: the
        quickest simulation."""
        from ._core import simulate_step
        from .step.report import judge

        judged = self.judging(budget)
        p = self.program(n)
        r = simulate_step(p.forward, p.backward, p.optimizer_first, p.optimizer_later, p.spec, **judged.pricing)
        if judged.budget is None:
            return r["peak_bytes"], None
        return r["peak_bytes"], bool(judge(judged.budget, r["peak_bytes"], r["step"].allocator,
                                           judged.context_bytes)["fits"])

    def peak_bytes(self, n: int) -> int:
        return self.simulate(n)[0]

    def fits(self, n: int, budget: int | str) -> bool:
        return bool(self.simulate(n, budget)[1])

    def estimate(self, n: int, budget: int | str | None = None) -> Any:
        """The StepReport at `n`, made by estimate_step's own simulation
        (step.estimate._simulate, step.report._with_budget); no ``nccl_estimate``."""
        from .step.estimate import _simulate
        from .step.report import _with_budget

        start = time.perf_counter()
        judged = self.judging(budget)
        report, simulating = _simulate(self.program(n), judged.pricing)
        thunder_s = self.seconds["thunder"]
        return replace(_with_budget(report, judged.budget, judged.context_bytes), seconds={
            "thunder": thunder_s, "peakmem": self.seconds["peakmem"] + time.perf_counter() - start,
            "simulate": simulating})


def _split_options(step_options: dict) -> tuple[dict, dict]:
    """estimate_step's keyword arguments (peakmem.step.options, checked
    already) split into the tracing's and the pricing's."""
    if step_options.get("frontend") not in (None, "thunder"):
        raise ValueError(f"the formula is derived from Thunder's traces: frontend must be 'thunder' (or None), "
                         f"got {step_options['frontend']!r}")
    if step_options.get("kwinputs"):
        raise ValueError("kwinputs= (keyword inputs to the model) needs frontend='eager'; the formula is "
                         "derived from Thunder's traces, whose step calls model(*inputs)")
    plan = step_options.get("plan")
    if step_options.get("recompute") not in (None, False) or (
            isinstance(plan, dict) and (plan.get("recompute") or plan.get("budget") is not None)):
        raise StructureChanges("recompute= chooses what to recompute at each size (and budget) "
                               "anew: no one program for every size")
    priced = ("allocator", "alloc_conf", "device_memory", "context_bytes")
    pricing = {k: step_options.get(k) for k in (*priced, "device")}
    return {k: v for k, v in step_options.items() if k not in priced and k != "frontend"}, pricing


def _check_sizes(sizes: Any, verify: bool) -> tuple[int, ...]:
    sizes = tuple(sizes)
    need = 3 if verify else 2
    if not verify and len(sizes) == 3:
        sizes = sizes[:2]
    if (len(sizes) != need or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in sizes)
            or len(set(sizes)) != len(sizes)):
        raise ValueError(f"sizes must be {need} distinct positive integers"
                         f"{' (the third verifies)' if verify else ''}, got {sizes!r}")
    return sizes


@dataclass
class _Traced:
    """What _build traced: each size's program and Thunder's seconds for it."""

    programs: dict[int, Any] = field(default_factory=dict)
    thunder_s: float = 0.0


class _FirstDoesNotFit(Exception):
    """Raised by _build when `first_fits` says the first size's step does not fit."""


def _build(model: Any, make_inputs: Callable[[int], tuple], sizes: tuple[int, ...], verify: bool,
           step_options: dict, traced: _Traced, first_fits: Callable[[Any], bool] | None = None,
           on_trace: Callable[[int, float | None], None] | None = None) -> PeakFormula:
    """The formula from Thunder's traces at `sizes` (each kept in `traced`,
    so that a caller falling back to the search reuses them);
    StructureChanges when the step is not one affine program.
    `first_fits(program)`: asked of the first size's step before any other
    size is traced; False stops there (_FirstDoesNotFit): when the smallest
    size does not fit, the answer is below every size a formula would
    describe, and tracing more sizes is wasted. `on_trace(n, seconds)`:
    told before each size is traced (seconds None) and after (Thunder's
    seconds for it)."""
    from .distribution import with_strategy
    from .step.tracing import _traced_program
    from .step.training_step import TrainingStep
    from .step.frontend import unwrap_thunder_module

    model = unwrap_thunder_module(model)
    trace_options, pricing = _split_options(step_options)
    trace = with_strategy(lambda model, *inputs, **kw: _traced_program(model, inputs, TrainingStep.of(kw)))

    def program_at(n: int) -> Any:
        if on_trace is not None:
            on_trace(n, None)
        program, seconds = trace(model, *make_inputs(n), **trace_options)
        traced.programs[n] = program
        traced.thunder_s += seconds
        if on_trace is not None:
            on_trace(n, seconds)
        return program

    a, b = sizes[:2]
    pa = program_at(a)
    if first_fits is not None and not first_fits(pa):
        raise _FirstDoesNotFit()
    pb = program_at(b)
    start = time.perf_counter()
    if (pa.optimizer_first, pa.optimizer_later, pa.optimizer) != (pb.optimizer_first, pb.optimizer_later,
                                                                  pb.optimizer):
        raise StructureChanges(f"the optimizer's step() program differs between n={a} and n={b}")
    forward = _AffineText.derive("forward", str(pa.forward), a, str(pb.forward), b)
    backward = _AffineText.derive("backward", str(pa.backward), a, str(pb.backward), b)
    spec = _derive_value(pa.spec, pb.spec, a, b, "spec")
    derive_s = time.perf_counter() - start
    formula = PeakFormula(sizes, len(traced.programs), False, {}, pricing, forward, backward, spec,
                          (pa.optimizer_first, pa.optimizer_later, pa.optimizer))
    if verify:
        c = sizes[2]
        pc = program_at(c)
        start = time.perf_counter()
        _verify(formula, pc, c)
        derive_s += time.perf_counter() - start
    return replace(formula, traces=len(traced.programs), verified=verify,
                   seconds={"thunder": traced.thunder_s, "peakmem": derive_s})


def _verify(formula: PeakFormula, program: Any, n: int) -> None:
    """StructureChanges unless the formula at `n` is Thunder's `program` at
    `n`: the same texts (integers included), spec and optimizer, and the same
    simulated peak and final bytes."""
    from ._core import simulate_step

    derived = formula.program(n)
    for name, mine, thunders in (("forward", formula._forward, program.forward),
                                 ("backward", formula._backward, program.backward)):
        why = mine.mismatch(str(thunders), n)
        if why is not None:
            raise StructureChanges(why)
    if derived.spec != program.spec:
        keys = [k for k in program.spec if derived.spec.get(k) != program.spec[k]]
        raise StructureChanges(f"the spec derived for n={n} differs from Thunder's in {', '.join(keys)}")
    if (derived.optimizer_first, derived.optimizer_later) != (program.optimizer_first, program.optimizer_later):
        raise StructureChanges(f"the optimizer's step() program at n={n} differs")
    results = [simulate_step(p.forward, p.backward, p.optimizer_first, p.optimizer_later, p.spec)
               for p in (derived, program)]
    got, want = ((r["peak_bytes"], r["final_bytes"]) for r in results)
    if got != want:
        raise StructureChanges(f"the step derived for n={n} simulates to peak {got[0]} and final {got[1]} bytes, "
                               f"Thunder's trace to {want[0]} and {want[1]}")


@takes(EstimateOptions)
def peak_formula(model: Any, make_inputs: Callable[[int], tuple], *, sizes: tuple[int, ...] = DEFAULT_SIZES,
                 verify: bool = True, **step_options: Unpack[EstimateOptions]) -> PeakFormula:
    """The step ``estimate_step(model, *make_inputs(n), **step_options)`` as
    a function of n, from Thunder's traces at `sizes` (three: two derive,
    the third verifies; ``verify=False``: the first two only, a trace less,
    the affine form then assumed rather than checked). `step_options` are
    estimate_step's keyword arguments (below) but ``recompute`` and
    ``kwinputs``; its ``budget`` goes to ``fits``/``estimate``. The step is
    Thunder's whatever the model (a ``thunder.jit`` module stands for the
    module it wraps; ``frontend``, if given, must be ``"thunder"``). Raises
    StructureChanges (a ValueError, with ``reason``) when the step is not
    one program whose integers are affine in n; see the module docstring."""
    traced = _Traced()
    return _build(model, make_inputs, _check_sizes(sizes, verify), verify, step_options, traced)
