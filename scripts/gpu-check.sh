#!/usr/bin/env bash
# Builds Ember on a machine with an NVIDIA GPU, runs tests/cuda/test_cuda twice (first with an
# empty kernel cache, so NVRTC compiles; then again, loading the cached cubin) and the whole
# ctest suite, and prints a short table last. Logs go to $OUT (or ./gpu-check-logs).
# Where CMake cannot configure (the data/store libraries' headers are missing), it falls back to
# compiling the library's sources directly and runs the CUDA test alone.
set -u
cd "$(dirname "$0")/.."
LOGS=${OUT:-gpu-check-logs}
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
CACHE=$(mktemp -d /tmp/ember-cache.XXXXXX)
export EMBER_CACHE_DIR=$CACHE
rows=()
row() { rows+=("$(printf '| %-34s | %-8s | %s' "$1" "$2" "$3")"); }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$LOGS/gpu.txt" 2>&1
row "GPU" "-" "$(head -1 "$LOGS/gpu.txt")"
nvrtc=$(ldconfig -p 2>/dev/null | grep -o '/[^ ]*libnvrtc.so[.0-9]*$' | head -1)
[ -z "$nvrtc" ] && nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)
[ -z "$nvrtc" ] && nvrtc=$(python3 -c 'import nvidia.cuda_nvrtc, os, glob; d=os.path.dirname(nvidia.cuda_nvrtc.__file__); print((glob.glob(d+"/lib/libnvrtc.so*") or [""])[0])' 2>/dev/null)
[ -n "$nvrtc" ] && export EMBER_CUDA_NVRTC=$nvrtc
row "NVRTC" "-" "${nvrtc:-not found}"

mode=cmake
t0=$(date +%s)
if cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$LOGS/configure.log" 2>&1 &&
    cmake --build "$BUILD" -j "$JOBS" >"$LOGS/build.log" 2>&1; then
    TEST=$BUILD/tests/cuda_test_cuda
    row "build (cmake, Release)" "ok" "$(($(date +%s) - t0)) s, $(grep -c -i warning "$LOGS/build.log") warnings"
else
    mode=direct
    row "build (cmake)" "FAIL" "see configure.log/build.log; trying a direct build"
    D=$BUILD-direct
    mkdir -p "$D/obj"
    : >"$LOGS/direct.log"
    for f in $(find src -name '*.c'); do
        o=$D/obj/$(echo "$f" | tr '/' '_').o
        flags="-O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -DEMBER_BUILDING -pthread"
        case $f in *_avx2.c) flags="$flags -mavx2 -mfma -mf16c" ;; *_avx512.c) flags="$flags -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma" ;; esac
        echo "$o: $f" >>"$LOGS/direct.log"
        printf '%s\n' "gcc $flags -c $f -o $o"
    done | grep '^gcc' | xargs -P "$JOBS" -I{} sh -c '{} 2>>'"$LOGS/direct.log"' || true'
    rm -f "$D/libember.a"
    ar rcs "$D/libember.a" "$D"/obj/*.o
    TEST=$D/test_cuda
    gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itests tests/cuda/test_cuda.c tests/harness.c \
        "$D/libember.a" -o "$TEST" -lm -ldl -lpthread >>"$LOGS/direct.log" 2>&1
    [ -x "$TEST" ] && st=ok || st=FAIL
    row "build (direct, CUDA test only)" "$st" "$(ls "$D"/obj | wc -l) objects"
fi

for pass in cold warm; do
    if [ -x "$TEST" ]; then
        ts=$(date +%s.%N)
        EMBER_LOG_CUDA=info "$TEST" >"$LOGS/test_cuda_$pass.log" 2>&1
        rc=$?
        te=$(date +%s.%N)
        res=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$LOGS/test_cuda_$pass.log" | tail -1)
        row "test_cuda ($pass kernel cache)" "$([ $rc = 0 ] && echo ok || echo FAIL)" \
            "$res; $(awk "BEGIN{printf \"%.1f\", $te - $ts}") s; $(grep -o 'kernels [a-z ]* by NVRTC\|kernels loaded from cache' "$LOGS/test_cuda_$pass.log" | head -1)"
    fi
done
if [ -x "$TEST" ]; then
    echo "---- test_cuda (cold) failures and notes ----"
    grep -E 'FAIL|fail|error|cuda:0 is|pool:|skipped|kernels' "$LOGS/test_cuda_cold.log" | head -40
fi

if [ $mode = cmake ]; then
    (cd "$BUILD" && ctest -j "$JOBS" --timeout "${CTEST_TIMEOUT:-300}" >"$LOGS/ctest.log" 2>&1)
    row "ctest (whole suite)" "$(grep -q '100% tests passed' "$LOGS/ctest.log" && echo ok || echo FAIL)" \
        "$(grep -E 'tests passed|tests failed' "$LOGS/ctest.log" | tail -1)"
    grep -E '\*\*\*Failed|Failed|Timeout' "$LOGS/ctest.log" | head -10
fi
rm -rf "$CACHE"

echo
echo "| check                              | result   | detail"
echo "|------------------------------------|----------|-------"
printf '%s\n' "${rows[@]}"
