#!/usr/bin/env python3
"""Makes large Thunder traces by replicating a real one, layer after layer.

    python bench/make_trace.py SOURCE --statements 1000000 -o /tmp/llama_fw_1e6.trace
    python bench/make_trace.py SOURCE --layers 200 -o out.json

SOURCE is a real trace: printed text (`fw.trace`, `bw.trace`) or peakmem's
JSON form (`fw.json`, `bw.json`, docs/trace-json.md); the output has the same
form (`-o` ending in .json must come from a JSON source). A SOURCE that is a
directory means its fw.trace (or fw.json with --json); `corpus:NAME/fw` means
tests/data/corpus/NAME/fw.trace (`.json` with --json).

How a trace of N layers is built from one real trace (one "layer"):
  * Every value name of layer k gets the suffix `_L{k}` (`t757` -> `t757_L7`),
    in code, in type comments and in the subsymbol comment lines; the
    source-location comments are copied verbatim, as are the header and the
    imports. The op mix, the `del`s and the subsymbol lines are the real
    trace's, unchanged.
  * Layers are chained. A forward (any function but Thunder's
    `backward_fn(saved_for_backward, cotangents)`): layer k's input (the first
    parameter, or --chain-in) is layer k-1's output (the first name in the
    returned `output`, or --chain-out); the signature takes layer 0's
    parameters and every later layer's parameters but the chained one; a
    Thunder training forward returns `{'output': <last layer's>,
    'flat_args': [every parameter], 'flat_output': ...}, ((every layer's
    saved tensors), (...))`, any other return is the last layer's.
  * A backward: the prologue (unpacking `saved_for_backward` into C0/C1 and
    the cotangents, clearing and deleting the collections) is emitted once,
    its unpacks listing every layer's targets; layers then run from N-1 down
    to 0, and layer k's incoming cotangent (the first name unpacked from
    `cotangents`, or --chain-in) is layer k+1's gradient of its input (the
    first returned name, or --chain-out). The return lists layer 0's
    gradients and then every later layer's but the chained one.
  * The chained names must have the same type (checked). If the chained
    input is neither returned nor deleted by the layer, a `del` is added
    after its last use, as Thunder's "Delete Last Used" pass would.

--statements S picks the number of layers so that the trace has at least S
statements, counted as peakmem counts them (one per op call, unpack, del,
clear and the return; subsymbol and comment lines are not statements). A
`.meta.json` file next to the output records the source, layers, statements
and bytes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from typing import Any, Iterable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_forms import (  # noqa: E402  (bench/, beside this script)
    MARK,
    CHAIN,
    GenError,
    parse_size,
    expr_from_py,
    expr_to_py,
    expr_from_json,
    expr_to_json,
    expr_rename,
    expr_refs,
    Param,
    Stmt,
    Form,
    _code_part,
    _names_in,
    _lhs_names,
    TextForm,
    _json_defs,
    _json_rename,
    _json_refs,
    JsonForm,
)


def _thunder_fw_return(e: tuple) -> dict | None:
    """The parts of `{'output': o, 'flat_args': [...], 'flat_output': o}, (saved, other)`."""
    if e[0] != "tuple" or len(e[1]) != 2 or e[1][0][0] != "dict" or e[1][1][0] != "tuple":
        return None
    keys = {}
    for k, v in e[1][0][1]:
        if k[0] != "const":
            return None
        keys[k[1].strip("'\"")] = v
    if set(keys) != {"output", "flat_args", "flat_output"}:
        return None
    rest = e[1][1][1]
    if len(rest) != 2 or rest[0][0] != "tuple" or rest[1][0] != "tuple":
        return None
    return {"output": keys["output"], "flat_output": keys["flat_output"],
            "saved": rest[0][1], "other": rest[1][1], "dict": e[1][0]}


class Replicator:
    # (Each replication rule set up in one place: longer than most.)
    def __init__(self, form: TextForm | JsonForm, chain_in: str | None, chain_out: str | None,
                 shared: Iterable[str]) -> None:
        self.form = form
        self.shared_user = set(shared)
        params = [p.name for p in form.params]
        self.backward = form.function == "backward_fn" and len(params) == 2
        self.fw: dict | None = None
        body = form.stmts[:-1]
        self.ret = form.stmts[-1]
        ret_expr = form.return_expr(self.ret)
        if self.backward:
            # The prologue: unpacks of the signature's collections, clears, dels of them.
            shared = set(params)
            n = 0
            for s in body:
                if s.kind == "unpack" and s.source in shared:
                    for t in s.targets:
                        if self._type_of(s, t) == "Collection":
                            shared.add(t)
                elif s.kind == "clear" and s.source in shared:
                    pass
                elif s.kind == "del" and set(s.deleted) <= shared:
                    pass
                else:
                    break
                n += 1
            self.prologue, self.body = body[:n], body[n:]
            self.shared = shared | self.shared_user
            cot = next((s for s in self.prologue if s.kind == "unpack" and s.source == params[1]), None)
            if cot is None or not cot.targets:
                raise GenError("backward: no unpack of the cotangents in the prologue")
            self.cot_unpack = cot
            self.chain_in = chain_in or cot.targets[0]
            if self.chain_in not in cot.targets:
                raise GenError(f"backward: --chain-in {self.chain_in} is not a cotangent")
            if ret_expr[0] != "tuple":
                raise GenError("backward: the return is not a tuple")
            names = [i[1] if i[0] == "ref" else None for i in ret_expr[1]]
            self.chain_out = chain_out or next((n for n in names if n), None)
            if self.chain_out not in names:
                raise GenError(f"backward: --chain-out {self.chain_out} is not returned")
            self.chain_out_index = names.index(self.chain_out)
            for s in self.body:
                bad = (s.refs & self.shared) - self.shared_user
                if bad and not (s.kind == "del"):
                    raise GenError(f"backward: a body statement uses the collection(s) {sorted(bad)}")
        else:
            self.prologue, self.body = [], body
            self.shared = set(self.shared_user)
            self.chain_in = chain_in or params[0]
            if self.chain_in not in params:
                raise GenError(f"--chain-in {self.chain_in} is not a parameter")
            self.fw = _thunder_fw_return(ret_expr)
            out_expr = self.fw["output"] if self.fw else ret_expr
            refs = expr_refs(out_expr)
            self.chain_out = chain_out or (refs[0] if refs else None)
            if self.chain_out is None or self.chain_out not in form.defined:
                raise GenError("forward: cannot find the output to chain (give --chain-out)")
        if self.chain_in in self.shared:
            raise GenError("the chained input cannot be shared")
        t_in, t_out = self._find_type(self.chain_in), self._find_type(self.chain_out)
        if t_in is None or t_out is None or t_in != t_out:
            raise GenError(f"the chained values differ in type: {self.chain_in} {t_in!r} "
                           f"vs {self.chain_out} {t_out!r}")
        self.chain_type = t_in
        # A `del` of the chained input after its last use, unless the layer
        # deletes it itself or returns it.
        deleted = any(self.chain_in in s.deleted for s in self.body)
        returned = self.chain_in in expr_refs(ret_expr)
        self.body = list(self.body)
        if not deleted and not returned:
            last = max((i for i, s in enumerate(self.body) if self.chain_in in s.refs), default=None)
            if last is not None:
                self.body.insert(last + 1, form.make_del([self.chain_in]))
        # del statements in the body that name a collection: the collection
        # part is emitted once, in the last layer run.
        self.body_shared_dels: list[tuple[int, list[str]]] = []
        if self.backward:
            new_body = []
            for s in self.body:
                if s.kind == "del" and set(s.deleted) & (self.shared - self.shared_user):
                    coll = [n for n in s.deleted if n in self.shared - self.shared_user]
                    rest = [n for n in s.deleted if n not in coll]
                    self.body_shared_dels.append((len(new_body), coll))
                    if rest:
                        new_body.append(form.make_del(rest))
                else:
                    new_body.append(s)
            self.body = new_body
        # The layer template: names -> name@@, the chained input -> @C@.
        def tmpl_name(n: str) -> str:
            if n == self.chain_in:
                return CHAIN
            if n in self.shared:
                return n
            return n + MARK

        self.tmpl_name = tmpl_name
        self.templates = [form.rename_stmt(s, tmpl_name) for s in self.body]
        self.template = "".join(self.templates)
        self.per_layer = len(self.body)
        self.fixed = len(self.prologue) + 1 + len(self.body_shared_dels)

    def _type_of(self, s: Stmt, name: str) -> str | None:
        p = s.target_payloads.get(name)
        if isinstance(p, dict):
            return p.get("type")
        if isinstance(p, list):
            for l in p:
                m = re.search(r'# \w+: "([^"]*)"', l)
                if m:
                    return m.group(1)
        return None

    def _find_type(self, name: str) -> str | None:
        f = self.form
        for p in f.params:
            if p.name == name:
                if isinstance(p.payload, dict):
                    return p.payload["value"].get("type")
                for l in p.payload:
                    m = re.search(r'# \w+: "([^"]*)"', l)
                    if m:
                        return m.group(1)
        for s in f.stmts:
            if name in s.target_payloads:
                return self._type_of(s, name)
            if name in s.targets:
                if isinstance(s.payload, dict):
                    for d in _json_defs(s.payload.get("outputs", [])):
                        if d["name"] == name:
                            return d.get("type")
                else:
                    for l in s.payload:
                        m = re.search(r"#\s*" + re.escape(name) + r': "([^"]*)"', l)
                        if m:
                            return m.group(1)
        return None

    def statements_for(self, layers: int) -> int:
        return self.fixed + layers * self.per_layer

    def layers_for(self, statements: int) -> int:
        return max(1, math.ceil((statements - self.fixed) / self.per_layer))

    def name_in(self, n: str, k: int, layers: int) -> str:
        """The name `n` of layer k gets (in the generated trace)."""
        if n in self.shared:
            return n
        if n == self.chain_in:
            if self.backward and k < layers - 1:
                return self.name_in(self.chain_out, k + 1, layers)
            if not self.backward and k > 0:
                return self.name_in(self.chain_out, k - 1, layers)
        return f"{n}_L{k}"

    def write(self, out, layers: int) -> int:
        """Writes the trace; returns the number of statements written (one
        pass in the output's order: longer than most)."""
        f = self.form
        written = 0
        nf = lambda k: (lambda n: self.name_in(n, k, layers))  # noqa: E731
        # signature
        params: list[tuple[str, Any]] = []
        if self.backward:
            params = [(p.name, f.param_payload(p, lambda n: n)) for p in f.params]
        else:
            for k in range(layers):
                for p in f.params:
                    if p.name in self.shared:
                        if k == 0:
                            params.append((p.name, f.param_payload(p, lambda n: n)))
                        continue
                    if k > 0 and p.name == self.chain_in:
                        continue
                    params.append((self.name_in(p.name, k, layers), f.param_payload(p, nf(k))))
        out.write(f.render_signature(f.function, params))
        # prologue (backward)
        order = range(layers - 1, -1, -1) if self.backward else range(layers)
        for s in self.prologue:
            if s.kind == "unpack" and any(t not in self.shared for t in s.targets):
                targets = []
                for k in order:
                    for t in s.targets:
                        if t in self.shared:
                            if k == layers - 1:
                                targets.append((t, f.target_payload(s, t, lambda n: n)))
                            continue
                        if s is self.cot_unpack and t == self.chain_in and k != layers - 1:
                            continue
                        targets.append((self.name_in(t, k, layers), f.target_payload(s, t, nf(k))))
                out.write(f.render_unpack(s, targets))
            else:
                out.write(f.render_verbatim(s))
            written += 1
        # layers
        tmpl = self.template
        shared_dels = self.body_shared_dels
        last_k = order[-1]
        for k in order:
            chain = self.name_in(self.chain_in, k, layers)
            suffix = f"_L{k}"
            if shared_dels and k == last_k:
                parts = list(self.templates)
                for pos, names in reversed(shared_dels):
                    parts.insert(pos, f.rename_stmt(f.make_del(names), lambda n: n))
                    written += 1
                text = "".join(parts)
            else:
                text = tmpl
            out.write(text.replace(CHAIN, chain).replace(MARK, suffix))
            written += self.per_layer
        # return
        e = f.return_expr(self.ret)
        if self.backward:
            items: list[tuple] = []
            for k in range(layers):
                for i, item in enumerate(e[1]):
                    if k > 0 and i == self.chain_out_index:
                        continue
                    items.append(expr_rename(item, nf(k)))
            new = ("tuple", items)
        elif self.fw:
            last = nf(layers - 1)
            flat_args = ("list", [("ref", n) for n, _ in params])
            saved = [expr_rename(i, nf(k)) for k in range(layers) for i in self.fw["saved"]]
            other = [expr_rename(i, nf(k)) for k in range(layers) for i in self.fw["other"]]
            d = []
            for key, v in self.fw["dict"][1]:
                name = key[1].strip("'\"")
                if name == "flat_args":
                    d.append((key, flat_args))
                else:
                    d.append((key, expr_rename(v, last)))
            new = ("tuple", [("dict", d), ("tuple", [("tuple", saved), ("tuple", other)])])
        else:
            new = expr_rename(e, nf(layers - 1))
        out.write(f.render_return(new))
        written += 1
        out.write(f.footer())
        return written


def resolve_source(src: str, want_json: bool) -> str:
    ext = ".json" if want_json else ".trace"
    if src.startswith("corpus:"):
        rest = src[len("corpus:") :]
        if "/" not in rest:
            rest += "/fw"
        return os.path.join(REPO, "tests", "data", "corpus", rest + ext)
    if os.path.isdir(src):
        return os.path.join(src, "fw" + ext)
    return src


def generate(source: str, output: str, *, statements: int | None = None, layers: int | None = None,
             chain_in: str | None = None, chain_out: str | None = None,
             shared: Iterable[str] = ()) -> dict:
    with open(source, encoding="utf-8") as fh:
        text = fh.read()
    is_json = text.lstrip().startswith("{")
    if output.endswith(".json") and not is_json:
        raise GenError("a .json output needs a JSON source (fw.json / bw.json)")
    form = JsonForm(text, source) if is_json else TextForm(text, source)
    rep = Replicator(form, chain_in, chain_out, shared)
    if layers is None:
        layers = rep.layers_for(statements or rep.per_layer)
    t0 = time.perf_counter()
    tmp = output + ".tmp"
    with open(tmp, "w", encoding="utf-8", buffering=1 << 22) as out:
        written = rep.write(out, layers)
    os.replace(tmp, output)
    meta = {
        "source": os.path.relpath(source, REPO) if source.startswith(REPO) else source,
        "form": "json" if is_json else "text",
        "direction": "backward" if rep.backward else "forward",
        "chain_in": rep.chain_in,
        "chain_out": rep.chain_out,
        "chain_type": rep.chain_type,
        "layers": layers,
        "statements_per_layer": rep.per_layer,
        "statements": written,
        "bytes": os.path.getsize(output),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    assert written == rep.statements_for(layers), (written, rep.statements_for(layers))
    with open(output + ".meta.json", "w") as fh:
        json.dump(meta, fh, indent=1)
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="a real trace (.trace / .json), a corpus dir, or corpus:NAME[/fw|/bw]")
    ap.add_argument("-o", "--output", required=True)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("-n", "--statements", type=parse_size, help="at least this many statements (1e6, 10k, ...)")
    g.add_argument("--layers", type=int, help="exactly this many layers")
    ap.add_argument("--json", action="store_true", help="with corpus:NAME or a directory: use the .json form")
    ap.add_argument("--chain-in", help="the layer's input name (default: first parameter / first cotangent)")
    ap.add_argument("--chain-out", help="the layer's output name (default: first returned output)")
    ap.add_argument("--shared", default="", help="comma-separated parameters shared by every layer (not renamed)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    want_json = args.json or args.output.endswith(".json")
    src = resolve_source(args.source, want_json)
    try:
        meta = generate(src, args.output, statements=args.statements, layers=args.layers,
                        chain_in=args.chain_in, chain_out=args.chain_out,
                        shared=[s for s in args.shared.split(",") if s])
    except GenError as e:
        print(f"make_trace: error: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
