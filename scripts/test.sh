#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, checks formatting, builds with
# gcc (Release, warnings as errors) and runs every test, installs and builds an outside program
# with pkg-config, builds with clang under AddressSanitizer + UndefinedBehaviorSanitizer
# (warnings as errors) and runs every test again, then runs the file-reader fuzz targets for a
# bounded time.
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

echo "== install, then build an outside program with pkg-config"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build-ci-gcc --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig:$prefix/lib/aarch64-linux-gnu/pkgconfig"
cc -std=c11 -Wall -Wextra -Werror examples/tour.c $(pkg-config --cflags --libs ember) -o "$prefix/tour"
LD_LIBRARY_PATH="$(dirname "$(find "$prefix" -name 'libember.so' | head -1)")" "$prefix/tour" >/dev/null
rm -rf "$prefix"
echo "outside program built and ran"

echo "== clang AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build-ci-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DEMBER_SANITIZE=ON -DEMBER_WERROR=ON >/dev/null
cmake --build build-ci-asan -j "$jobs"
(cd build-ci-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$jobs")
echo "== fuzz targets (safetensors and .pt readers), 30 s each"
bash scripts/fuzz.sh 30

echo "== all checks passed"
