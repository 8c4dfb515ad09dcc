#!/usr/bin/env bash
# Ember's CPU benchmark suite: builds Ember (Release), then runs every case in Ember and in its
# peer in this same run (PyTorch through /usr/bin/python3 with 2 threads; OpenBLAS cblas_sgemm /
# sgemv with 2 threads), plus the machine's FMA peak and copy bandwidth, and prints one table.
# The programs take turns case by case (OpenBLAS, Ember, PyTorch for one case, then the next
# case), for ROUNDS rounds (default 3), so a slow minute on a shared machine lands on both sides
# of a ratio; the table gives each side's median over the rounds' medians and the median of the
# rounds' ratios.
# Usage: bench/run.sh [--record LABEL] [case-prefix ...]   (make bench runs it with no arguments)
# --record appends the table to bench/RESULTS.md. Benchmarks are not tests: nothing here fails
# on a slow number.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORD=()
if [ "${1:-}" = "--record" ]; then
    RECORD=(--record "$2")
    shift 2
fi
BUILD=${BUILD:-build}
OUT=$BUILD/bench
mkdir -p "$OUT"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j 2 --target ember_static >/dev/null
LIBS="-lm -lpthread -ldl" # the benchmarks use the core library only
CFLAGS="-O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iinclude -I$BUILD/gen/include"
cc $CFLAGS -o "$OUT/ember_bench" bench/ember_bench.c "$BUILD/libember.a" $LIBS
cc $CFLAGS -o "$OUT/machine" bench/machine.c -lpthread
if [ ! -f /usr/include/x86_64-linux-gnu/cblas.h ] && [ ! -f /usr/include/cblas.h ] ||
    ! ls /usr/lib/*/libopenblas.so >/dev/null 2>&1; then
    echo "installing libopenblas-dev" >&2
    apt-get install -y -qq libopenblas-dev >/dev/null
fi
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "installing python3-torch" >&2
    apt-get install -y -qq python3-torch >/dev/null
fi
cc $CFLAGS -o "$OUT/openblas_bench" bench/openblas_bench.c -lopenblas
{
    grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu\t/'
    printf 'load\t%s\n' "$(uptime | sed 's/.*load average: //')"
    "$OUT/machine"
} >"$OUT/machine.txt"
export EMBER_NUM_THREADS=2
# The peers pick their own BLAS kernels for this CPU: a machine may set OPENBLAS_CORETYPE /
# OPENBLAS_L2_SIZE for older programs (Haswell kernels on a newer CPU, say), which would slow the
# peers down; openblas_bench checks the results of the kernels it gets.
peer=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
CASES="matmul_256 matmul_1024 matmul_2048 matmul_4096 bf16_matmul_1024 strided_matmul_1024
gemv_n gemv_t conv_3x3 conv_7x7s2 conv_fwbw_7x7s2
maxpool_k3s1 maxpool_k5s2d2_cl softmax fwbw_softmax fwbw_xent layer_norm gelu sum topk_k1_dim0 topk_k10_last rfft_1M
ew_exp ew_log ew_tanh ew_sigmoid ew_silu ew_erf ew_add ew_mul ew_div ew_pow ew_maximum
ew_i32_add ew_i32_div ew_i32_remainder ew_i32_maximum
train_mlp train_cnn train_lstm"
selected() { # case: whether a command-line prefix names it (all cases without arguments)
    [ $# -eq 1 ] && return 0
    local c=$1 a
    shift
    for a in "$@"; do [ "${c#"$a"}" != "$c" ] && return 0; done
    return 1
}
: >"$OUT/openblas.txt"
: >"$OUT/ember.txt"
: >"$OUT/torch.txt"
for round in $(seq "${ROUNDS:-3}"); do
    for c in $CASES; do
        selected "$c" "$@" || continue
        { printf 'round\t%s\n' "$round"; } | tee -a "$OUT/openblas.txt" "$OUT/ember.txt" \
            >>"$OUT/torch.txt"
        case $c in matmul_* | gemv_*) "${peer[@]}" "$OUT/openblas_bench" "$c" >>"$OUT/openblas.txt" ;; esac
        "$OUT/ember_bench" "$c" >>"$OUT/ember.txt"
        "${peer[@]}" /usr/bin/python3 bench/torch_bench.py "$c" >>"$OUT/torch.txt"
    done
done
BENCH_CMD="bench/run.sh $*" /usr/bin/python3 bench/report.py "$OUT" "${RECORD[@]}"
