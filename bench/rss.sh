#!/usr/bin/env bash
# Peak RSS and wall/CPU time of the `peakmem analyze` command on generated
# traces, measured with GNU time (`/usr/bin/time -v`).
#
#   bench/rss.sh TRACE_DIR [OUT.json]
#
# Runs, for every TRACE_DIR/*.trace and *.json (smallest first) and for each
# model in $PEAKMEM_RSS_MODELS (default "runtime thunder"):
#     peakmem analyze FILE --model M --table full   (text report, stdout to /dev/null)
# and also with --format json on traces of up to $PEAKMEM_RSS_JSON_MAX
# statements (default 1100000: the JSON report of a 10^6-statement trace is
# ~300 MB and takes ~3 s; bigger ones only repeat that at 10x the disk).
# PEAKMEM_RSS_FORMATS (default "text json") picks the formats, and
# PEAKMEM_RSS_THREADS (default 0: one per CPU) the reader threads (`-j`).
# Each run gets a virtual-memory cap of $PEAKMEM_RSS_CAP_GB GiB (default 48;
# `ulimit -v`), so that a trace far too big for the machine fails cleanly
# (recorded as "failed") instead of pushing the machine into the OOM killer,
# and a time limit of $PEAKMEM_RSS_TIMEOUT seconds (default 900). The cap is
# on address space, not memory: simdjson reserves about 5 bytes of address
# space per byte of JSON, mostly never touched (the 10^7-statement JSON
# trace, 1.76 GB, peaks at 10 GB RSS but needs more than 16 GiB of address space).
# Each command runs $PEAKMEM_RSS_REPEAT times (default 5) on traces of up to
# $PEAKMEM_RSS_REPEAT_MAX statements (default 3100000; bigger ones once):
# single wall-clock timings on a VM move by ±20% from run to run, so the
# row gives the run with the median wall time (its user and sys time), every
# run's wall time ("wall_runs_s") and the largest peak RSS of all runs.
# Writes one JSON object per command to OUT.json (a JSON array; default
# bench/results/rss.json) and a table to stdout.
#
# Environment: PEAKMEM_BIN (default build-bench/peakmem).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:?usage: bench/rss.sh TRACE_DIR [OUT.json]}
OUT=${2:-$ROOT/bench/results/rss.json}
BIN=${PEAKMEM_BIN:-$ROOT/build-bench/peakmem}
MODELS=${PEAKMEM_RSS_MODELS:-"runtime thunder"}
FORMATS=${PEAKMEM_RSS_FORMATS:-"text json"}
JSON_MAX=${PEAKMEM_RSS_JSON_MAX:-1100000}
CAP_GB=${PEAKMEM_RSS_CAP_GB:-48}
TIMEOUT=${PEAKMEM_RSS_TIMEOUT:-900}
FILTER=${PEAKMEM_RSS_FILES:-}
THREADS=${PEAKMEM_RSS_THREADS:-0}
REPEAT=${PEAKMEM_RSS_REPEAT:-5}
REPEAT_MAX=${PEAKMEM_RSS_REPEAT_MAX:-3100000}

if [[ ! -x /usr/bin/time ]]; then
  echo "rss.sh: /usr/bin/time missing; installing GNU time" >&2
  apt-get install -y -q time >/dev/null
fi
[[ -x $BIN ]] || { echo "rss.sh: no peakmem binary at $BIN (build first)" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Files, smallest first.
mapfile -t FILES < <(find "$DIR" -maxdepth 1 -type f \( -name '*.trace' -o -name '*.json' \) \
  ! -name '*.meta.json' -printf '%s %p\n' | sort -n | awk '{print $2}')
[[ ${#FILES[@]} -gt 0 ]] || { echo "rss.sh: no traces in $DIR" >&2; exit 2; }

printf '%-28s %-8s %-5s %12s %10s %9s %9s %9s %8s  %s\n' file model fmt statements bytes wall_s user_s sys_s rss_MiB status
echo "[" > "$OUT"
first=1
for f in "${FILES[@]}"; do
  name=$(basename "$f")
  [[ -n $FILTER && $name != *$FILTER* ]] && continue
  meta="$f.meta.json"
  stmts=null
  [[ -f $meta ]] && stmts=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["statements"])' "$meta")
  bytes=$(stat -c %s "$f")
  # Read the file once first, so that every run finds it in the page cache
  # (the C++ benchmarks before this step fill the memory with 10^7-statement
  # traces and push it out; a run that reads from disk measures the disk).
  cat "$f" > /dev/null
  for model in $MODELS; do
    for fmt in $FORMATS; do
      if [[ $fmt == json && $stmts != null && $stmts -gt $JSON_MAX ]]; then
        continue
      fi
      runs=1
      [[ $stmts != null && $stmts -le $REPEAT_MAX ]] && runs=$REPEAT
      : > "$TMP/rows.jsonl"
      for ((run = 1; run <= runs; run++)); do
        load=$(cut -d' ' -f1 /proc/loadavg)
        # The whole text report (a row per statement), not the compact table
        # long traces get by default.
        table=()
        [[ $fmt == text ]] && table=(--table full)
        set +e
        (
          ulimit -v $((CAP_GB * 1024 * 1024))
          exec timeout "$TIMEOUT" /usr/bin/time -v -o "$TMP/time.txt" \
            "$BIN" analyze "$f" --model "$model" --format "$fmt" "${table[@]}" -j "$THREADS" > /dev/null 2> "$TMP/err.txt"
        )
        rc=$?
        set -e
        python3 - "$TMP/time.txt" "$TMP/err.txt" "$rc" "$name" "$model" "$fmt" "$stmts" "$bytes" "$load" "$CAP_GB" "$THREADS" \
          > "$TMP/row.json" <<'PY'
import json, re, sys
tf, ef, rc, name, model, fmt, stmts, nbytes, load, cap, threads = sys.argv[1:]
text = open(tf).read() if tf else ""
def field(label):
    m = re.search(re.escape(label) + r":\s*(.+)", text)
    return m.group(1).strip() if m else None
def wall(s):
    if not s: return None
    parts = [float(p) for p in s.split(":")]
    v = 0.0
    for p in parts: v = v * 60 + p
    return v
rss_kb = field("Maximum resident set size (kbytes)")
err = open(ef).read().strip()
row = {
    "file": name, "model": model, "format": fmt, "threads": int(threads),
    "statements": None if stmts == "null" else int(stmts), "bytes": int(nbytes),
    "rc": int(rc),
    "status": "ok" if rc == "0" else ("timeout" if rc == "124" else "failed"),
    "wall_s": wall(field("Elapsed (wall clock) time (h:mm:ss or m:ss)")),
    "user_s": float(field("User time (seconds)") or "nan"),
    "sys_s": float(field("System time (seconds)") or "nan"),
    "max_rss_kb": int(rss_kb) if rss_kb else None,
    "load_avg_1m_before": float(load),
    "cap_gib": int(cap),
    "error": err[-500:] if rc != "0" else "",
}
print(json.dumps(row))
PY
        cat "$TMP/row.json" >> "$TMP/rows.jsonl"
        [[ $(python3 -c 'import json,sys;print(json.loads(open(sys.argv[1]).read())["status"])' "$TMP/row.json") == ok ]] || break
      done
      # The run with the median wall time stands for all (see the top).
      python3 - "$TMP/rows.jsonl" > "$TMP/row.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
failed = [r for r in rows if r["status"] != "ok"]
if failed:
    print(json.dumps(failed[0]))
    sys.exit()
walls = sorted(r["wall_s"] for r in rows)
by_wall = sorted(rows, key=lambda r: r["wall_s"])
row = dict(by_wall[(len(by_wall) - 1) // 2])
row["runs"] = len(rows)
row["wall_runs_s"] = walls
row["max_rss_kb"] = max(r["max_rss_kb"] or 0 for r in rows) or None
print(json.dumps(row))
PY
      [[ $first -eq 1 ]] || echo "," >> "$OUT"
      first=0
      cat "$TMP/row.json" >> "$OUT"
      python3 -c '
import json,sys
r=json.loads(open(sys.argv[1]).read())
rss = (r["max_rss_kb"] or 0)/1024
print("%-28s %-8s %-5s %12s %10d %9.2f %9.2f %9.2f %8.1f  %s" % (r["file"], r["model"], r["format"], r["statements"], r["bytes"], float("nan") if r["wall_s"] is None else r["wall_s"], r["user_s"], r["sys_s"], rss, r["status"]))' "$TMP/row.json"
    done
  done
done
echo "]" >> "$OUT"
echo "rss.sh: wrote $OUT" >&2
