"""The long differential run, from the repository root:

    python -m tests.python.difftest --count 5000 [--seed N] [--save tests/data/regressions]
    python -m tests.python.difftest --steps --count 2000 [--seed N]

Runs `--count` Hypothesis examples of `programs()` through `check` (with
`--steps`: of `steps.step_programs()`, whole training steps, through
`steps.check_step`). Without
`--seed` the run draws new programs each time and keeps Hypothesis's example
database in `.hypothesis/examples` (ignored by git): a failure found once is
replayed first by the next run until it passes. `--seed N` makes the run
reproducible; Hypothesis then uses no database. Each shrunk mismatch is
printed and, with `--save DIR`, written there as a regression case (the
format of tests/data/regressions/, which the test suite replays). The last
line is a JSON summary; the exit status is 1 on any failure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from .harness import Mismatch, check
from .programs import Program, programs
from .steps import StepMismatch, check_step, step_programs

REPO = Path(__file__).resolve().parents[3]
DATABASE = REPO / ".hypothesis" / "examples"


def _leaves(group: BaseException):
    if isinstance(group, BaseExceptionGroup):
        for e in group.exceptions:
            yield from _leaves(e)
    else:
        yield group


def _save(m: Mismatch, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(m.source.encode()).hexdigest()[:10]
    path = directory / f"difftest_{m.outcome.kind}_{digest}.json"
    path.write_text(json.dumps(m.regression_case(), indent=1) + "\n")
    print(f"saved {path}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="peakmem's differential run: random programs, "
                                     "the runtime model against PyTorch measurement")
    parser.add_argument("--count", type=int, default=5000, help="Hypothesis examples (programs) to run")
    parser.add_argument("--seed", type=int, help="fixed seed: a reproducible run, without the example database")
    parser.add_argument("--save", type=Path, help="directory to write each shrunk mismatch to as a regression case")
    parser.add_argument("--steps", action="store_true",
                        help="whole training steps (estimate_step against measure_step)")
    parser.add_argument("--frontend", choices=("thunder", "eager"), default="thunder",
                        help="--steps: the front end both run the step on (default thunder)")
    args = parser.parse_args(argv)
    if args.steps:
        stats = {"steps_run": 0}
        return _run(args, step_programs(), lambda p: check_step(p.source(), args.frontend), StepMismatch, stats)
    stats = {"programs_run": 0, "traces_compared": 0}

    def differential(program: Program) -> None:
        stats["traces_compared"] += len(check(program.source(), program.input_shapes))

    return _run(args, programs(), differential, Mismatch, stats)


def _run(args: argparse.Namespace, strategy, body, mismatch_type: type, stats: dict) -> int:
    """`args.count` examples of `strategy` through `body`; each shrunk
    `mismatch_type` is printed (and saved with --save); a JSON summary last.
    The first key of `stats` counts the examples run."""
    counter = next(iter(stats))
    distinct: set[str] = set()
    start = time.monotonic()

    def differential(program) -> None:
        stats[counter] += 1
        distinct.add(program.source())
        if stats[counter] % 250 == 0:
            print(f"{stats[counter]} programs, {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
        body(program)

    run = settings(max_examples=args.count, deadline=None, database=DirectoryBasedExampleDatabase(DATABASE),
                   suppress_health_check=[HealthCheck.too_slow])(given(strategy)(differential))
    if args.seed is not None:
        run = seed(args.seed)(run)

    mismatches: list = []
    try:
        run()
    except* mismatch_type as group:
        mismatches = [e for e in _leaves(group) if isinstance(e, mismatch_type)]
        for m in mismatches:
            print(f"MISMATCH {m}", flush=True)
            if args.save and hasattr(m, "regression_case"):
                _save(m, args.save)
    finally:
        # The count includes Hypothesis's shrinking and database replays.
        print(json.dumps({**stats, "distinct_programs": len(distinct), "mismatches": len(mismatches),
                          "seconds": round(time.monotonic() - start, 1)}), flush=True)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
