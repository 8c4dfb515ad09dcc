#!/usr/bin/env bash
# Runs cross entropy's row kernels (lsg_rows in kernels/reduce.cu: log_softmax gathered at an
# index and its gradient, a warp or a block per row) on the CPU through
# scripts/cuda_emu/lsg_emu.cpp, against f64 references: a check of the kernels without a GPU
# (ctest cuda.lsg_emu where g++ and python3 are found). Needs g++ with C++20 and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-lsg-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
python3 - "$out/lsg_emu_kernels.inc" <<'PY'
import sys
s = open("src/backend/cuda/kernels/reduce.cu").read()
i = s.index("__device__ __forceinline__ void lsg_add(")
j = s.index('extern "C"', s.index("void lsg_rows("))
open(sys.argv[1], "w").write(s[i:j])
PY
g++ -std=c++20 -O1 -pthread -w -I"$out" -o "$out/lsg_emu" scripts/cuda_emu/lsg_emu.cpp
"$out/lsg_emu"
