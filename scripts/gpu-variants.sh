#!/usr/bin/env bash
# Compares configuration variants of Ember's GPU kernels on a GPU machine, side by side with
# PyTorch: for ROUNDS rounds (default 3), bench/gpu_bench.c's cases under the default
# configuration, then under each variant of VARS, then bench/gpu_torch.py, so a slow minute lands
# on every column; prints each column's median of the rounds' medians (with the rounds' range)
# and torch/column (> 1: Ember faster). With TEST=program (a test in the binaries' directory,
# e.g. cuda_test_cuda_attention), that test first runs under the default and under each variant.
# With NCU=regex and ncu installed, Nsight Compute then times the kernels whose names match
# (duration, registers, tensor-pipe use, issue stalls) in the first case under each variant.
# Binaries: gpu-prebuilt/ (scripts/gpu-prebuild.sh) where present, else build-gpu/ as
# scripts/gpu-check.sh builds it. Output: the table on stdout, logs under $OUT (or
# gpu-variants-logs/).
# Usage: VARS="EMBER_CUDA_CONV_KERNEL=mma EMBER_CUDA_CONV_KERNEL=sgt_im2col" TEST=cuda_test_cuda_nn \
#            NCU=em_conv scripts/gpu-variants.sh conv_f32
set -u
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: VARS='NAME=VALUE ...' $0 case-prefix ..." >&2; exit 2; }
B=gpu-prebuilt
if [ -d $B ]; then
    export LD_LIBRARY_PATH=$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
    B=build-gpu
fi
[ -x $B/gpu_bench ] || { echo "no $B/gpu_bench: run scripts/gpu-prebuild.sh or scripts/gpu-check.sh" >&2; exit 2; }
L=${OUT:-gpu-variants-logs}/logs
mkdir -p "$L"
CACHE=$(mktemp -d /tmp/ember-cache.XXXXXX)
export EMBER_CACHE_DIR=$CACHE
[ -f $B/kcache.tgz ] && tar xzf $B/kcache.tgz -C "$CACHE"
nvrtc=$(ldconfig -p 2>/dev/null | grep -o '/[^ ]*libnvrtc.so[.0-9]*$' | head -1)
[ -z "$nvrtc" ] && nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)
[ -n "$nvrtc" ] && export EMBER_CUDA_NVRTC=$nvrtc
VARIANTS=(default ${VARS:-})
envof() { [ "$1" = default ] && echo "EMBER_VARIANT=default" || echo "$1"; }
key() { echo "${1//[^A-Za-z0-9_]/_}"; } # a file name for a variant

if [ -n "${TEST:-}" ]; then
    for v in "${VARIANTS[@]}"; do
        t0=$(date +%s)
        env "$(envof "$v")" timeout "${LIMIT:-300}" "$B/$TEST" >"$L/test_$(key "$v").log" 2>&1
        rc=$?
        echo "$TEST [$v]: exit $rc, $(grep -E '^[0-9]+ passed' "$L/test_$(key "$v").log" | tail -1), $(($(date +%s) - t0)) s"
        grep -m 5 FAIL "$L/test_$(key "$v").log"
    done
fi

for r in $(seq "${ROUNDS:-3}"); do
    for v in "${VARIANTS[@]}"; do
        env "$(envof "$v")" EMBER_CPU_FALLBACK=1 $B/gpu_bench "$@" >"$L/bench_${r}_$(key "$v").txt" 2>"$L/bench_${r}_$(key "$v").err"
    done
    python3 bench/gpu_torch.py "$@" >"$L/bench_${r}_torch.txt" 2>"$L/bench_${r}_torch.err"
done

python3 - "$L" "${ROUNDS:-3}" "${VARIANTS[@]}" torch <<'PY'
import re, statistics, sys
L, rounds, cols = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
ms = {}  # case -> column -> [per-round median ms]
for r in range(1, rounds + 1):
    for c in cols:
        try:
            lines = open(f"{L}/bench_{r}_{re.sub('[^A-Za-z0-9_]', '_', c)}.txt").read().splitlines()
        except OSError:
            continue
        for line in lines:
            f = line.split("\t")
            if len(f) == 7:
                ms.setdefault(f[0], {}).setdefault(c, []).append(float(f[1]))
print("| case | " + " | ".join(f"{c} ms" for c in cols) + " | " +
      " | ".join(f"torch/{c}" for c in cols[:-1]) + " |")
print("|---" * (2 * len(cols)) + "|")
for case in ms:
    d = ms[case]
    med = {c: statistics.median(d[c]) for c in cols if c in d}
    cells = [f"{med[c]:.3f} ({min(d[c]):.3f}-{max(d[c]):.3f})" if c in med else "-" for c in cols]
    ratios = [f"{med['torch'] / med[c]:.3f}" if c in med and "torch" in med else "-" for c in cols[:-1]]
    print(f"| {case} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
PY

if [ -n "${NCU:-}" ] && command -v ncu >/dev/null; then
    M="gpu__time_duration.sum,launch__registers_per_thread,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
    for v in "${VARIANTS[@]}"; do
        env "$(envof "$v")" timeout 200 ncu --clock-control none --metrics "$M" -k "regex:$NCU" \
            --launch-count "${NCU_LAUNCHES:-4}" $B/gpu_bench "$1" >"$L/ncu_$(key "$v").txt" 2>&1
        echo "== Nsight Compute, $1 [$v]"
        grep -E '^  [a-zA-Z_].*\(|duration|registers|hmma|issue_active|stalled' "$L/ncu_$(key "$v").txt" |
            awk '!/stalled/ || $NF + 0 >= 0.2' | head -40
    done
fi
rm -rf "$CACHE"
