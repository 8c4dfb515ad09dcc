#!/usr/bin/env bash
# Runs the exact f32 matmul kernels (kernels/matmul_sgemm.cu: em_mm_sgemm, em_mm_sgemm_v4_* on both
# tile sizes, through scripts/cuda_emu/sgemm_emu.cpp; kernels/matmul_sgt.cu: the copy-engine
# em_mm_sgt_* and em_conv_sgt_f32_i2c with matmul_tw.cuh's tile walk, through
# scripts/cuda_emu/sgt_emu.cpp, which emulates matmul_tma.cuh's PTX) on the CPU against f64 sums:
# the emulators include the kernel files, a check of the kernels' index arithmetic without a GPU
# (ctest cuda.sgemm_emu where g++ is found). Needs g++ with C++20; about 30 s on 2 cores (11.9
# million checks, 256 threads per block).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-sgemm-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O1 -pthread -w -o "$out/sgemm_emu" scripts/cuda_emu/sgemm_emu.cpp
g++ -std=c++20 -O1 -pthread -w -o "$out/sgt_emu" scripts/cuda_emu/sgt_emu.cpp
"$out/sgemm_emu"
"$out/sgt_emu"
