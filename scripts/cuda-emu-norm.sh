#!/usr/bin/env bash
# Runs the layer / RMS norm gradient kernels (kernels/rows_norm.cu, NORM_BACKWARD) on the CPU
# through scripts/cuda_emu/norm_emu.cpp, which includes the kernel file with emu_block.h's
# emulation of CUDA's built-ins, against f64 references: a check of the kernels without a GPU
# (ctest cuda.norm_emu where g++ is found). Needs g++ with C++20.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-norm-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O1 -pthread -w -o "$out/norm_emu" scripts/cuda_emu/norm_emu.cpp
"$out/norm_emu"
