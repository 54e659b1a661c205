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
import ast
import copy
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Markers in a layer template: NAME + MARK is a per-layer name, CHAIN the
# chained input. Neither can occur in a trace (not identifier characters,
# and never inside the strings that are copied).
MARK = "@@"
CHAIN = "@C@"


class GenError(Exception):
    pass


def parse_size(text: str) -> int:
    """'1e6' / '1000000' / '1M' -> int."""
    t = text.strip().lower()
    mult = 1
    if t and t[-1] in "km":
        mult = {"k": 1000, "m": 1000000}[t[-1]]
        t = t[:-1]
    return int(float(t) * mult)


# --------------------------------------------------------------------------
# A neutral expression tree, shared by the text and the JSON form, for the
# return statement: ("ref", name) | ("const", text) | ("tuple"|"list"|"set", [..])
# | ("dict", [(k, v), ...]).


def expr_from_py(node: ast.AST) -> tuple:
    if isinstance(node, ast.Name):
        return ("ref", node.id)
    if isinstance(node, ast.Tuple):
        return ("tuple", [expr_from_py(e) for e in node.elts])
    if isinstance(node, ast.List):
        return ("list", [expr_from_py(e) for e in node.elts])
    if isinstance(node, ast.Set):
        return ("set", [expr_from_py(e) for e in node.elts])
    if isinstance(node, ast.Dict):
        return ("dict", [(expr_from_py(k), expr_from_py(v)) for k, v in zip(node.keys, node.values)])
    return ("const", ast.unparse(node))


def expr_to_py(e: tuple) -> str:
    kind = e[0]
    if kind == "ref" or kind == "const":
        return e[1]
    if kind == "tuple":
        items = [expr_to_py(i) for i in e[1]]
        if len(items) == 1:
            return f"({items[0]},)"
        return "(" + ", ".join(items) + ")"
    if kind == "list":
        return "[" + ", ".join(expr_to_py(i) for i in e[1]) + "]"
    if kind == "set":
        return "{" + ", ".join(expr_to_py(i) for i in e[1]) + "}"
    if kind == "dict":
        return "{" + ", ".join(f"{expr_to_py(k)}: {expr_to_py(v)}" for k, v in e[1]) + "}"
    raise AssertionError(kind)


def expr_from_json(j: Any) -> tuple:
    if isinstance(j, dict):
        if "ref" in j:
            return ("ref", j["ref"])
        if "const" in j:
            return ("const", j["const"] if isinstance(j["const"], str) else json.dumps(j["const"]))
        for kind in ("tuple", "list", "set"):
            if kind in j:
                return (kind, [expr_from_json(i) for i in j[kind]])
        if "dict" in j:
            return ("dict", [(expr_from_json(k), expr_from_json(v)) for k, v in j["dict"]])
    raise GenError(f"unsupported expression in the JSON return: {json.dumps(j)[:200]}")


def expr_to_json(e: tuple) -> Any:
    kind = e[0]
    if kind == "ref":
        return {"ref": e[1]}
    if kind == "const":
        return {"const": e[1]}
    if kind in ("tuple", "list", "set"):
        return {kind: [expr_to_json(i) for i in e[1]]}
    if kind == "dict":
        return {"dict": [[expr_to_json(k), expr_to_json(v)] for k, v in e[1]]}
    raise AssertionError(kind)


def expr_rename(e: tuple, f: Callable[[str], str]) -> tuple:
    kind = e[0]
    if kind == "ref":
        return ("ref", f(e[1]))
    if kind == "const":
        return e
    if kind == "dict":
        return ("dict", [(expr_rename(k, f), expr_rename(v, f)) for k, v in e[1]])
    return (kind, [expr_rename(i, f) for i in e[1]])


def expr_refs(e: tuple) -> list[str]:
    out: list[str] = []

    def walk(x: tuple) -> None:
        if x[0] == "ref":
            out.append(x[1])
        elif x[0] == "dict":
            for k, v in x[1]:
                walk(k)
                walk(v)
        elif x[0] != "const":
            for i in x[1]:
                walk(i)

    walk(e)
    return out


# --------------------------------------------------------------------------
# The program, form-independent.


@dataclass
class Param:
    name: str
    payload: Any  # text: its type comment lines; JSON: the param object


@dataclass
class Stmt:
    kind: str  # call, unpack, assign, del, clear, return
    source: str | None = None  # unpack/assign/clear
    targets: list[str] = field(default_factory=list)  # unpack: flat target names
    deleted: list[str] = field(default_factory=list)  # del
    refs: set[str] = field(default_factory=set)  # names in the code (not comments)
    payload: Any = None  # text: its lines; JSON: the statement object
    target_payloads: dict[str, Any] = field(default_factory=dict)  # unpack: per-target type


class Form:
    """How one trace form is read and written."""

    def rename_stmt(self, s: Stmt, f: Callable[[str], str]) -> str: ...
    def make_del(self, names: list[str]) -> Stmt: ...
    def render_signature(self, function: str, params: list[tuple[str, Any]]) -> str: ...
    def render_unpack(self, s: Stmt, targets: list[tuple[str, Any]]) -> str: ...
    def render_return(self, e: tuple) -> str: ...
    def render_verbatim(self, s: Stmt) -> str: ...
    def footer(self) -> str: ...
    def separator(self) -> str: ...


# ---------------------------------------------------------------- text form

_TYPE_COMMENT = re.compile(r"^\s*# ([A-Za-z_]\w*)(?:: \"| \()")
_TOKEN = re.compile(r"\"[^\"]*\"|'[^']*'|(?<![\w.])([A-Za-z_]\w*)(?![\w(])(=(?!=))?")
_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\((.*)\)\s*:\s*$")


def _code_part(line: str) -> str:
    """The line without its trailing comment (quotes respected)."""
    q = None
    for i, c in enumerate(line):
        if q:
            if c == q:
                q = None
        elif c in "'\"":
            q = c
        elif c == "#":
            return line[:i]
    return line


def _names_in(code: str) -> set[str]:
    return {m.group(1) for m in _TOKEN.finditer(code) if m.group(1) and not m.group(2)}


def _lhs_names(lhs: str) -> list[str]:
    return [n for n in re.findall(r"[A-Za-z_]\w*", lhs)]


class TextForm(Form):
    # (One pass over the printed trace, in its order: longer than most.)
    def __init__(self, text: str, name: str) -> None:
        self.name = name
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        di = next((i for i, l in enumerate(lines) if l.startswith("def ")), None)
        if di is None:
            raise GenError(f"{name}: no `def` line")
        self.header = lines[:di]
        m = _DEF.match(lines[di])
        if not m:
            raise GenError(f"{name}:{di + 1}: cannot read the signature: {lines[di]}")
        self.function = m.group(1)
        pnames = [p.strip() for p in m.group(2).split(",") if p.strip()]
        for p in pnames:
            if not re.fullmatch(r"[A-Za-z_]\w*", p):
                raise GenError(f"{name}: parameter `{p}` is not a plain name (not supported)")
        body = lines[di + 1 :]
        first = next((l for l in body if l.strip()), "  ")
        self.indent = first[: len(first) - len(first.lstrip())]
        ind = self.indent
        # parameter type comments
        i = 0
        pcomments: dict[str, list[str]] = {p: [] for p in pnames}
        while i < len(body):
            m2 = _TYPE_COMMENT.match(body[i])
            line = body[i]
            if line.startswith(ind + "#") and not line.startswith(ind + " ") and m2 and m2.group(1) in pcomments:
                pcomments[m2.group(1)].append(line)
                i += 1
            else:
                break
        self.params = [Param(p, pcomments[p]) for p in pnames]
        self.stmts: list[Stmt] = []
        self.defined: set[str] = set(pnames)
        lead: list[str] = []
        while i < len(body):
            line = body[i]
            if not line.strip():
                lead.append(line)
                i += 1
                continue
            if not line.startswith(ind) or (len(line) > len(ind) and line[len(ind)] == " "):
                raise GenError(f"{name}:{di + 2 + i}: unexpected indentation: {line}")
            if line.startswith(ind + "#"):
                m2 = re.match(r"^\s*# ([A-Za-z_]\w*) \(empty sequence\)", line)
                if m2:  # an empty unpack
                    self.stmts.append(Stmt("unpack", source=m2.group(1), refs={m2.group(1)},
                                           payload=lead + [line]))
                    lead = []
                else:  # a source-location or header comment: copied verbatim
                    lead.append(line)
                i += 1
                continue
            code_lines = [line]
            while code_lines[-1].rstrip().endswith("\\"):
                i += 1
                code_lines.append(body[i])
            i += 1
            trailing: list[str] = []
            while i < len(body):
                nxt = body[i]
                if nxt.startswith(ind + " ") and nxt.strip().startswith("#"):
                    trailing.append(nxt)  # a subsymbol line
                elif nxt.startswith(ind + "#") and _TYPE_COMMENT.match(nxt) and not re.match(
                    r"^\s*# [A-Za-z_]\w* \(empty sequence\)", nxt
                ):
                    trailing.append(nxt)  # a type comment after an unpack
                else:
                    break
                i += 1
            s = self._classify(code_lines, di + 2 + i)
            s.payload = lead + code_lines + trailing
            lead = []
            for t in trailing:
                mt = _TYPE_COMMENT.match(t)
                if mt and t.startswith(ind + "#"):
                    s.target_payloads.setdefault(mt.group(1), []).append(t)
                sub = t.strip()[1:].strip()
                if " = " in _code_part(sub):
                    self.defined.update(_lhs_names(_code_part(sub).split(" = ", 1)[0]))
            self.stmts.append(s)
        if lead:
            self.tail = lead
        else:
            self.tail = []
        if not self.stmts or self.stmts[-1].kind != "return":
            raise GenError(f"{name}: the last statement is not a return")

    def _classify(self, code_lines: list[str], lineno: int) -> Stmt:
        joined = " ".join(_code_part(l).rstrip().rstrip("\\") for l in code_lines).strip()
        if joined.startswith("return"):
            src = joined[len("return") :].strip()
            try:
                e = expr_from_py(ast.parse(src, mode="eval").body) if src else ("const", "None")
            except SyntaxError as exc:
                raise GenError(f"{self.name}:{lineno}: cannot parse the return: {exc}")
            return Stmt("return", refs=set(expr_refs(e)), payload=None, target_payloads={"expr": e})
        if joined.startswith("del "):
            names = [n.strip() for n in joined[4:].split(",") if n.strip()]
            return Stmt("del", deleted=names, refs=set(names))
        m = re.fullmatch(r"(clear_mutable_collection|clear_collection)\((\w+)\)", joined)
        if m:
            return Stmt("clear", source=m.group(2), refs={m.group(2)})
        if " = " in joined:
            lhs, rhs = joined.split(" = ", 1)
            targets = _lhs_names(lhs)
            self.defined.update(targets)
            if re.fullmatch(r"[A-Za-z_]\w*", rhs.strip()):
                kind = "unpack" if "," in lhs or "[" in lhs or "(" in lhs else "assign"
                return Stmt(kind, source=rhs.strip(), targets=targets, refs=set(targets) | {rhs.strip()})
            return Stmt("call", targets=targets, refs=set(targets) | _names_in(rhs))
        return Stmt("call", refs=_names_in(joined))

    # -- rendering
    def _rename_line(self, line: str, f: Callable[[str], str]) -> str:
        def sub(m: re.Match) -> str:
            n = m.group(1)
            if n is None or m.group(2) or n not in self.defined:
                return m.group(0)
            return f(n)

        return _TOKEN.sub(sub, line)

    def rename_stmt(self, s: Stmt, f: Callable[[str], str]) -> str:
        out = []
        ind = self.indent
        for line in s.payload:
            if line.startswith(ind + "#") and not _TYPE_COMMENT.match(line):
                out.append(line)  # source location / header comment: verbatim
            else:
                out.append(self._rename_line(line, f))
        return "\n".join(out) + "\n"

    def make_del(self, names: list[str]) -> Stmt:
        return Stmt("del", deleted=names, refs=set(names), payload=[f"{self.indent}del {', '.join(names)}"])

    def render_signature(self, function: str, params: list[tuple[str, Any]]) -> str:
        out = ["\n".join(self.header) + "\n" if self.header else ""]
        out.append(f"def {function}({', '.join(n for n, _ in params)}):\n")
        for _, payload in params:
            for line in payload:
                out.append(line + "\n")
        return "".join(out)

    def param_payload(self, p: Param, f: Callable[[str], str]) -> Any:
        return [self._rename_line(l, f) for l in p.payload]

    def target_payload(self, s: Stmt, name: str, f: Callable[[str], str]) -> Any:
        return [self._rename_line(l, f) for l in s.target_payloads.get(name, [])]

    def render_unpack(self, s: Stmt, targets: list[tuple[str, Any]]) -> str:
        ind = self.indent
        lead = []
        for line in s.payload:
            if line.startswith(ind + "#") or not line.strip():
                if _TYPE_COMMENT.match(line):
                    break
                lead.append(line)
            else:
                break
        if not targets:
            return "".join(l + "\n" for l in lead) + f"{ind}# {s.source} (empty sequence)\n"
        # Thunder wraps long unpacks with backslash continuations at ~80 columns.
        rows, row = [], ind
        for n, _ in targets:
            piece = f"{n}, "
            if len(row) + len(piece) > 80 and row.strip():
                rows.append(row.rstrip() + " \\")
                row = ind
            row += piece
        rows.append(row + f"= {s.source}")
        out = [l + "\n" for l in lead] + [r + "\n" for r in rows]
        for _, payload in targets:
            out.extend(l + "\n" for l in payload)
        return "".join(out)

    def render_verbatim(self, s: Stmt) -> str:
        return "\n".join(s.payload) + "\n"

    def render_return(self, e: tuple) -> str:
        if e[0] == "tuple" and len(e[1]) > 1:  # Thunder prints `return a, b` without parentheses
            return f"{self.indent}return {', '.join(expr_to_py(i) for i in e[1])}\n"
        return f"{self.indent}return {expr_to_py(e)}\n"

    def return_expr(self, s: Stmt) -> tuple:
        return s.target_payloads["expr"]

    def footer(self) -> str:
        return ""

    def stmt_separator(self) -> str:
        return ""


# ---------------------------------------------------------------- JSON form


def _json_defs(pattern: Any) -> list[dict]:
    """Flat definitions of an assignment target."""
    if isinstance(pattern, dict) and "name" in pattern:
        return [pattern]
    if isinstance(pattern, list):
        return [d for p in pattern for d in _json_defs(p)]
    if isinstance(pattern, dict) and "list" in pattern:
        return [d for p in pattern["list"] for d in _json_defs(p)]
    return []


def _json_rename(obj: Any, f: Callable[[str], str], key: str | None = None) -> Any:
    """A copy of a statement with every name (definitions, refs, sources, del names) renamed."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("ref", "source") and isinstance(v, str):
                out[k] = f(v)
            elif k == "name" and isinstance(v, str) and key != "kwargs":
                out[k] = f(v)
            elif k == "names" and isinstance(v, list):
                out[k] = [f(n) for n in v]
            elif k == "subsymbols":
                out[k] = v
            else:
                out[k] = _json_rename(v, f, k)
        return out
    if isinstance(obj, list):
        if key == "kwargs":
            return [[kv[0], _json_rename(kv[1], f)] for kv in obj]
        return [_json_rename(v, f, key) for v in obj]
    return obj


def _json_refs(obj: Any) -> set[str]:
    out: set[str] = set()

    def walk(o: Any, key: str | None = None) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("ref", "source") and isinstance(v, str):
                    out.add(v)
                elif k == "name" and isinstance(v, str):
                    out.add(v)
                elif k == "names" and isinstance(v, list):
                    out.update(v)
                elif k == "kwargs":
                    for kv in v:
                        walk(kv[1])
                elif k != "subsymbols":
                    walk(v, k)
        elif isinstance(o, list):
            for v in o:
                walk(v, key)

    walk(obj)
    return out


class JsonForm(Form):
    def __init__(self, text: str, name: str) -> None:
        self.name = name
        doc = json.loads(text)
        if doc.get("format") != "peakmem.trace":
            raise GenError(f"{name}: not a peakmem.trace JSON file")
        self.doc_head = {k: v for k, v in doc.items() if k not in ("params", "statements")}
        self.function = doc.get("function", "fn")
        self.params = []
        for p in doc.get("params", []):
            if p.get("kind") != "positional":
                raise GenError(f"{name}: only positional parameters are supported")
            self.params.append(Param(p["value"]["name"], p))
        self.stmts = []
        self.defined = {p.name for p in self.params}
        for st in doc["statements"]:
            kind = st["kind"]
            s = Stmt(kind, payload=st, refs=_json_refs(st))
            if kind in ("unpack", "assign"):
                s.source = st["source"]
                defs = _json_defs(st["outputs"])
                s.targets = [d["name"] for d in defs]
                s.target_payloads = {d["name"]: d for d in defs}
            elif kind == "clear":
                s.source = st["source"]
            elif kind == "del":
                s.deleted = list(st["names"])
            elif kind == "call":
                s.targets = [d["name"] for d in _json_defs(st.get("outputs", []))]
            elif kind == "return":
                s.target_payloads = {"expr": expr_from_json(st["value"])}
            self.defined.update(s.targets)
            self.stmts.append(s)
        if not self.stmts or self.stmts[-1].kind != "return":
            raise GenError(f"{name}: the last statement is not a return")

    def rename_stmt(self, s: Stmt, f: Callable[[str], str]) -> str:
        return json.dumps(_json_rename(s.payload, f)) + ",\n"

    def make_del(self, names: list[str]) -> Stmt:
        st = {"kind": "del", "names": names}
        return Stmt("del", deleted=names, refs=set(names), payload=st)

    def render_signature(self, function: str, params: list[tuple[str, Any]]) -> str:
        head = dict(self.doc_head)
        head["function"] = function
        head["params"] = [p for _, p in params]
        return json.dumps(head)[:-1] + ', "statements": [\n'

    def param_payload(self, p: Param, f: Callable[[str], str]) -> Any:
        return _json_rename(p.payload, f)

    def target_payload(self, s: Stmt, name: str, f: Callable[[str], str]) -> Any:
        return _json_rename(s.target_payloads[name], f)

    def render_unpack(self, s: Stmt, targets: list[tuple[str, Any]]) -> str:
        st = {"kind": "unpack", "source": s.source, "outputs": [p for _, p in targets]}
        if isinstance(s.payload.get("outputs"), dict) and "list" in s.payload["outputs"]:
            st["outputs"] = {"list": st["outputs"]}
        return json.dumps(st) + ",\n"

    def render_verbatim(self, s: Stmt) -> str:
        return json.dumps(s.payload) + ",\n"

    def render_return(self, e: tuple) -> str:
        return json.dumps({"kind": "return", "value": expr_to_json(e)}) + "\n"

    def return_expr(self, s: Stmt) -> tuple:
        return s.target_payloads["expr"]

    def footer(self) -> str:
        return "]}\n"


# --------------------------------------------------------------------------
# Replication.


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
