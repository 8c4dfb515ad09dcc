#!/usr/bin/env bash
# Runs Ember's GPU checks on a machine with an NVIDIA GPU and prints a short table last:
# tests/cuda/test_cuda (twice without a seeded cache: compiling, then warm), the whole op
# conformance suite and the gradient checks with their tensors on cuda:0 (ops the CUDA backend
# lacks run on the CPU through cpu_fallback; the suite prints which), the Fashion-MNIST example
# on cuda:0, and the GPU benchmarks side by side with PyTorch (bench/gpu_report.py).
# Binaries come from gpu-prebuilt/ when present (scripts/gpu-prebuild.sh makes it on a machine
# with the build's libraries), else from a CMake build here. Logs go to $OUT (or ./gpu-check-logs).
# The benchmarks run ROUNDS rounds (default 3), Ember's program then PyTorch's in each, and the
# table gives medians over the rounds and the range of the rounds' ratios. KERNEL_CACHE=DIR seeds
# the kernel cache with the cubins `ember cuda-cache sm_90a DIR` wrote elsewhere (same NVRTC; a
# directory or a .tgz of one; default gpu-prebuilt/kcache.tgz when scripts/gpu-prebuild.sh made
# it; KERNEL_CACHE= for none);
# test_cuda's one run then loads them instead of compiling (without it, test_cuda runs twice:
# compiling into the empty cache, then loading from it).
# EMBER_BENCH_PAUSE: seconds the GPU idles before each matmul, conv and sdpa benchmark case in
# both programs (default 0.5; the GPU's power cap slows a product that follows a heavy one).
# ONLY="names ..." runs only the named test rows: test_cuda, test_cuda_<family> (the
# tests/cuda programs), optim, example_graphs, conformance, gradcheck, cpu (a short device call
# for the tests a change touches, e.g. ONLY="test_cuda_stream optim").
# Usage: scripts/gpu-check.sh [--no-bench] [--no-train] [--no-tests] [bench case prefixes ...]
set -u
cd "$(dirname "$0")/.."
LOGS=${OUT:+$(mktemp -d /tmp/gpu-logs.XXXXXX)}
LOGS=${LOGS:-gpu-check-logs}
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
BENCH=1 TRAIN=1 TESTS=1
while [ $# -gt 0 ]; do
    case $1 in --no-bench) BENCH=0 ;; --no-train) TRAIN=0 ;; --no-tests) TESTS=0 ;; *) break ;; esac
    shift
done
CACHE=$(mktemp -d /tmp/ember-cache.XXXXXX)
export EMBER_CACHE_DIR=$CACHE
[ -z "${KERNEL_CACHE+set}" ] && [ -f gpu-prebuilt/kcache.tgz ] && KERNEL_CACHE=gpu-prebuilt/kcache.tgz
if [ -f "${KERNEL_CACHE:-}" ]; then
    tar xzf "$KERNEL_CACHE" -C "$CACHE"
elif [ -n "${KERNEL_CACHE:-}" ]; then
    cp "$KERNEL_CACHE"/cuda-*.cubin "$CACHE"/ 2>/dev/null
fi
only() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
rows=()
row() { rows+=("$(printf '| %-36s | %-6s | %s' "$1" "$2" "$3")"); }
secs() { awk "BEGIN{printf \"%.1f\", $2 - $1}"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$LOGS/gpu.txt" 2>&1
row "GPU" "-" "$(head -1 "$LOGS/gpu.txt")"
nvrtc=$(ldconfig -p 2>/dev/null | grep -o '/[^ ]*libnvrtc.so[.0-9]*$' | head -1)
[ -z "$nvrtc" ] && nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)
[ -z "$nvrtc" ] && nvrtc=$(python3 -c 'import nvidia.cuda_nvrtc, os, glob; d=os.path.dirname(nvidia.cuda_nvrtc.__file__); print((glob.glob(d+"/lib/libnvrtc.so*") or [""])[0])' 2>/dev/null)
[ -n "$nvrtc" ] && export EMBER_CUDA_NVRTC=$nvrtc
row "NVRTC" "-" "${nvrtc:-not found}"

if [ -d gpu-prebuilt ]; then
    B=gpu-prebuilt
    export LD_LIBRARY_PATH=$PWD/gpu-prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    row "binaries" "-" "gpu-prebuilt/ (built by scripts/gpu-prebuild.sh)"
else
    B=build-gpu
    t0=$(date +%s.%N)
    if cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release >"$LOGS/configure.log" 2>&1 &&
        cmake --build $B -j "$(nproc)" >"$LOGS/build.log" 2>&1 &&
        cmake --build $B -j "$(nproc)" --target gpu_bench >>"$LOGS/build.log" 2>&1; then
        cp $B/tests/cuda_test_cuda* $B/tests/ops_conformance $B/tests/autodiff_gradcheck \
            $B/tests/optim_test_optim $B/ 2>/dev/null
        row "build (cmake, Release)" "ok" "$(secs "$t0" "$(date +%s.%N)") s"
    else
        row "build (cmake, Release)" "FAIL" "see configure.log / build.log (run gpu-prebuild.sh elsewhere)"
    fi
fi

# the device as Ember sees it (ember devices: the public device queries)
[ -x "$B/ember" ] && row "ember devices" "-" "$("$B/ember" devices 2>&1 | grep '^cuda:0' || echo 'no cuda:0')"

run_test() { # name, log, command...
    local name=$1 log=$2
    shift 2
    local t0 rc res
    t0=$(date +%s.%N)
    timeout "${LIMIT:-240}" "$@" >"$LOGS/$log" 2>&1
    rc=$?
    res=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$LOGS/$log" | tail -1)
    row "$name" "$([ $rc = 0 ] && echo ok || echo FAIL)" "${res:-exit $rc}; $(secs "$t0" "$(date +%s.%N)") s"
}

if [ $TESTS = 0 ]; then
    row "tests" "-" "not run (--no-tests)"
elif [ -x $B/cuda_test_cuda ] && only test_cuda; then
    cold="cold kernel cache"
    [ -n "$(ls "$CACHE")" ] && cold="seeded kernel cache: $(ls "$CACHE" | wc -l) files"
    run_test "test_cuda ($cold)" test_cuda_cold.log env EMBER_LOG_CUDA=info $B/cuda_test_cuda
    [ "$cold" = "cold kernel cache" ] && # a seeded cache was warm already
        run_test "test_cuda (warm kernel cache)" test_cuda_warm.log env EMBER_LOG_CUDA=info $B/cuda_test_cuda
    grep -E 'FAIL|kernels' "$LOGS/test_cuda_cold.log" | head -20
fi
for t in $B/cuda_test_cuda_*; do # the per-family CUDA tests
    [ $TESTS = 1 ] || break
    [ -x "$t" ] || continue
    n=$(basename "$t")
    only "${n#cuda_}" || continue
    run_test "${n#cuda_}" "$n.log" "$t"
    grep -E '^FAIL' "$LOGS/$n.log" | head -20
done
if [ $TESTS = 1 ] && [ -x $B/optim_test_optim ] && only optim; then # the optimizers' fused device updates against PyTorch
    EMBER_FIXTURES=$PWD/tests/fixtures run_test "optimizers on cuda:0" optim.log \
        env EMBER_TEST_DEVICE=cuda:0 $B/optim_test_optim
    grep -E '^FAIL' "$LOGS/optim.log" | head -20
fi
if [ $TESTS = 1 ] && [ -x $B/example_graphs ] && only example_graphs; then # examples/graphs.c: captured, replayed, checked
    run_test "example_graphs on cuda:0" example_graphs.log env EMBER_DEVICE=cuda:0 $B/example_graphs
    tail -3 "$LOGS/example_graphs.log"
fi
if [ $TESTS = 1 ] && [ -x $B/ops_conformance ] && only conformance; then
    LIMIT=170 run_test "op conformance on cuda:0 (+fallback)" conformance.log \
        env EMBER_TEST_DEVICE=cuda:0 EMBER_CPU_FALLBACK=1 $B/ops_conformance
    grep -E '^FAIL|^device coverage' "$LOGS/conformance.log" | head -30
    cov=$(grep '^device coverage' "$LOGS/conformance.log")
    row "  device coverage" "-" "${cov#device coverage: }"
fi
if [ $TESTS = 1 ] && [ -x $B/autodiff_gradcheck ] && only gradcheck; then
    LIMIT=120 run_test "gradient checks on cuda:0 (+fallback)" gradcheck.log \
        env EMBER_TEST_DEVICE=cuda:0 EMBER_CPU_FALLBACK=1 $B/autodiff_gradcheck
    grep -E '^FAIL' "$LOGS/gradcheck.log" | head -10
fi
if [ $TESTS = 1 ] && [ -d gpu-prebuilt/cpu ] && only cpu; then
    isa=$(grep -o -m1 'avx512[a-z]*' /proc/cpuinfo | head -1)
    row "host CPU" "-" "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); ${isa:+AVX-512 }$(nproc) threads"
    for t in gpu-prebuilt/cpu/*; do
        EMBER_FIXTURES=$PWD/tests/fixtures run_test "$(basename "$t") (host CPU)" "$(basename "$t").log" "$t"
    done
    EMBER_FIXTURES=$PWD/tests/fixtures run_test "op conformance (host CPU)" conformance_cpu.log $B/ops_conformance
fi
if [ $TRAIN = 1 ] && [ -x $B/fashion_mnist ]; then
    data=/usr/share/datasets/fashion-mnist
    [ -d gpu-prebuilt/data ] && data=gpu-prebuilt/data
    t0=$(date +%s.%N)
    EMBER_DEVICE=cuda:0 EMBER_CPU_FALLBACK=1 EMBER_LOG_DISPATCH=info timeout 150 $B/fashion_mnist --data "$data" \
        --epochs 1 --limit "${TRAIN_LIMIT:-6000}" >"$LOGS/fashion_mnist.log" 2>&1
    rc=$?
    acc=$(grep -o 'test accuracy: [0-9.]* *%*' "$LOGS/fashion_mnist.log" | tail -1)
    row "fashion_mnist on cuda:0 (1 epoch)" "$([ $rc = 0 ] && echo ok || echo FAIL)" \
        "${acc:-exit $rc}; $(secs "$t0" "$(date +%s.%N)") s; $(grep -c 'runs on the cpu' "$LOGS/fashion_mnist.log") kinds via cpu"
    grep -o 'em_[a-z_0-9]* runs on the cpu' "$LOGS/fashion_mnist.log" | sort -u | tr '\n' ' ' | head -c 1500
    echo
fi
if [ $BENCH = 1 ] && [ -x $B/gpu_bench ]; then
    pairs=()
    for r in $(seq "${ROUNDS:-3}"); do
        e=$LOGS/gpu_ember_$r.txt t=$LOGS/gpu_torch_$r.txt
        EMBER_CPU_FALLBACK=1 $B/gpu_bench "$@" >"$e" 2>"${e%.txt}.err" ||
            { echo "gpu_bench failed ($?); backtrace:"; EMBER_CPU_FALLBACK=1 cuda-gdb -batch -ex run \
                -ex bt --args $B/gpu_bench "$@" 2>&1 | tail -25; break; }
        python3 bench/gpu_torch.py "$@" >"$t" 2>"${t%.txt}.err"
        pairs+=("$e" "$t")
    done
    [ ${#pairs[@]} -gt 0 ] && python3 bench/gpu_report.py "${pairs[@]}" >"$LOGS/gpu_bench.md"
    tail -3 "$LOGS"/gpu_ember_1.err "$LOGS"/gpu_torch_1.err 2>/dev/null
fi
rm -rf "$CACHE"
# $OUT brings back few files: the logs travel as one archive, the tables as text
[ -n "${OUT:-}" ] && tar czf "$OUT/gpu-check-logs.tgz" -C "$LOGS" . && cp "$LOGS"/gpu_bench.md "$OUT/" 2>/dev/null

echo
[ -f "$LOGS/gpu_bench.md" ] && cat "$LOGS/gpu_bench.md" && echo
echo "| check                                | result | detail"
echo "|--------------------------------------|--------|-------"
printf '%s\n' "${rows[@]}"
