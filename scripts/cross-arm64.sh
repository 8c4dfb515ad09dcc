#!/usr/bin/env bash
# Cross-builds Ember for 64-bit Arm Linux (AArch64) on a Debian x86-64 machine and runs
# cpu.test_gemm on the NEON kernel set (cpu_gemm_neon.c), which no x86 machine can run natively,
# under qemu-user, on 1 and 2 threads (thread invariance included). The test is relinked
# statically for that: under Debian 12's qemu-user (7.2) a dynamically linked guest hangs in
# pthread_create (a plain two-thread program too), a static one does not. Libraries without an
# arm64 static archive (libzip) are left out of that link; test_gemm does not reach them.
# With --all, the whole tree (library, tests, examples) is cross-built too, without running it.
# With --suite, the whole tree is cross-built and every test program is relinked statically and
# run under qemu-user on 2 threads (those that need a library without an arm64 static archive,
# libzip for the .pt reader and the checkpoint tests, are listed as not linked); core.test_core
# is left out: it forks children that exec /proc/self/exe, which qemu-user cannot run without
# binfmt_misc. Exits non-zero if a program that ran reports a failure.
# Installs what it needs the first time (apt, as root): the cross compiler, qemu-user and the
# arm64 -dev packages of the libraries Ember links (Debian multiarch: `dpkg --add-architecture
# arm64`). Build directory: $BUILD (build-arm64).
# Usage: scripts/cross-arm64.sh [--all | --suite]
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=0 SUITE=0
[ "${1:-}" = "--all" ] && ALL=1
[ "${1:-}" = "--suite" ] && ALL=1 SUITE=1
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
# A test program relinked statically: CMake's link line (the libraries the split produced, in its
# order) with the shared libraries swapped for their static archives, into tests/static/ (the
# linker's messages, about dlopen in a static program among them, in static/<test>.link).
S="$B/tests/static"
mkdir -p "$S"
static_link() {
    local t=$1 cmd
    cmd=$(sed -e "s# -o $t # -o static/$t #" -e 's#-O2 -DNDEBUG#-O2 -DNDEBUG -static#' \
        -e 's#/usr/lib/aarch64-linux-gnu/libzip.so##' \
        -e 's#/usr/lib/aarch64-linux-gnu/lib\([a-z0-9]*\)\.so#-l\1#g' -e 's#-lpng #-lpng16 #' \
        "$B/tests/CMakeFiles/$t.dir/link.txt")
    (cd "$B/tests" && eval "$cmd -lm -lpthread" >"static/$t.link" 2>&1)
}
static_link cpu_test_gemm || { cat "$S/cpu_test_gemm.link" >&2; exit 1; }
EMBER_NUM_THREADS=2 EMBER_TEST_GEMM_SETS=neon qemu-aarch64 "$S/cpu_test_gemm"
[ $SUITE = 1 ] || exit 0

# every other test program likewise, then a run from the source root as ctest runs it
fails=0
for d in "$B"/tests/CMakeFiles/*.dir; do
    t=$(basename "$d" .dir)
    [ -f "$d/link.txt" ] && [ -f "$B/tests/$t" ] || continue
    case $t in cpu_test_gemm | core_test_core | cuda_test_cuda_mock) continue ;; esac
    if ! static_link "$t"; then
        echo "$t: not linked statically ($(grep -m1 -o "undefined reference to \`[a-z_0-9]*'\|cannot find -l[a-z0-9]*\|static link of dynamic object \`[^']*'" "$S/$t.link" || echo "see $S/$t.link"))"
        continue
    fi
    r=0
    EMBER_FIXTURES="$PWD/tests/fixtures" EMBER_NUM_THREADS=2 timeout 900 \
        qemu-aarch64 "$S/$t" >"$S/$t.log" 2>&1 || r=$?
    echo "$t: $(grep -E '^[0-9]+ passed' "$S/$t.log" | tail -1) (exit $r)"
    [ $r = 0 ] || fails=$((fails + 1))
done
echo "cross-arm64: $fails test programs failed under qemu-user"
[ $fails = 0 ]
