#!/usr/bin/env bash
# Runs cross entropy's kernels (lsg_rows in kernels/reduce.cu: log_softmax gathered at an index
# and its gradient, a warp or a block per row; em_rd_lsg, any dtype and layout; the long-row
# softmax em_softmax_long_f32, which shares their row statistics) on the CPU through
# scripts/cuda_emu/lsg_emu.cpp, against f64 references: a check of the kernels without a GPU
# (ctest cuda.lsg_emu where g++ and python3 are found). Needs g++ with C++20 and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-lsg-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
python3 - "$out/lsg_emu_kernels.inc" <<'PY'
import sys
s = open("src/backend/cuda/kernels/reduce.cu").read()
def cut(a, b):  # from the text a up to the text b after it
    i = s.index(a)
    return s[i:s.index(b, i)]
src = cut("#define RD_F64", "// ---- mask reductions")        # element access by dtype
src += cut("struct rdline {", "// op: 0 cumsum")              # lines along one dim
src += cut("__device__ __forceinline__ double rd_bsum(", "// cpu_reduce.c's softmax_line")
src += cut("// Any dtype and strides, one block of 256 threads per line (rdline: xs / sx walk x",
           "// Online max / sum")                               # em_rd_lsg
i = s.index("__device__ __forceinline__ void lsg_add(")
j = s.index('extern "C"', s.index("void lsg_rows("))
k = s.index("// Softmax / log-softmax of contiguous f32 rows longer")
open(sys.argv[1], "w").write(src + s[i:j] + s[k:])
PY
g++ -std=c++20 -O1 -pthread -w -I"$out" -o "$out/lsg_emu" scripts/cuda_emu/lsg_emu.cpp
"$out/lsg_emu"
