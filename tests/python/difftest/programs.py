"""Random tensor programs as Hypothesis strategies.

`programs()` draws one program: one to three float32 inputs of random shapes,
then a chain (with some fan-out) of statements from this vocabulary:
elementwise binary ops (same shape or broadcast over the last dimension, or
of two dtypes), scalar ops, unary ops, reductions, matmuls, views (unsqueeze
+ expand, permute, transpose, slicing, split/chunk, reshape/flatten),
contiguous, in-place ops, dtype conversions (float32, float64, bfloat16),
cat, and the ops the model zoo uses: activations, where/masked_fill/clamp,
softmax and norms, cumsum, tril/triu/roll, repeat/stack, linear, bmm and
scaled_dot_product_attention, topk/sort/gather/take_along_dim,
index_select, embedding, cross_entropy and scatter_add. Every
op tracks the shape and dtype of what it makes and is only drawn where it
applies, so every program is valid PyTorch that Thunder can trace.

All choices are Hypothesis draws, so Hypothesis shrinks a failing program:
fewer statements and inputs, fewer returned values, the most recent operand,
smaller shapes, earlier entries of each choice list (the simplest op first).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

FLOAT_DTYPES = ("torch.float32", "torch.float64", "torch.bfloat16")


@dataclass(frozen=True)
class Var:
    name: str
    shape: tuple[int, ...]
    dtype: str = "torch.float32"


@dataclass
class Program:
    inputs: list[Var]
    lines: list[str]
    returned: list[str]

    @property
    def input_shapes(self) -> list[list[int]]:
        return [list(v.shape) for v in self.inputs]

    def source(self) -> str:
        params = ", ".join(v.name for v in self.inputs)
        body = "\n".join(f"    {line}" for line in self.lines) or "    pass"
        return (f"import torch\nimport torch.nn.functional as F\n\ndef prog({params}):\n{body}\n"
                f"    return {', '.join(self.returned)}\n")


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class _Builder:
    """Builds one program from Hypothesis draws. Each op has a predicate
    saying which values it accepts; an op is only drawn when some value in the
    pool satisfies it."""

    def __init__(self, inputs: list[Var]) -> None:
        self.draw = None  # the draw of the statement being built
        self.pool: list[Var] = list(inputs)
        self.lines: list[str] = []
        self.counter = 0

    def fresh(self, shape: tuple[int, ...], dtype: str) -> Var:
        v = Var(f"v{self.counter}", tuple(shape), dtype)
        self.counter += 1
        return v

    def candidates(self, pred) -> list[Var]:
        # Most recent first: generated programs are mostly chains with some
        # fan-out, and a shrunk program keeps its operands close together.
        return [v for v in reversed(self.pool) if pred(v)]

    def pick(self, pred=lambda v: True) -> Var:
        return self.draw(st.sampled_from(self.candidates(pred)))

    def choose(self, options):
        return self.draw(st.sampled_from(options))

    def emit(self, expr: str, shape: tuple[int, ...], dtype: str) -> Var:
        v = self.fresh(shape, dtype)
        self.lines.append(f"{v.name} = {expr}")
        self.pool.append(v)
        return v

    # ---- ops: (predicate on the first operand, builder)
    def op_binary(self, a: Var) -> None:
        b = self.pick(lambda v: v.dtype == a.dtype and (v.shape == a.shape or (a.shape and v.shape == a.shape[-1:])))
        op = self.choose(["+", "-", "*", "/"])
        self.emit(f"{a.name} {op} {b.name}", a.shape, a.dtype)

    def op_scalar(self, a: Var) -> None:
        op = self.choose(["+", "*", "-"])
        c = self.choose(["2.0", "0.5", "1", "3"])
        self.emit(f"{a.name} {op} {c}", a.shape, a.dtype)

    def op_unary(self, a: Var) -> None:
        f = self.choose(["torch.neg", "torch.exp", "torch.tanh", "torch.relu", "torch.sigmoid"])
        self.emit(f"{f}({a.name})", a.shape, a.dtype)

    def op_reduce(self, a: Var) -> None:
        dim = self.draw(st.integers(0, len(a.shape) - 1))
        keep = self.draw(st.booleans())
        f = self.choose(["sum", "mean"])
        shape = list(a.shape)
        if keep:
            shape[dim] = 1
        else:
            del shape[dim]
        self.emit(f"{a.name}.{f}({dim}, keepdim={keep})", tuple(shape), a.dtype)

    def op_matmul(self, a: Var) -> None:
        if self.draw(st.booleans()):
            self.emit(f"torch.matmul({a.name}.t(), {a.name})", (a.shape[1], a.shape[1]), a.dtype)
        else:
            self.emit(f"{a.name} @ {a.name}.t()", (a.shape[0], a.shape[0]), a.dtype)

    def op_unsqueeze_expand(self, a: Var) -> None:
        n = self.choose([2, 3])
        u = self.emit(f"{a.name}.unsqueeze(0)", (1,) + a.shape, a.dtype)
        self.emit(f"{u.name}.expand({n}, {', '.join(str(d) for d in a.shape)})", (n,) + a.shape, a.dtype)

    def op_permute(self, a: Var) -> None:
        rank = len(a.shape)
        if rank == 2 or not self.draw(st.booleans()):
            d0, d1 = self.draw(st.lists(st.integers(0, rank - 1), min_size=2, max_size=2, unique=True))
            shape = list(a.shape)
            shape[d0], shape[d1] = shape[d1], shape[d0]
            self.emit(f"{a.name}.transpose({d0}, {d1})", tuple(shape), a.dtype)
            return
        perm = self.draw(st.permutations(range(rank)))
        self.emit(f"{a.name}.permute({', '.join(map(str, perm))})", tuple(a.shape[p] for p in perm), a.dtype)

    def op_slice(self, a: Var) -> None:
        if len(a.shape) >= 2 and a.shape[0] >= 2 and self.draw(st.booleans()):
            self.emit(f"{a.name}[1:]", (a.shape[0] - 1,) + a.shape[1:], a.dtype)
            return
        idx = ", ".join([":"] * (len(a.shape) - 1) + ["1:"])
        self.emit(f"{a.name}[{idx}]", a.shape[:-1] + (a.shape[-1] - 1,), a.dtype)

    def op_split(self, a: Var) -> None:
        if self.draw(st.booleans()):
            first = -(-a.shape[0] // 2)  # torch.chunk(t, 2): the first piece is the larger
            call = f"torch.chunk({a.name}, 2)"
        else:
            first = a.shape[0] // 2
            call = f"torch.split({a.name}, [{first}, {a.shape[0] - first}])"
        p0 = self.fresh((first,) + a.shape[1:], a.dtype)
        p1 = self.fresh((a.shape[0] - first,) + a.shape[1:], a.dtype)
        self.lines.append(f"{p0.name}, {p1.name} = {call}")
        self.pool.extend([p0, p1])

    def op_reshape(self, a: Var) -> None:
        numel = _numel(a.shape)
        divisors = [d for d in range(2, numel) if numel % d == 0]
        forms = ["reshape(-1)"] + (["flatten()"] if len(a.shape) >= 2 else []) + (["2d"] if divisors else [])
        form = self.choose(forms)
        if form != "2d":
            self.emit(f"{a.name}.{form}", (numel,), a.dtype)
            return
        d = self.choose(divisors)
        self.emit(f"{a.name}.reshape({d}, {numel // d})", (d, numel // d), a.dtype)

    def op_contiguous(self, a: Var) -> None:
        self.emit(f"{a.name}.contiguous()", a.shape, a.dtype)

    def op_to(self, a: Var) -> None:
        dtype = self.choose(FLOAT_DTYPES)
        self.emit(f"{a.name}.to({dtype})", a.shape, dtype)

    def op_in_place(self, a: Var) -> None:
        # On a fresh copy of an intermediate: in-place on an input that
        # requires grad is an error, and mutating a value other statements
        # read would change what they compute.
        c = self.emit(f"{a.name} * 1.0", a.shape, a.dtype)
        if self.draw(st.booleans()):
            b = self.pick(lambda v: v.shape == c.shape and v.dtype == c.dtype)
            self.lines.append(f"{c.name}.add_({b.name})")
        else:
            self.lines.append(f"{c.name}.mul_(2.0)")

    def op_cat(self, a: Var) -> None:
        b = self.pick(lambda v: v.shape == a.shape and v.dtype == a.dtype)
        self.emit(f"torch.cat([{a.name}, {b.name}], 0)", (2 * a.shape[0],) + a.shape[1:], a.dtype)

    # ---- the wider vocabulary: the ops the model zoo uses (tests/data/zoo)
    def op_unary_more(self, a: Var) -> None:
        f = self.choose(["torch.sin", "torch.cos", "torch.abs", "torch.square", "torch.erf", "F.gelu",
                         "F.silu", "F.softplus", "F.leaky_relu", "F.elu", "torch.atan", "torch.sinh"])
        self.emit(f"{f}({a.name})", a.shape, a.dtype)

    def op_positive_unary(self, a: Var) -> None:
        f = self.choose(["torch.sqrt", "torch.rsqrt", "torch.log", "torch.reciprocal"])
        self.emit(f"{f}({a.name}.abs() + 1)", a.shape, a.dtype)

    def op_binary_more(self, a: Var) -> None:
        b = self.pick(lambda v: v.dtype == a.dtype and (v.shape == a.shape or (a.shape and v.shape == a.shape[-1:])))
        # (minimum has no gradient in Thunder 0.2.6; maximum has one)
        f = self.choose(["torch.maximum", "torch.atan2"])
        self.emit(f"{f}({a.name}, {b.name})", a.shape, a.dtype)

    def op_binary_mixed(self, a: Var) -> None:
        # Operands of two dtypes: Thunder promotes (the result has the wider).
        b = self.pick(lambda v: v.shape == a.shape and v.dtype != a.dtype)
        wider = "torch.float64" if "torch.float64" in (a.dtype, b.dtype) else "torch.float32"
        self.emit(f"{a.name} * {b.name}", a.shape, wider)

    def op_select_values(self, a: Var) -> None:
        form = self.choose(["where", "where scalar", "masked_fill", "clamp", "pow"])
        if form == "where":
            b = self.pick(lambda v: v.dtype == a.dtype and v.shape == a.shape)
            self.emit(f"torch.where({a.name} > 0, {a.name}, {b.name})", a.shape, a.dtype)
        elif form == "where scalar":
            self.emit(f"torch.where({a.name} < 0, {a.name}, 0.0)", a.shape, a.dtype)
        elif form == "masked_fill":
            self.emit(f"{a.name}.masked_fill({a.name} < 0, 0.5)", a.shape, a.dtype)
        elif form == "clamp":
            self.emit(f"{a.name}.clamp(-0.5, 0.5)", a.shape, a.dtype)
        else:
            self.emit(f"{a.name}.pow(2)", a.shape, a.dtype)

    def op_reduce_more(self, a: Var) -> None:
        dim = self.draw(st.integers(-1, len(a.shape) - 1)) if len(a.shape) > 1 else -1
        f = self.choose(["amax", "amin", "var", "logsumexp"])
        shape = list(a.shape)
        del shape[dim]
        self.emit(f"{a.name}.{f}({dim})", tuple(shape), a.dtype)

    def op_scan(self, a: Var) -> None:
        f = self.choose(["cumsum", "softmax", "log_softmax"])
        dim = self.draw(st.integers(0, len(a.shape) - 1))
        call = f"{a.name}.cumsum({dim})" if f == "cumsum" else f"F.{f}({a.name}, dim={dim})"
        self.emit(call, a.shape, a.dtype)

    def op_norm(self, a: Var) -> None:
        if self.draw(st.booleans()):
            self.emit(f"F.layer_norm({a.name}, ({a.shape[-1]},))", a.shape, a.dtype)
        else:  # RMSNorm as the Llama block writes it
            self.emit(f"{a.name} * torch.rsqrt({a.name}.pow(2).mean(-1, keepdim=True) + 1e-6)", a.shape, a.dtype)

    def op_matrix_shape(self, a: Var) -> None:
        # (flip has no gradient in Thunder 0.2.6)
        f = self.choose(["tril", "triu", "roll"])
        call = {"tril": f"torch.tril({a.name})", "triu": f"torch.triu({a.name}, 1)",
                "roll": f"{a.name}.roll(1, -1)"}[f]
        self.emit(call, a.shape, a.dtype)

    def op_repeat_stack(self, a: Var) -> None:
        form = self.choose(["repeat", "stack", "repeat_interleave", "squeeze"])
        if form == "repeat":
            reps = ", ".join(["2"] + ["1"] * (len(a.shape) - 1))
            self.emit(f"{a.name}.repeat({reps})", (2 * a.shape[0],) + a.shape[1:], a.dtype)
        elif form == "stack":
            b = self.pick(lambda v: v.shape == a.shape and v.dtype == a.dtype)
            self.emit(f"torch.stack([{a.name}, {b.name}])", (2,) + a.shape, a.dtype)
        elif form == "repeat_interleave":
            self.emit(f"{a.name}.repeat_interleave(2, dim=0)", (2 * a.shape[0],) + a.shape[1:], a.dtype)
        else:
            self.emit(f"{a.name}.unsqueeze(1).squeeze(1)", a.shape, a.dtype)

    def op_linear(self, a: Var) -> None:
        w = self.pick(lambda v: len(v.shape) == 2 and v.shape[-1] == a.shape[-1] and v.dtype == a.dtype)
        self.emit(f"F.linear({a.name}, {w.name})", a.shape[:-1] + (w.shape[0],), a.dtype)

    def op_batched_product(self, a: Var) -> None:  # a: [b, m, n]
        form = self.choose(["bmm", "matmul", "sdpa"])
        b, m, n = a.shape
        if form == "bmm":
            self.emit(f"torch.bmm({a.name}, {a.name}.transpose(1, 2))", (b, m, m), a.dtype)
        elif form == "matmul":
            self.emit(f"{a.name}.transpose(1, 2) @ {a.name}", (b, n, n), a.dtype)
        else:
            causal = self.draw(st.booleans())
            self.emit(f"F.scaled_dot_product_attention({a.name}, {a.name}, {a.name}, is_causal={causal})", a.shape, a.dtype)

    def op_sorted(self, a: Var) -> None:
        form = self.choose(["topk", "sort", "take_along_dim", "gather"])
        if form == "topk":
            self.emit(f"torch.topk({a.name}, 1, -1)[0]", a.shape[:-1] + (1,), a.dtype)
        elif form == "sort":
            self.emit(f"torch.sort({a.name}, -1)[0]", a.shape, a.dtype)
        elif form == "take_along_dim":
            self.emit(f"torch.take_along_dim({a.name}, {a.name}.argsort(-1), -1)", a.shape, a.dtype)
        else:
            self.emit(f"torch.gather({a.name}, -1, {a.name}.argmax(-1, keepdim=True))", a.shape[:-1] + (1,), a.dtype)

    def op_indexed(self, a: Var) -> None:  # a: [m, n]
        m, n = a.shape
        form = self.choose(["index_select", "embedding", "cross_entropy", "scatter_add"])
        if form == "index_select":
            self.emit(f"{a.name}.index_select(0, {a.name}.sum(-1).argsort())", a.shape, a.dtype)
        elif form == "embedding":
            self.emit(f"F.embedding({a.name}.argmax(0), {a.name})", (n, n), a.dtype)
        elif form == "cross_entropy":
            self.emit(f"F.cross_entropy({a.name}, {a.name}.argmax(-1))", (), a.dtype)
        else:
            self.emit(f"torch.zeros_like({a.name}).scatter_add(1, {a.name}.argsort(-1), {a.name})", a.shape, a.dtype)

    def ops(self):
        """(weight, predicate, op); weights as a share of the draws, simplest first."""
        return [
            (2, lambda v: True, self.op_scalar),
            (4, lambda v: True, self.op_binary),
            (2, lambda v: True, self.op_unary),
            (1, lambda v: True, self.op_contiguous),
            (2, lambda v: len(v.shape) >= 1, self.op_reshape),
            (2, lambda v: len(v.shape) >= 2, self.op_permute),
            (1, lambda v: 1 <= len(v.shape) <= 2, self.op_unsqueeze_expand),
            (1, lambda v: len(v.shape) >= 1 and v.shape[-1] >= 2, self.op_slice),
            (1, lambda v: len(v.shape) >= 1 and v.shape[0] >= 2, self.op_split),
            (1, lambda v: len(v.shape) >= 2, self.op_reduce),
            (1, lambda v: len(v.shape) == 2 and v.dtype != "torch.bfloat16", self.op_matmul),
            (1, lambda v: len(v.shape) >= 1, self.op_cat),
            (1, lambda v: True, self.op_to),
            (1, lambda v: not v.name.startswith("x"), self.op_in_place),
            (2, lambda v: True, self.op_unary_more),
            (1, lambda v: True, self.op_positive_unary),
            (1, lambda v: True, self.op_binary_more),
            (1, lambda v: True, self.op_select_values),
            (1, lambda v: any(u.shape == v.shape and u.dtype != v.dtype for u in self.pool), self.op_binary_mixed),
            (1, lambda v: len(v.shape) >= 2, self.op_reduce_more),
            (1, lambda v: len(v.shape) >= 1, self.op_scan),
            (1, lambda v: len(v.shape) >= 1, self.op_norm),
            (1, lambda v: len(v.shape) >= 2, self.op_matrix_shape),
            (1, lambda v: 1 <= len(v.shape) <= 2, self.op_repeat_stack),
            (1, lambda v: len(v.shape) >= 1 and any(len(u.shape) == 2 and u.shape[-1] == v.shape[-1]
                                                   and u.dtype == v.dtype for u in self.pool), self.op_linear),
            (1, lambda v: len(v.shape) == 3 and v.dtype != "torch.bfloat16", self.op_batched_product),
            (1, lambda v: len(v.shape) >= 1 and v.shape[-1] >= 1, self.op_sorted),
            (1, lambda v: len(v.shape) == 2, self.op_indexed),
        ]

    def statement(self, draw) -> None:
        self.draw = draw
        applicable = [(pred, op) for weight, pred, op in self.ops() for _ in range(weight)
                      if any(pred(v) for v in self.pool)]
        pred, op = self.choose(applicable)
        op(self.pick(pred))


@st.composite
def _statement(draw, builder: _Builder) -> None:
    builder.statement(draw)


@st.composite
def programs(draw, max_statements: int = 9) -> Program:
    """One random program (see the module docstring)."""
    m = draw(st.sampled_from([2, 3, 4, 5, 8]))
    n = draw(st.sampled_from([2, 3, 4, 6]))
    shapes = draw(st.lists(st.sampled_from([(m, n), (m, n), (n,), (2, m, n)]), min_size=1, max_size=3))
    inputs = [Var(f"x{i}", shape) for i, shape in enumerate(shapes)]
    builder = _Builder(inputs)
    # The statements are the elements of a Hypothesis list, each drawn in
    # order and appended to `builder` as a side effect (the list's value is
    # not used). Hypothesis shrinks a list by deleting elements, so a failing
    # program loses its statements one by one; every statement draws its
    # operands from the values before it, so a program stays valid.
    draw(st.lists(_statement(builder), min_size=1, max_size=max_statements))
    made = [v for v in builder.pool if not v.name.startswith("x")]
    # The last value is always returned; each earlier one with probability 1/5.
    returned = [made[-1].name] + [v.name for v in made[:-1] if draw(st.integers(0, 4)) == 4]
    return Program(inputs, builder.lines, returned)
