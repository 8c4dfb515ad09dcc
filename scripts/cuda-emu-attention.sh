#!/usr/bin/env bash
# Runs the flash attention kernels (kernels/attention_flash2.cu forward, kernels/attention_bwd.cu
# backward) on the CPU through scripts/cuda_emu/attention_emu.cpp, which includes them with its
# emulation of attention_mma.cuh, against f64 references: a check of the kernels without a GPU
# (ctest cuda.attention_emu where g++ is found). Needs g++ with C++20; about 30 s on 2 cores (one
# thread per CUDA thread).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-attention-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O2 -pthread -w -o "$out/attention_emu" scripts/cuda_emu/attention_emu.cpp
"$out/attention_emu"
