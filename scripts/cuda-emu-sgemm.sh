#!/usr/bin/env bash
# Runs the exact f32 matmul kernels (em_mm_sgemm, em_mm_sgemm_v4_* on both tile sizes, and the
# copy-engine em_mm_sgt_* and em_conv_sgt_f32_i2c through scripts/cuda_emu/sgt_emu.cpp) on the CPU
# through scripts/cuda_emu/sgemm_emu.cpp, against f64 sums: a check of the kernels' index
# arithmetic without a GPU (ctest cuda.sgemm_emu where g++ and python3 are found). Needs g++ with
# C++20 and python3; about 15 s on 2 cores (6.35 million checks, 256 threads per block).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/ember-sgemm-emu.XXXXXX")
trap 'rm -rf "$out"' EXIT
python3 - "$out/sgemm_emu_kernels.inc" <<'PY'
import sys
s = open("src/backend/cuda/kernels/matmul.cu").read()
i = s.index("__device__ __forceinline__ void batch_offsets(")
a = s.index("// ---- f32: 128 x 128 block tiles")
b = s.index("// ---- f16 / bf16 for any strides")
open(sys.argv[1], "w").write(s[i:s.index("\n}\n", i) + 3] + s[a:b])
PY
# the copy-engine kernels (kernels/matmul_wgmma.cu): the tile walk (and its split-K units), the producer's loop, the
# convolution's geometry and the em_mm_sgt_* / em_conv_sgt_f32_i2c section, without the register moves (setmaxnreg) and the shared array's declaration
python3 - "$out/sgt_emu_kernels.inc" <<'PY'
import sys
s = open("src/backend/cuda/kernels/matmul_wgmma.cu").read()
def cut(name, end="\n}\n"):  # the function, from its template line if it has one
    i = s.rindex("\n", 0, s.index(name)) + 1
    if s.rfind("template <", 0, i) == s.rindex("\n", 0, i - 1) + 1:
        i = s.rindex("\n", 0, i - 1) + 1
    return s[i:s.index(end, i) + len(end)]
a = s.index("// ---- exact f32 on the copy engine")
sgt = s[a:s.index("#endif", a)]
sgt = "\n".join(l for l in sgt.split("\n") if "setmaxnreg" not in l and "extern __shared__" not in l)
m = s.index("#define TMAP_F32_KERNEL(")  # the kernels' macro, through its closing brace
macro = s[m:s.index("\n", s.index("}", m)) + 1]
open(sys.argv[1], "w").write(macro + cut("void tw_tile(") + cut("void tw_unit(") + cut("void tw_produce(") +
                             cut("struct twconv {", "\n};\n") + cut("void twc_cols(") + sgt)
PY
g++ -std=c++20 -O1 -pthread -w -I"$out" -o "$out/sgemm_emu" scripts/cuda_emu/sgemm_emu.cpp
g++ -std=c++20 -O1 -pthread -w -I"$out" -o "$out/sgt_emu" scripts/cuda_emu/sgt_emu.cpp
"$out/sgemm_emu"
"$out/sgt_emu"
