#!/usr/bin/env bash
# The thread tests under ThreadSanitizer: builds the library and tests/nn/test_threads.c with
# clang -fsanitize=thread (EMBER_TSAN, in build-tsan/ or $1), runs the whole test once
# (concurrent forwards and backward passes on shared modules, two threads submitting pool work,
# independent training loops in threads) and its concurrent-inference part 20 more times.
# Any race report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-tsan}
jobs=$(nproc)
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DEMBER_TSAN=ON \
  -DEMBER_WERROR=ON >/dev/null
cmake --build "$dir" -j "$jobs" --target nn_test_threads
# halt_on_error: the first report ends the run with exitcode 66
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
"$dir/tests/nn_test_threads"
for i in $(seq 1 20); do
  "$dir/tests/nn_test_threads" inference >/dev/null || {
    echo "tsan: concurrent inference, repetition $i failed" >&2
    exit 1
  }
done
echo "tsan: thread tests clean (1 full run, 20 concurrent-inference runs)"
