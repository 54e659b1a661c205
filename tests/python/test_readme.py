"""The README and the manual (docs/manual.md) are what the tools do today:
the accuracy table is current, every ```python block runs as written and
prints what the ```text block right after it shows (when one follows), and
every command line of the shell blocks runs (the peakmem ones with the built
CLI on bundled files, the install lines checked against pyproject.toml's
pins and extras).

A block is left out only with a visible marker on the line before its fence,
``<!-- readme-test: skip: REASON -->``; a marker without a reason fails."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import shlex
import subprocess
import sys
import types
import tomllib
from pathlib import Path

import pytest

from conftest import cli

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCUMENTS = (README, REPO / "docs" / "manual.md")
SKIP = re.compile(r"<!-- readme-test: skip(?:: (?P<reason>.*\S))? -->")


@dataclasses.dataclass(frozen=True)
class Block:
    language: str
    line: int  # of the opening fence, 1-based
    text: str
    skip_reason: str | None
    document: str = "README.md"
    end: int = 0  # the line after the closing fence, 1-based
    output: str | None = None  # a python block's printed output: the text block right after it

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


def _blocks(path: Path) -> list[Block]:
    document = str(path.relative_to(REPO))
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = SKIP.search(lines[i - 1]) if i > 0 else None
        if marker is not None and not marker.group("reason"):
            raise AssertionError(f"{document}:{i}: a readme-test skip marker without a reason")
        text = "\n".join(lines[i + 1:end]) + "\n"
        if m.group(1) == "text" and blocks and blocks[-1].language == "python" and blocks[-1].output is None \
                and all(not ln.strip() for ln in lines[blocks[-1].end:i]):
            blocks[-1] = dataclasses.replace(blocks[-1], output=text)
        else:
            blocks.append(Block(m.group(1), i + 1, text, marker.group("reason") if marker else None, document,
                                end + 1))
        i = end + 1
    return blocks


BLOCKS = [b for path in DOCUMENTS for b in _blocks(path)]
PYTHON = [b for b in BLOCKS if b.language == "python"]
SHELL = [b for b in BLOCKS if b.language in ("sh", "console")]


def test_accuracy_table_is_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "accuracy_table.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_blocks_are_found_and_none_is_skipped():
    # Today no block needs leaving out; a skip marker added later must say why (above).
    assert len(PYTHON) >= 9 and len(SHELL) >= 8
    assert [b.where for b in BLOCKS if b.skip_reason] == []
    # The README's examples: size a model, the largest batch, does each rank fit, a compiled step beside
    # its eager one, each with its output.
    front = [b for b in PYTHON if b.document == "README.md"]
    assert len(front) == 4 and all(b.output for b in front)


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.where)
def test_python_block_runs_as_written(thunder, block: Block, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    # A fresh directory (files a block writes land there) in which the
    # repository's tests/ (its bundled data) is where the README says.
    (tmp_path / "tests").symlink_to(REPO / "tests")
    monkeypatch.chdir(tmp_path)
    code = compile(block.text, block.where, "exec")
    printed = io.StringIO()
    # A module of its own, as a script is (`__main__`): Dynamo looks up the
    # module of a class the block defines.
    module = types.ModuleType("__readme__")
    monkeypatch.setitem(sys.modules, "__readme__", module)
    try:
        with contextlib.redirect_stdout(printed):
            exec(code, module.__dict__)
    finally:
        # Dynamo keeps the globals of code it compiled until the process
        # ends: the block's results are let go here.
        module.__dict__.clear()
    if block.output is not None:
        assert printed.getvalue().rstrip() == block.output.rstrip(), \
            f"{block.where}: the block printed\n{printed.getvalue()}\nthe text block after it shows\n{block.output}"


# Placeholders in the README's command lines and the bundled files they stand for.
PLACEHOLDERS = {
    "TRACE": "tests/data/corpus/mlp/fw.trace",
    "A.trace": "tests/data/corpus/mlp/fw.trace",
    "B.trace": "tests/data/corpus/mlp/fw.json",  # the same program, as peakmem's JSON export
    "STEP.json": "tests/data/steps/gpt_lm_adamw.step.json",
}


def _commands(block: Block) -> list[tuple[int, str, list[str]]]:
    """(line, command line, the output lines the README shows after it) for each command of a block."""
    out: list[tuple[int, str, list[str]]] = []
    for k, raw in enumerate(block.text.splitlines()):
        line = raw.removeprefix("$ ") if block.language == "console" else raw
        if block.language == "console" and not raw.startswith("$ "):
            if out and raw.strip() not in ("", "..."):
                out[-1][2].append(raw)
            continue
        if line.strip() and not line.lstrip().startswith("#"):
            out.append((block.line + 1 + k, line, []))
    return out


def _install_line_is_pinned(words: list[str], where: str) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pins = set(extras["thunder"])
    tested = {ln.strip() for ln in (REPO / "requirements-test.txt").read_text().splitlines()}
    for word in words[2:]:
        if word.startswith("-"):
            break  # options (an index URL) follow the requirement
        if word.startswith(".["):
            named = word[2:-1].split(",")
            assert set(named) <= set(extras), f"{where}: extras {named}, pyproject.toml has {sorted(extras)}"
        elif word != ".":
            assert word in pins and word in tested, \
                f"{where}: {word} is not pyproject's [thunder] pin {sorted(pins)} and requirements-test.txt's"


@pytest.mark.parametrize("block", SHELL, ids=lambda b: b.where)
def test_shell_block_command_lines_run(block: Block, tmp_path):
    commands = _commands(block)
    assert commands, f"{block.where}: no command line"
    for line, text, shown in commands:
        where = f"{block.document}:{line}"
        words = shlex.split(text, comments=True)
        if words[0] in ("./scripts/demo", "./scripts/test"):
            path = REPO / words[0]
            assert path.is_file() and path.stat().st_mode & 0o111, f"{where}: {words[0]} is not an executable script"
            continue
        if words[:2] == ["pip", "install"]:
            _install_line_is_pinned(words, where)
            continue
        if words[:3] == ["python3", "-m", "venv"]:
            continue
        assert words[0] in ("peakmem", "build/peakmem"), f"{where}: a command the test does not know: {text}"
        argv = [cli()] + [PLACEHOLDERS.get(w, w) for w in words[1:]]
        for i in range(1, len(argv) - 1):
            if argv[i] in ("-o", "--output"):
                argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
        r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{where}: {text}\nexit {r.returncode}: {r.stderr[-2000:]}"
        printed = r.stdout.splitlines()
        for expected in shown:
            assert expected in printed, f"{where}: the README shows {expected!r}; {text} printed:\n{r.stdout[:3000]}"


def test_the_bundled_step_file_gives_its_measured_peak():
    # tests/data/steps/README.md records the step measured by measure_step
    # when the file was written; the manual's console block shows the CLI's.
    recorded = (REPO / "tests/data/steps/README.md").read_text()
    peak, final = (int(v.replace(",", "")) for v in
                   re.search(r"peak ([\d,]+) bytes, final ([\d,]+) bytes", recorded).groups())
    r = subprocess.run([cli(), "step", "tests/data/steps/gpt_lm_adamw.step.json", "--format", "json"],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    import json

    got = json.loads(r.stdout)
    assert (got["peak_bytes"], got["final_bytes"]) == (peak, final)
