#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a bounded time on a copy
# of its seed corpus in fuzz/corpus/<target>/. Usage: scripts/fuzz.sh [seconds per target]
# (default 15; CI runs the default). FUZZ_TARGETS="fuzz_pt fuzz_json" runs only those.
# Crashes, timeouts (10 s) and inputs that take more than 2 GB are written to
# build-fuzz/artifacts/ and fail the script.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${FUZZ_SECONDS:-15}}
build=${FUZZ_BUILD:-build-fuzz}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DEMBER_FUZZ=ON \
  -DEMBER_TESTS=OFF >/dev/null
targets=${FUZZ_TARGETS:-$(cd fuzz && ls fuzz_*.c | sed 's/\.c$//')}
cmake --build "$build" -j "${JOBS:-2}" --target $targets
mkdir -p "$build/artifacts"
for t in $targets; do
  work="$build/corpus/$t"
  rm -rf "$work"
  mkdir -p "$work"
  cp fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  echo "== $t for ${secs}s"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 "$work"
done
echo "== fuzzing passed"
