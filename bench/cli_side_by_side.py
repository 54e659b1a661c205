#!/usr/bin/env python3
"""Two `peakmem` binaries on the same trace, run alternately: each one's
median wall time and CPU time (user + sys), and the ratios of the medians
(B / A).

    python3 bench/cli_side_by_side.py BASE_BIN NEW_BIN TRACE [--runs 11] [--b-args ARGS]
                                      [--same-output] [-- ANALYZE_ARGS...]

Each round runs both binaries once, `peakmem analyze TRACE ANALYZE_ARGS` with
the report to /dev/null, the first of the pair alternating from round to
round, so that a slow minute on a shared machine falls on both alike (the
baseline is measured in the same run, as bench/README.md asks). One untimed
run of each comes first (the trace into the page cache). The 1-minute load
average is printed before and after: on a loaded machine the CPU-time
ratio stays meaningful, the wall times much less.

--same-output: also checks that both binaries write the same report (for a
change that must not change any number); exits 1 if they differ.
"""
from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(binary: str, trace: str, extra: list[str], output: str) -> tuple[float, float]:
    """Wall and CPU (user + sys) seconds of one `peakmem analyze`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([binary, "analyze", trace, *extra, "-o", output], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the baseline peakmem binary (A)")
    parser.add_argument("new", help="the binary measured against it (B)")
    parser.add_argument("trace")
    parser.add_argument("--runs", type=int, default=11, help="rounds (each runs both once)")
    parser.add_argument("--same-output", action="store_true",
                        help="check that both write the same report")
    parser.add_argument("--b-args", default="",
                        help="more arguments for B only (a newer CLI's `--table full`, which "
                             "an older one printed by default)")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.extra = argv[split + 1:]  # for `peakmem analyze`, both binaries
    binaries = {"A": args.base, "B": args.new}
    extra = {"A": args.extra, "B": args.extra + shlex.split(args.b_args)}
    for name, path in binaries.items():
        if not os.access(path, os.X_OK):
            print(f"cli_side_by_side: {name} is not an executable: {path}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        outputs = {name: os.path.join(tmp, f"{name}.out") for name in binaries}
        for name, path in binaries.items():  # untimed: the page cache, and the reports to compare
            run_once(path, args.trace, extra[name], outputs[name])
        if args.same_output:
            with open(outputs["A"], "rb") as a, open(outputs["B"], "rb") as b:
                same = a.read() == b.read()
            print(f"reports identical: {'yes' if same else 'NO'}")
            if not same:
                return 1
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in binaries}
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        for round_no in range(args.runs):
            order = ["A", "B"] if round_no % 2 == 0 else ["B", "A"]
            for name in order:
                times[name].append(run_once(binaries[name], args.trace, extra[name], os.devnull))
            print(f"round {round_no + 1}: " + ", ".join(
                f"{name} {times[name][-1][0]:.3f} s" for name in ["A", "B"]), flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    wall, cpu = {}, {}
    for name, path in binaries.items():
        walls = [w for w, _ in times[name]]
        cpus = [c for _, c in times[name]]
        wall[name], cpu[name] = statistics.median(walls), statistics.median(cpus)
        print(f"{name} {path}: median wall {wall[name]:.3f} s (runs {min(walls):.3f}-"
              f"{max(walls):.3f}), median CPU {cpu[name]:.3f} s (runs {min(cpus):.3f}-{max(cpus):.3f})")
    print(f"ratio of median walls B/A: {wall['B'] / wall['A']:.3f}")
    print(f"ratio of median CPU times B/A: {cpu['B'] / cpu['A']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
