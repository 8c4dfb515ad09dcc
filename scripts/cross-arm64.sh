#!/usr/bin/env bash
# Cross-builds Ember for 64-bit Arm Linux (AArch64) on a Debian x86-64 machine and runs
# cpu.test_gemm on the NEON kernel set (cpu_gemm_neon.c), which no x86 machine can run natively,
# under qemu-user, on one thread: Debian 12's qemu-user (7.2) hangs in the guest's
# pthread_create (a plain two-thread pthread program hangs the same way), so the suite's
# multi-threaded parts (thread invariance, the 2-thread passes) are left to an Arm machine.
# With --all, the whole tree (library, tests, examples) is cross-built too, without running it.
# Installs what it needs the first time (apt, as root): the cross compiler, qemu-user and the
# arm64 -dev packages of the libraries Ember links (Debian multiarch: `dpkg --add-architecture
# arm64`). Build directory: $BUILD (build-arm64).
# Usage: scripts/cross-arm64.sh [--all]
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=0
[ "${1:-}" = "--all" ] && ALL=1
B=${BUILD:-build-arm64}
LIBS="zlib1g-dev:arm64 libpng-dev:arm64 libjpeg-dev:arm64 libsqlite3-dev:arm64 libzip-dev:arm64
libncurses-dev:arm64"
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null ||
    ! dpkg -s $LIBS >/dev/null 2>&1; then
    echo "cross-arm64: installing the cross compiler, qemu-user and the arm64 libraries" >&2
    dpkg --add-architecture arm64
    apt-get update -qq
    # --no-remove: the arm64 -dev packages must not replace the host's
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-remove gcc-aarch64-linux-gnu \
        qemu-user $LIBS >/dev/null
fi
cmake -S . -B "$B" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
if [ $ALL = 1 ]; then
    cmake --build "$B" -j "$(nproc)"
else
    cmake --build "$B" -j "$(nproc)" --target cpu_test_gemm
fi
EMBER_NUM_THREADS=1 EMBER_TEST_ONE_THREAD=1 EMBER_TEST_GEMM_SETS=neon \
    qemu-aarch64 -L /usr/aarch64-linux-gnu "$B/tests/cpu_test_gemm"
