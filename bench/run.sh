#!/usr/bin/env bash
# peakmem's benchmarks, end to end (bench/README.md):
#
#   bench/run.sh
#
# 1. builds the library, the CLI and bench/peakmem_bench in build-bench/
#    (Release, Google Benchmark from Debian's libbenchmark-dev);
# 2. generates the traces with bench/make_trace.py (a real llama block
#    forward, replicated layer after layer) at each size in
#    $PEAKMEM_BENCH_SIZES, as text and JSON, into $PEAKMEM_BENCH_TRACES
#    (kept between runs; regenerated when missing);
# 3. runs peakmem_bench (readers, models and their baselines) on the traces
#    up to $PEAKMEM_BENCH_MAX_MB megabytes;
# 4. runs bench/rss.sh (peak RSS and time of `peakmem analyze`) on every trace;
# 5. runs bench/bench_python.py (peakmem vs Thunder's get_alloc_memory on a
#    live TraceCtx) with $PEAKMEM_BENCH_PYTHON;
# 6. runs bench/bench_step.py (estimate_step on a Llama-2-7B-shaped model on
#    meta, and on the Python benchmark's stack) with $PEAKMEM_BENCH_PYTHON;
# 7. runs bench/bench_plan.py (the planner against Inductor's and XLA's
#    orders, and against the optimum on small trees and DAGs);
# 8. writes bench/results/{machine,cpp,rss,python,summary}.json, summary.md,
#    python.txt, step_*.json, and the plot docs/scaling.png.
#
# Environment (defaults):
#   PEAKMEM_BENCH_SIZES   "1e3 1e4 1e5 1e6 3e6 1e7"  statements per generated trace
#   PEAKMEM_BENCH_SOURCE  corpus:llama_block/fw   the real trace replicated
#   PEAKMEM_BENCH_EXTRA   "corpus:llama_block/bw@1e5 corpus:mlp/fw@1e5"  more source@size traces
#   PEAKMEM_BENCH_TRACES  /tmp/peakmem-bench/traces
#   PEAKMEM_BENCH_MAX_MB  3000   peakmem_bench skips larger files (it holds
#                                the text and two parses at once: ~18 GB of
#                                memory at 10^7 statements)
#   PEAKMEM_BENCH_MIN_TIME 0.5   --benchmark_min_time, seconds
#   PEAKMEM_BENCH_PYTHON  .venv/bin/python (empty: skip step 5)
#   PEAKMEM_BENCH_LAYERS  400    layers of the Python benchmark's stack
#   PEAKMEM_BENCH_STEPS   "build gen cpp rss python step plan summary"  steps to run
#   PEAKMEM_BENCH_COMMIT  the commit measured, when the tree is not a git checkout
#   PEAKMEM_RSS_*         see bench/rss.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=$ROOT/build-bench
OUT=$ROOT/bench/results
SIZES=${PEAKMEM_BENCH_SIZES:-"1e3 1e4 1e5 1e6 3e6 1e7"}
SOURCE=${PEAKMEM_BENCH_SOURCE:-corpus:llama_block/fw}
EXTRA=${PEAKMEM_BENCH_EXTRA:-"corpus:llama_block/bw@1e5 corpus:mlp/fw@1e5"}
TRACES=${PEAKMEM_BENCH_TRACES:-/tmp/peakmem-bench/traces}
MAX_MB=${PEAKMEM_BENCH_MAX_MB:-3000}
MIN_TIME=${PEAKMEM_BENCH_MIN_TIME:-0.5}
PY=${PEAKMEM_BENCH_PYTHON-.venv/bin/python}
LAYERS=${PEAKMEM_BENCH_LAYERS:-400}
STEPS=${PEAKMEM_BENCH_STEPS:-"build gen cpp rss python step plan summary"}
want() { [[ " $STEPS " == *" $1 "* ]]; }
log() { echo "== bench/run.sh: $*" >&2; }

mkdir -p "$OUT" "$TRACES"

# The machine, for the record (the numbers mean little without it); written
# when something is measured.
want build || want gen || want cpp || want rss || want python && python3 - "$OUT/machine.json" <<'PY'
import json, os, subprocess, sys, time
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception as e:
        return str(e)
info = {
    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    "lscpu": sh("lscpu"),
    "cpus": os.cpu_count(),
    "mem_total": sh("grep MemTotal /proc/meminfo"),
    "kernel": sh("uname -srm"),
    "compiler": sh("c++ --version | head -1"),
    "git_commit": os.environ.get("PEAKMEM_BENCH_COMMIT") or sh("git rev-parse HEAD 2>/dev/null"),
    "git_dirty_files": [] if os.environ.get("PEAKMEM_BENCH_COMMIT") else
        sh("git status --porcelain --untracked-files=no 2>/dev/null").splitlines(),
    "load_avg_1m_at_run_start": os.getloadavg()[0],
}
json.dump(info, open(sys.argv[1], "w"), indent=1)
PY

if want build; then
  log "build ($BUILD)"
  cmake -S . -B "$BUILD" -G Ninja -DPEAKMEM_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$BUILD" peakmem peakmem_bench
fi

if want gen; then
  gen() {  # gen SOURCE NAME SIZE
    local src=$1 name=$2 size=$3
    for ext in trace json; do
      local out="$TRACES/${name}_${size}.$ext"
      if [[ ! -f $out || ! -f $out.meta.json ]]; then
        log "generate $out"
        python3 bench/make_trace.py "$src" -n "$size" -o "$out" --quiet
        # Every generated trace must read without error.
        "$BUILD/peakmem" analyze "$out" --model thunder -o /dev/null
      fi
    done
  }
  src_name() { local s=${1#corpus:}; echo "${s//\//_}"; }
  for size in $SIZES; do gen "$SOURCE" "$(src_name "$SOURCE")" "$size"; done
  for spec in $EXTRA; do gen "${spec%@*}" "$(src_name "${spec%@*}")" "${spec#*@}"; done
fi

if want cpp; then
  log "peakmem_bench (files up to $MAX_MB MB)"
  "$BUILD/peakmem_bench" --traces="$TRACES" --max_mb="$MAX_MB" \
    --benchmark_min_time="$MIN_TIME" \
    --benchmark_out="$OUT/cpp.json" --benchmark_out_format=json
fi

if want rss; then
  log "rss.sh"
  PEAKMEM_BIN="$BUILD/peakmem" bench/rss.sh "$TRACES" "$OUT/rss.json"
  # The same command on one thread (-j 1), on the 10^6-statement text trace:
  # what the parallel reader saves.
  PEAKMEM_BIN="$BUILD/peakmem" PEAKMEM_RSS_THREADS=1 PEAKMEM_RSS_FORMATS=text \
    PEAKMEM_RSS_FILES=fw_1e6.trace bench/rss.sh "$TRACES" "$OUT/rss_one_thread.json"
fi

if want python && [[ -n $PY ]]; then
  log "bench_python.py ($PY, $LAYERS layers)"
  set +e
  "$PY" bench/bench_python.py --layers "$LAYERS" --json "$OUT/python.json" 2>&1 \
    | grep -v -e "transformer_engine" -e "warnings.warn" | tee "$OUT/python.txt"
  set -e
fi

if want step && [[ -n $PY ]]; then
  for model in llama7b stack; do
    log "bench_step.py --model $model"
    "$PY" bench/bench_step.py --model "$model" --layers "$LAYERS" --json "$OUT/step_$model.json" 2>&1 \
      | grep -v -e "transformer_engine" -e "warnings.warn"
  done
fi

if want plan && [[ -n $PY ]]; then
  log "bench_plan.py"
  "$PY" bench/bench_plan.py --json "$OUT/plan.json" | tee "$OUT/plan.md"
fi

if want summary; then
  log "summary"
  PLOT_PY=python3
  if [[ -n $PY ]] && "$PY" -c "import matplotlib" 2>/dev/null; then PLOT_PY=$PY; fi
  "$PLOT_PY" - "$OUT" "$ROOT/docs/scaling.png" <<'PY'
"""Reads the results of the steps above; writes summary.json / summary.md
(every target, met or not, with its baseline ratio) and docs/scaling.png."""
import json, math, os, re, sys
out_dir, png = sys.argv[1], sys.argv[2]

def load(name):
    p = os.path.join(out_dir, name)
    return json.load(open(p)) if os.path.exists(p) else None

cpp, rss, py, machine = load("cpp.json"), load("rss.json"), load("python.json"), load("machine.json")
rss_one = load("rss_one_thread.json") or []
S = {"targets": [], "cpp": {}, "cli": [], "python": None}

def unit_s(b, key):
    f = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
    return b[key] * f

# ---- C++ benchmarks: per file, per benchmark: seconds (real and CPU) per iteration
rows = {}
if cpp:
    for b in cpp["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        what, rest = b["name"].split("/", 1)
        fname = rest.split("/")[0]
        r = rows.setdefault(fname, {"file": fname})
        n = b.get("statements", 0)
        r["statements"] = int(n)
        r["bytes"] = int(round(b.get("bytes_per_stmt", 0) * n))
        r[what] = {"real_s": unit_s(b, "real_time"), "cpu_s": unit_s(b, "cpu_time")}
        if "heap_per_stmt" in b:
            r["heap_per_stmt"] = b["heap_per_stmt"]
    for fname, r in rows.items():
        n, nb = r["statements"], r["bytes"]
        def rate(what, per):
            if what not in r: return None
            return {"cpu": per / r[what]["cpu_s"], "real": per / r[what]["real_s"]}
        r["read_MBps"] = rate("read", nb / 1e6)
        r["read_parallel_MBps"] = rate("read_parallel", nb / 1e6)
        r["scan_MBps"] = rate("scan", nb / 1e6)
        r["simdjson_MBps"] = rate("simdjson_dom", nb / 1e6)
        r["read_stmts_per_s"] = rate("read", n)
        for m in ("thunder", "runtime"):
            r[f"{m}_stmts_per_s"] = rate(f"analyze_{m}", n)
            r[f"{m}_sim_stmts_per_s"] = rate(f"simulate_{m}", n)
        r["touch_stmts_per_s"] = rate("touch", n)
        for what in ("read", "analyze_thunder", "analyze_runtime", "simulate_thunder", "simulate_runtime"):
            if what in r:
                r[f"{what}_ns_per_stmt_cpu"] = 1e9 * r[what]["cpu_s"] / n
                r[f"{what}_ns_per_stmt_real"] = 1e9 * r[what]["real_s"] / n
    S["cpp"] = rows

def family(fname):
    m = re.match(r"(.+)_(\d+e\d+)\.(trace|json)$", fname)
    return (m.group(1), m.group(3)) if m else (fname, "")

def series(fam, form, key, sub="cpu"):
    pts = []
    for f, r in rows.items():
        if family(f) == (fam, form) and r.get(key) is not None:
            v = r[key][sub] if isinstance(r[key], dict) else r[key]
            pts.append((r["statements"], v))
    return sorted(pts)

MAIN = "llama_block_fw"
def at_size(fam, form, n):
    best = None
    for f, r in rows.items():
        if family(f) == (fam, form):
            if best is None or abs(math.log(r["statements"] / n)) < abs(math.log(best["statements"] / n)):
                best = r
    return best

def target(name, value, unit, goal, met, detail=""):
    S["targets"].append({"target": name, "measured": value, "unit": unit, "goal": goal,
                         "met": met, "detail": detail})

# ---- targets
big_text = at_size(MAIN, "trace", 1e6)
if big_text and big_text.get("read_MBps"):
    v = big_text["read_MBps"]["cpu"]
    target(f"text reader throughput ({big_text['statements']}-statement trace)", round(v, 1), "MB/s (CPU time)", ">= 200",
           v >= 200, f"one thread; baseline memchr line scan {big_text['scan_MBps']['cpu']:.0f} MB/s; reader/scan = "
           f"{v / big_text['scan_MBps']['cpu']:.4f}; wall-clock {big_text['read_MBps']['real']:.1f} MB/s")
    par = big_text.get("read_parallel_MBps")
    if par:
        target(f"text reader throughput, chunks on every CPU ({big_text['statements']}-statement trace)",
               round(par["real"], 1), "MB/s (wall time)", ">= 200", par["real"] >= 200,
               f"{machine['cpus'] if machine else '?'} CPUs; as the CLI reads; "
               f"{par['real'] / big_text['read_MBps']['real']:.2f}x the one-thread reader's wall-clock rate")
big_json = at_size(MAIN, "json", 1e6)
if big_json and big_json.get("read_MBps"):
    v = big_json["read_MBps"]["cpu"]
    sj = big_json.get("simdjson_MBps") or {"cpu": float("nan")}
    target(f"JSON reader throughput ({big_json['statements']}-statement trace)", round(v, 1), "MB/s (CPU time)", "(no target)",
           None, f"baseline simdjson DOM parse {sj['cpu']:.0f} MB/s; reader/simdjson = {v / sj['cpu']:.4f}")
# The simulation alone (peak only: no per-step rows, breakdown or live set,
# what an optimization pass comparing schedules asks for) is the target;
# the full report (what the CLI builds) is listed next to it.
for m in ("runtime", "thunder"):
    for key, what in ((f"{m}_sim_stmts_per_s", "simulation, peak only"),
                      (f"{m}_stmts_per_s", "with the full report")):
        if big_text and big_text.get(key):
            v = big_text[key]["cpu"]
            t = big_text["touch_stmts_per_s"]["cpu"]
            is_target = m == "runtime" and key.endswith("_sim_stmts_per_s")
            target(f"{m} model {what} ({big_text['statements']} statements, parse excluded)", round(v / 1e6, 3),
                   "M statements/s (CPU time)", ">= 10" if is_target else "(no target)",
                   (v >= 1e7) if is_target else None,
                   f"baseline touch-each-statement loop {t / 1e6:.0f} M/s; model/touch = {v / t:.5f}")
for what, label in (("read", "text reader"), ("simulate_runtime", "runtime simulation"),
                    ("analyze_runtime", "runtime model, full report"), ("analyze_thunder", "thunder model, full report")):
    pts = series(MAIN, "trace", f"{what}_ns_per_stmt_cpu")
    if len(pts) >= 2:
        vals = [v for _, v in pts]
        ratio = max(vals) / min(vals)
        target(f"time per statement flat, {label} ({pts[0][0]:.0e}..{pts[-1][0]:.0e} statements)",
               round(ratio, 2), "max/min ns per statement", "<= 2", ratio <= 2,
               ", ".join(f"{n:.0e}: {v:.0f} ns" for n, v in pts))

# ---- CLI (rss.sh)
if rss:
    S["cli"] = rss
    for model in ("runtime", "thunder"):
        pts = [r for r in rss if r["status"] == "ok" and r["model"] == model and r["format"] == "text"
               and family(r["file"]) == (MAIN, "trace")]
        pts.sort(key=lambda r: r["statements"])
        one = min(pts, key=lambda r: abs(math.log(r["statements"] / 1e6)), default=None)
        if one and 0.5e6 <= one["statements"] <= 2e6:
            cpu = one["user_s"] + one["sys_s"]
            rss_gib = one["max_rss_kb"] / 2**20
            single = [r for r in rss_one if r["status"] == "ok" and r["model"] == model and r["file"] == one["file"]]
            alone = (f"; on one thread (-j 1): wall {single[0]['wall_s']:.2f} s, user+sys "
                     f"{single[0]['user_s'] + single[0]['sys_s']:.2f} s, peak RSS "
                     f"{single[0]['max_rss_kb'] / 2**20:.3f} GiB") if single else ""
            walls = one.get("wall_runs_s") or [one["wall_s"]]
            spread = (f"median of {len(walls)} runs, {walls[0]:.2f}-{walls[-1]:.2f} s; "
                      if len(walls) > 1 else "")
            target(f"`peakmem analyze --model {model}` on {one['statements']} statements: time", round(one["wall_s"], 2),
                   "s wall (%suser+sys %.2f s; load %.1f)" % (spread, cpu, one["load_avg_1m_before"]),
                   "< 1", one["wall_s"] < 1, f"file {one['file']}, {one['bytes'] / 1e6:.0f} MB, reader "
                   f"threads: one per CPU{alone}")
            target(f"`peakmem analyze --model {model}` on {one['statements']} statements: peak RSS",
                   round(rss_gib, 3), "GiB", "< 1", rss_gib < 1, "")
        big = [r for r in pts if r["statements"] >= 1e4]
        if len(big) >= 2:
            per = [(r["statements"], 1024 * r["max_rss_kb"] / r["statements"]) for r in big]
            ratio = max(v for _, v in per) / min(v for _, v in per)
            target(f"memory linear, CLI {model} model ({big[0]['statements']:.0e}..{big[-1]['statements']:.0e})",
                   round(ratio, 2), "max/min peak RSS bytes per statement", "<= 2 (linear)", ratio <= 2,
                   ", ".join(f"{n:.0e}: {v:.0f} B" for n, v in per))
            # GNU time counts CPU time in 10 ms steps: runs under 50 ms (10^4
            # statements) say little about time per statement.
            timed = [r for r in big if r["user_s"] + r["sys_s"] >= 0.05]
            tper = [(r["statements"], 1e9 * (r["user_s"] + r["sys_s"]) / r["statements"]) for r in timed]
            if len(tper) < 2:
                continue
            ratio = max(v for _, v in tper) / min(v for _, v in tper)
            target(f"time per statement flat, CLI {model} model ({timed[0]['statements']:.0e}..{timed[-1]['statements']:.0e})",
                   round(ratio, 2), "max/min CPU ns per statement", "<= 2", ratio <= 2,
                   ", ".join(f"{n:.0e}: {v:.0f} ns" for n, v in tper))
    failed = [r for r in rss if r["status"] != "ok"]
    for r in failed:
        target(f"`peakmem analyze --model {r['model']}` on {r['file']} ({r['statements']} statements)",
               r["status"], f"(peak RSS {r['max_rss_kb'] / 2**20:.1f} GiB, cap {r['cap_gib']} GiB)",
               "completes", False, r["error"].strip().splitlines()[-1][-200:] if r["error"].strip() else "")

# ---- Python
if py:
    S["python"] = {k: v for k, v in py.items() if k != "traces"}
    S["python"]["traces"] = {}
    for kind, r in py["traces"].items():
        S["python"]["traces"][kind] = {k: v for k, v in r.items() if not k.startswith("profile")}
        sp = r["speedup_get_alloc_memory_cpu"]
        target(f"peakmem.thunder.get_alloc_memory vs Thunder's, live {kind} TraceCtx ({r['bound_symbols']} bsyms)",
               round(sp, 2), "x faster (CPU time)", ">= 20", sp >= 20,
               f"Thunder {1e3 * r['thunder_get_alloc_memory']['cpu_s']:.0f} ms, peakmem "
               f"{1e3 * r['peakmem_get_alloc_memory']['cpu_s']:.0f} ms (export to JSON "
               f"{1e3 * r['export_json']['cpu_s']:.0f} ms, C++ read+model {1e3 * r['core_read_and_thunder_model']['cpu_s']:.0f} ms, "
               f"breakdown dict {1e3 * r['breakdown_to_dict']['cpu_s']:.0f} ms); results equal: "
               f"{r['equal_peak'] and r['equal_breakdown']}")

json.dump(S, open(os.path.join(out_dir, "summary.json"), "w"), indent=1)

# ---- summary.md
L = ["# peakmem benchmark summary", ""]
if machine:
    cpu = re.search(r"Model name:\s*(.+)", machine["lscpu"])
    L.append(f"Machine: {cpu.group(1) if cpu else '?'}, {machine['cpus']} CPUs, {machine['mem_total']}; "
             f"{machine['compiler']}; commit {machine['git_commit'][:10]}"
             f"{' (+ uncommitted changes)' if machine['git_dirty_files'] else ''}; 1-minute load average at "
             f"the start {machine['load_avg_1m_at_run_start']:.1f} (see rss.json for each run's).")
    L.append("")
L += ["| target | measured | goal | met |", "|---|---|---|---|"]
for t in S["targets"]:
    met = {True: "yes", False: "**no**", None: "-"}[t["met"]]
    L.append(f"| {t['target']} | {t['measured']} {t['unit']} | {t['goal']} | {met} |")
L.append("")
L.append("Details (baselines measured in the same run):")
L.append("")
for t in S["targets"]:
    if t["detail"]:
        L.append(f"- {t['target']}: {t['detail']}")
if rows:
    L += ["", "## C++ benchmarks (CPU time per iteration)", "",
          "| file | statements | MB | scan MB/s | read MB/s | read/scan | read, all CPUs, MB/s wall | simdjson MB/s | heap B/stmt | thunder Mstmt/s | runtime Mstmt/s | touch Mstmt/s |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    def fmt(x, k=1e6, d=2):
        return "-" if x is None else f"{x['cpu'] / k:.{d}f}"
    for f, r in sorted(rows.items(), key=lambda kv: (family(kv[0]), kv[1]["statements"])):
        rs = (r["read_MBps"]["cpu"] / r["scan_MBps"]["cpu"]) if r.get("read_MBps") and r.get("scan_MBps") else None
        L.append(f"| {f} | {r['statements']} | {r['bytes'] / 1e6:.1f} | {fmt(r['scan_MBps'], 1, 0)} | "
                 f"{fmt(r['read_MBps'], 1, 1)} | {'-' if rs is None else f'{rs:.4f}'} | "
                 f"{'-' if not r.get('read_parallel_MBps') else '%.1f' % r['read_parallel_MBps']['real']} | {fmt(r['simdjson_MBps'], 1, 0)} | "
                 f"{r.get('heap_per_stmt', float('nan')):.0f} | {fmt(r['thunder_stmts_per_s'], 1e6, 3)} | "
                 f"{fmt(r['runtime_stmts_per_s'], 1e6, 3)} | {fmt(r['touch_stmts_per_s'], 1e6, 0)} |")
if rss:
    L += ["", "## `peakmem analyze` (GNU time)", "",
          "| file | model | format | reader threads | statements | wall s | user+sys s | peak RSS MiB | RSS B/stmt | load | status |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rss + rss_one:
        rssm = (r["max_rss_kb"] or 0) / 1024
        per = 1024 * (r["max_rss_kb"] or 0) / r["statements"] if r["statements"] else float("nan")
        threads = {0: "all", None: "all"}.get(r.get("threads"), r.get("threads"))
        L.append(f"| {r['file']} | {r['model']} | {r['format']} | {threads} | {r['statements']} | {float('nan') if r['wall_s'] is None else r['wall_s']:.2f} | "
                 f"{r['user_s'] + r['sys_s']:.2f} | {rssm:.1f} | {per:.0f} | {r['load_avg_1m_before']:.1f} | {r['status']} |")
if py:
    L += ["", "## Python: live TraceCtx (bench/bench_python.py)", ""]
    L.append(f"{py['layers']}-layer residual MLP stack, width {py['width']}; Thunder compile "
             f"{py['thunder_compile']['cpu_s']:.0f} s CPU. Best of {py['repeat']}, CPU time:")
    L += ["", "| trace | bsyms | Thunder get_alloc_memory ms | peakmem get_alloc_memory ms | speedup | peakmem.analyze (runtime) ms | export ms | C++ read+model ms | breakdown ms | equal |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, r in py["traces"].items():
        ms = lambda k: 1e3 * r[k]["cpu_s"]  # noqa: E731
        L.append(f"| {kind} | {r['bound_symbols']} | {ms('thunder_get_alloc_memory'):.1f} | "
                 f"{ms('peakmem_get_alloc_memory'):.1f} | {r['speedup_get_alloc_memory_cpu']:.2f}x | "
                 f"{ms('peakmem_analyze_runtime'):.1f} | {ms('export_json'):.1f} | {ms('core_read_and_thunder_model'):.1f} | "
                 f"{ms('breakdown_to_dict'):.1f} | {r['equal_peak'] and r['equal_breakdown']} |")
    for kind, r in py["traces"].items():
        prof = r.get("profile_peakmem_get_alloc_memory", {}).get("tottime")
        if prof:
            L += ["", f"cProfile, peakmem.thunder.get_alloc_memory on the {kind} trace (top entries by own time):",
                  "", "```", "\n".join(prof.strip().splitlines()[:22]), "```"]
open(os.path.join(out_dir, "summary.md"), "w").write("\n".join(L) + "\n")
print("\n".join(L[: 3 + len(S["targets"]) + 3]))

# ---- docs/scaling.png
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("summary: matplotlib missing; docs/scaling.png not written", file=sys.stderr)
    sys.exit(0)
fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5.2))
def plot(ax, pts, label, **kw):
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label, **kw)
plot(a1, series(MAIN, "trace", "read_ns_per_stmt_cpu"), "text reader")
plot(a1, series(MAIN, "json", "read_ns_per_stmt_cpu"), "JSON reader")
plot(a1, series(MAIN, "trace", "analyze_thunder_ns_per_stmt_cpu"), "thunder model (full report)")
plot(a1, series(MAIN, "trace", "analyze_runtime_ns_per_stmt_cpu"), "runtime model (full report)")
plot(a1, series(MAIN, "trace", "simulate_runtime_ns_per_stmt_cpu"), "runtime simulation (peak only)")
if rss:
    for model, style in (("runtime", "-"), ("thunder", "--")):
        pts = sorted((r["statements"], 1e9 * (r["user_s"] + r["sys_s"]) / r["statements"]) for r in rss
                     if r["status"] == "ok" and r["model"] == model and r["format"] == "text"
                     and family(r["file"]) == (MAIN, "trace") and r["statements"] >= 1e4
                     and r["user_s"] + r["sys_s"] >= 0.05)  # GNU time's 10 ms steps
        plot(a1, pts, f"CLI end to end, {model} (user+sys)", linestyle=style, color="black" if model == "runtime" else "gray")
touch = series(MAIN, "trace", "touch_stmts_per_s")
plot(a1, [(n, 1e9 / v) for n, v in touch], "baseline: touch each statement", linestyle=":", color="silver")
a1.axhline(100, color="red", linewidth=0.8, linestyle=":")
a1.text(1.1e3, 110, "10 M statements/s", color="red", fontsize=8)
a1.set_xscale("log"); a1.set_yscale("log")
a1.set_xlabel("statements in the trace"); a1.set_ylabel("CPU ns per statement")
a1.set_title("Time per statement (flat = linear time)")
a1.grid(True, which="both", alpha=0.3); a1.legend(fontsize=7)
if rss:
    for model in ("runtime", "thunder"):
        for form, style in (("trace", "-"), ("json", "--")):
            pts = sorted((r["statements"], r["max_rss_kb"] / 1024) for r in rss
                         if r["status"] == "ok" and r["model"] == model and r["format"] == "text"
                         and family(r["file"]) == (MAIN, form))
            plot(a2, pts, f"CLI peak RSS, {model}, {'text' if form == 'trace' else 'JSON'} input", linestyle=style)
    heap = sorted((r["statements"], r["heap_per_stmt"] * r["statements"] / 2**20) for f, r in rows.items()
                  if family(f) == (MAIN, "trace") and r.get("heap_per_stmt"))
    plot(a2, heap, "parsed text trace (heap, incl. its source text)", linestyle=":")
    xs = [r["statements"] for r in rss if family(r["file"]) == (MAIN, "trace")]
    if xs:
        lo, hi = min(xs), max(xs)
        a2.plot([lo, hi], [lo * 2e-3, hi * 2e-3], color="silver", linestyle=":", label="linear: 2 KiB/statement")
    a2.axhline(1024, color="red", linewidth=0.8, linestyle=":")
    a2.text(1.1e3, 1150, "1 GiB", color="red", fontsize=8)
a2.set_xscale("log"); a2.set_yscale("log")
a2.set_xlabel("statements in the trace"); a2.set_ylabel("MiB")
a2.set_title("Peak memory")
a2.grid(True, which="both", alpha=0.3); a2.legend(fontsize=7)
cpu = re.search(r"Model name:\s*(.+)", machine["lscpu"]).group(1) if machine else "?"
fig.suptitle(f"peakmem on generated llama-block traces ({cpu}, {machine['cpus'] if machine else '?'} CPUs, shared machine; CPU time)", fontsize=10)
fig.tight_layout()
fig.savefig(png, dpi=110)
print(f"summary: wrote {png}", file=sys.stderr)
PY
fi
log "done; results in $OUT"
