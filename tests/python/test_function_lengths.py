"""No function of the Python package runs over LIMIT lines (its docstring
included) unless the comment right above it (above its decorators, if any)
starts with ``# Long:`` and says why: a long function is one to split."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "peakmem"
LIMIT = 80


def _long_functions_without_a_reason(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines), str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            above = lines[first - 2].strip() if first >= 2 else ""
            if length > LIMIT and not above.startswith("# Long:"):
                found.append(f"{path.relative_to(package)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_long_functions_say_why():
    assert _long_functions_without_a_reason() == []


def test_the_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\n\n# Long: a reason.\ndef said():\n{body}\n")
    assert _long_functions_without_a_reason(tmp_path) == [f"long.py:1 long ({LIMIT + 1} lines)"]
