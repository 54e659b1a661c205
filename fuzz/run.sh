#!/usr/bin/env bash
# Runs both fuzz targets in parallel for SECONDS each (default 60).
#
#   fuzz/run.sh SECONDS [BUILD_DIR]      BUILD_DIR defaults to build-fuzz
#
# Builds the targets first if BUILD_DIR has no configuration yet (clang,
# ASan+UBSan+libFuzzer), refreshes the seed corpora (fuzz/make_seed_corpus.sh),
# then runs fuzz_trace_text and fuzz_trace_json side by side in libFuzzer's
# fork mode, which keeps going after a crash, timeout or OOM and saves each
# input under fuzz/artifacts/<target>/. New interesting inputs go to
# fuzz/work/<target>/ (not committed), logs to fuzz/logs/<target>.log.
# Options for every run: -max_len=65536 -timeout=10 -rss_limit_mb=2048
# -dict=fuzz/trace.dict. Extra libFuzzer flags can be given in FUZZ_FLAGS.
# At the end it prints, per target, the executions, final coverage and the
# artifacts found. Minimise a crash with:
#   build-fuzz/fuzz_trace_text -minimize_crash=1 -runs=100000 \
#     -exact_artifact_path=fuzz/regressions/text-NAME fuzz/artifacts/text/crash-...
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build-fuzz}"
cd "$root"

if [[ ! -f "$build/build.ninja" && ! -f "$build/Makefile" ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPEAKMEM_BUILD_FUZZ=ON -DPEAKMEM_SANITIZE=ON -DPEAKMEM_BUILD_TESTS=OFF -DPEAKMEM_BUILD_CLI=OFF
fi
cmake --build "$build" --target fuzz_trace_text fuzz_trace_json
fuzz/make_seed_corpus.sh

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

pids=()
for target in text json; do
  mkdir -p "fuzz/work/$target" "fuzz/artifacts/$target" fuzz/logs
  # shellcheck disable=SC2086
  "$build/fuzz_trace_$target" \
    -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -dict=fuzz/trace.dict -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/$target/" \
    ${FUZZ_FLAGS:-} \
    "fuzz/work/$target" "fuzz/corpus/$target" >"fuzz/logs/$target.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done

for target in text json; do
  log="fuzz/logs/$target.log"
  last="$(grep -E '^#[0-9]+' "$log" | tail -1 || true)"
  echo "fuzz_trace_$target: ${seconds}s; last status: ${last:-none}"
  found="$(ls "fuzz/artifacts/$target" 2>/dev/null | wc -l)"
  echo "  artifacts in fuzz/artifacts/$target: $found"
done
exit "$status"
