#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, checks formatting, builds with
# gcc (Release, warnings as errors) and runs every test, checks the packaging (make, headers as
# C and C++, install, find_package, pkg-config, add_subdirectory, the docs' calls), builds with
# clang under AddressSanitizer + UndefinedBehaviorSanitizer (warnings as errors) and runs every
# test again, runs the thread tests under ThreadSanitizer, then runs every parser's fuzz target
# for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/install-deps.sh

echo "== format check (clang-format)"
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find src include tests tools examples bench -name '*.[ch]')
clang-format --dry-run --Werror $files

echo "== gcc Release build and tests"
cmake -S . -B build-ci-gcc -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc -DEMBER_WERROR=ON >/dev/null
cmake --build build-ci-gcc -j "$jobs"
(cd build-ci-gcc && ctest --output-on-failure -j "$jobs")
echo "== GPU tests (ctest ran them; their own words here)"
gpu_out=$(./build-ci-gcc/tests/cuda_test_cuda)
echo "${gpu_out%%$'\n'*}"

echo "== packaging: make, headers as C11/C++17, install, find_package, pkg-config, add_subdirectory, docs"
bash scripts/check-packaging.sh build-ci-gcc

echo "== clang AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build-ci-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DEMBER_SANITIZE=ON -DEMBER_WERROR=ON >/dev/null
cmake --build build-ci-asan -j "$jobs"
(cd build-ci-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$jobs")
echo "== ThreadSanitizer: concurrent forwards, backward passes and training loops"
bash scripts/tsan.sh build-ci-tsan

echo "== fuzz targets (every parser), 15 s each"
bash scripts/fuzz.sh 15

echo "== all checks passed"
