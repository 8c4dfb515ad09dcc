#!/usr/bin/env bash
# Runs the layer / RMS norm gradient kernels (the NORM_BACKWARD part of kernels/rows.cu) on the
# CPU through scripts/cuda_emu/norm_emu.cpp, against f64 references: a check of the kernels
# without a GPU (ctest cuda.norm_emu where g++ and python3 are found). Needs g++ with C++20 and
# python3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-norm-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
python3 - "$out/norm_emu_kernels.inc" <<'PY'
import sys
s = open("src/backend/cuda/kernels/rows.cu").read()
i = s.index("__device__ __forceinline__ double row_sum(")
j = s.index("__device__ __forceinline__ float row_max(")
k = s[s.index("// ---- NORM_BACKWARD"):]
smem = "extern __shared__ __align__(16) float norm_bw_acc[];"
assert smem in k
k = k.replace(smem, "float *norm_bw_acc = (float *)g_smem;")  # one block at a time
open(sys.argv[1], "w").write(s[i:j] + k)
PY
g++ -std=c++20 -O1 -pthread -w -I"$out" -o "$out/norm_emu" scripts/cuda_emu/norm_emu.cpp
"$out/norm_emu"
