#!/usr/bin/env bash
# Runs the flash attention kernels (forward variant 2 and the backward) on the CPU through
# scripts/cuda_emu/attention_emu.cpp, against f64 references: a check of the kernels without a
# GPU (ctest cuda.attention_emu where g++ and python3 are found). Needs g++ with C++20 and
# python3; about 30 s on 2 cores (one thread per CUDA thread).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-attention-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
python3 - "$out/attention_emu_kernels.inc" <<'PY'
import sys
k = "src/backend/cuda/kernels/"
a = open(k + "attention.cu").read()
i = a.index("struct attn_flash_arg {")
src = "#define ATTN_BM 128\n#define ATTN_BN 64\n" + a[i:a.index("};", i) + 2] + "\n"
j = a.index("__device__ __forceinline__ void attn_store_lse")
src += a[j:a.index("\n}\n", j) + 3] + "\n"
for name, cut, smem in (("attention_flash2.cu", "#define ATTN_FLASH2(NAME", "attn_f2sm"),
                        ("attention_bwd.cu", "#define ATTN_BWD(NAME", "attn_bsm")):
    s = open(k + name).read()
    s = s[:s.index(cut)]
    s = s.replace(f"extern __shared__ __align__(16) unsigned short {smem}[];",
                  f"unsigned short *{smem} = (unsigned short *)g_smem;")
    src += "\n".join(l for l in s.split("\n") if 'asm volatile("cp.async' not in l) + "\n"
open(sys.argv[1], "w").write(src)
PY
g++ -std=c++20 -O2 -pthread -w -I"$out" -o "$out/attention_emu" scripts/cuda_emu/attention_emu.cpp
"$out/attention_emu"
