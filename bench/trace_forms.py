"""The two forms a trace is replicated in (bench/make_trace.py): its printed
text and peakmem's JSON export, each read into statements whose names can be
renamed per layer, and the expressions both share."""

from __future__ import annotations

import ast
import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

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
