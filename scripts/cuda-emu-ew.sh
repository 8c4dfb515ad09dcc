#!/usr/bin/env bash
# Runs the CUDA elementwise kernels (kernels/ew.cu, kernels/ew_scalar.cu and the op table's
# generated cuda_ew_gen.cuh) on the CPU through scripts/cuda_emu/ew_emu.cpp and compares every
# elementwise kind of src/ir/ops.def with the CPU backend's generated kernels: a check of the
# generated CUDA code without a GPU (ctest cuda.ew_emu where g++ is found). Generates into a
# temporary folder with its own build of tools/opgen.c, so it needs no build tree.
set -euo pipefail
cd "$(dirname "$0")/.."
cc=${CC:-cc}
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-ew-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/gen/include/ember"
$cc -std=c11 -O1 -Iinclude -Isrc -DEMBER_OPGEN -o "$out/opgen" tools/opgen.c
"$out/opgen" --gen "$out/gen"
inc="-Iinclude -Isrc -I$out/gen -I$out/gen/include -Itests -Iscripts/cuda_emu"
$cc -std=c11 -O2 -fwrapv $inc -c -o "$out/cpu_ew_gen.o" "$out/gen/cpu_ew_gen.c"
$cc -std=c11 -O2 $inc -c -o "$out/ew_emu_ref.o" scripts/cuda_emu/ew_emu_ref.c
g++ -std=c++17 -O2 -fwrapv -w -Isrc/backend/cuda/kernels -Isrc/ir -I"$out/gen" -Iscripts/cuda_emu \
    -o "$out/ew_emu" scripts/cuda_emu/ew_emu.cpp "$out/cpu_ew_gen.o" "$out/ew_emu_ref.o" -lm
"$out/ew_emu"
