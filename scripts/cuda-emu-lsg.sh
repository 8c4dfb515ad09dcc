#!/usr/bin/env bash
# Runs cross entropy's kernels (kernels/reduce_lsg.cu: lsg_rows, log_softmax gathered at an index
# and its gradient, a warp or a block per row; em_rd_lsg, any dtype and layout; the long-row
# softmax em_softmax_long_f32, which shares their row statistics) on the CPU through
# scripts/cuda_emu/lsg_emu.cpp, which includes the kernel file with emu_block.h's emulation of
# CUDA's built-ins, against f64 references: a check of the kernels without a GPU (ctest
# cuda.lsg_emu where g++ is found). Needs g++ with C++20.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-lsg-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O1 -pthread -w -o "$out/lsg_emu" scripts/cuda_emu/lsg_emu.cpp
"$out/lsg_emu"
