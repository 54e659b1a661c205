"""Exports a live Thunder TraceCtx to peakmem's JSON trace form.

The form is documented in docs/trace-json.md. It is read from the trace's
objects (bound symbols, proxies, collection contents), not from its printed
text, so every output has a type, including multi-output ops and fusions that
the printed text leaves untyped, and every collection says whether it is a
list, tuple, dict or set. One statement per line keeps error locations in
the C++ reader meaningful.
"""

from __future__ import annotations

import json
from typing import Any

_CONTAINERS = {list: "list", tuple: "tuple", dict: "dict", set: "set"}


class _Exporter:
    def __init__(self, trace: Any) -> None:
        from thunder.core.prims import PrimIDs
        from thunder.core.proxies import CollectionProxy, Proxy

        self.trace = trace
        self.Proxy = Proxy
        self.CollectionProxy = CollectionProxy
        self.skip_ids = {PrimIDs.UNPACK_TRIVIAL}
        self.unpack_id = PrimIDs.UNPACK_SEQUENCE
        self.del_id = PrimIDs.DEL
        self.return_id = PrimIDs.RETURN

    def definition(self, p: Any) -> dict:
        d: dict[str, Any] = {"name": p.name, "type": p.type_string()}
        if isinstance(p, self.CollectionProxy):
            kind = _CONTAINERS.get(type(p.collection()))
            if kind is None:
                for cls, name in _CONTAINERS.items():
                    if isinstance(p.collection(), cls):
                        kind = name
                        break
            if kind is not None:
                d["container"] = kind
        return d

    def pattern(self, x: Any) -> Any:
        if isinstance(x, self.Proxy):
            return self.definition(x)
        if isinstance(x, tuple):
            return [self.pattern(i) for i in x]
        if isinstance(x, list):
            return {"list": [self.pattern(i) for i in x]}
        return "_"

    def expr(self, x: Any) -> Any:
        if isinstance(x, self.Proxy):
            return {"ref": x.name}
        if isinstance(x, tuple):
            return {"tuple": [self.expr(i) for i in x]}
        if isinstance(x, list):
            return {"list": [self.expr(i) for i in x]}
        if isinstance(x, dict):
            return {"dict": [[self.expr(k), self.expr(v)] for k, v in x.items()]}
        if isinstance(x, (set, frozenset)):
            return {"set": [self.expr(i) for i in x]}
        if isinstance(x, bool) or x is None:
            return {"const": repr(x)}
        if isinstance(x, (int, float)):
            return {"const": repr(x)}
        return {"const": repr(x)}

    def params(self) -> list[dict]:
        si = self.trace.siginfo()
        typed: dict[str, Any] = {}
        for bsym in self.trace.bound_symbols:
            if bsym.sym.id in self.skip_ids and isinstance(bsym.output, self.Proxy):
                typed[bsym.output.name] = bsym.output
        out = []

        def param(name: str, kind: str) -> None:
            p = typed.get(name)
            value = self.definition(p) if p is not None else {"name": name}
            entry: dict[str, Any] = {"kind": kind, "value": value}
            if name in si.defaultdict:
                entry["default"] = self.expr(si.defaultdict[name])
            out.append(entry)

        for name, _ in si.args:
            param(name, "positional")
        if si.varargs is not None:
            param(si.varargs[0], "varargs")
        for name in si.kwargs:
            param(name, "keyword")
        if si.varkwargs is not None:
            param(si.varkwargs[0], "varkwargs")
        return out

    def statement(self, bsym: Any) -> dict | None:
        sym = bsym.sym
        sid = sym.id
        if sid in self.skip_ids:
            return None
        if sid == self.unpack_id:
            return {
                "kind": "unpack",
                "source": bsym.args[0].name,
                "outputs": [self.pattern(o) for o in bsym.output],
            }
        if sid == self.del_id:
            return {"kind": "del", "names": [p.name for p in bsym.flat_proxy_args]}
        if sid == self.return_id:
            value = bsym.args[0] if len(bsym.args) == 1 else tuple(bsym.args)
            return {"kind": "return", "value": self.expr(value)}
        if sym.name == "clear_mutable_collection":
            return {"kind": "clear", "source": bsym.args[0].name}
        module = getattr(sym, "module", None)
        module_name = getattr(module, "__name__", None)
        callee = f"{module_name}.{sym.name}" if module_name else sym.name
        s: dict[str, Any] = {
            "kind": "call",
            "callee": callee,
            "symbol": sym.name,
            "id": sid if isinstance(sid, str) else None,
            "args": [self.expr(a) for a in bsym.args],
        }
        if bsym.kwargs:
            s["kwargs"] = [[k, self.expr(v)] for k, v in bsym.kwargs.items()]
        s["outputs"] = self.pattern(bsym.output)
        return s

    def to_json(self) -> str:
        header = {
            "format": "peakmem.trace",
            "version": 1,
            "function": self.trace.siginfo().name,
            "params": self.params(),
        }
        statements = [s for s in map(self.statement, self.trace.bound_symbols) if s is not None]
        head = json.dumps(header)[:-1]  # reopen the object to append the statements
        body = ",\n".join(json.dumps(s) for s in statements)
        return f'{head}, "statements": [\n{body}\n]}}\n'


def trace_to_json(trace: Any) -> str:
    """Returns `trace` (a Thunder TraceCtx) in peakmem's JSON trace form."""
    return _Exporter(trace).to_json()
