#!/usr/bin/env bash
# Builds, on a development machine, what scripts/gpu-check.sh runs on a GPU machine whose image
# lacks the build's libraries: the CUDA test, the conformance and gradient suites, the
# Fashion-MNIST example and the GPU benchmark, with the shared libraries they load and the
# Fashion-MNIST files, into gpu-prebuilt/ (git-ignored; carry it to the GPU machine). Where
# NVRTC is installed, the kernels compiled for the H200 (sm_90a, `ember cuda-cache`) go into
# gpu-prebuilt/kcache.tgz, which gpu-check.sh seeds its kernel cache with (skip: NO_KCACHE=1).
set -euo pipefail
cd "$(dirname "$0")/.."
P=gpu-prebuilt
rm -rf "$P"
mkdir -p "$P/lib" "$P/data"
cmake -S . -B build-gpu-pre -DCMAKE_BUILD_TYPE=Release >/dev/null
CPU_TESTS="cpu_test_gemm cpu_test_fast_paths cpu_test_pool_fast cpu_test_conv_fast cpu_test_conv_wgrad
cpu_test_cache"
# every tests/cuda/test_cuda*.c program, and the suites that take EMBER_TEST_DEVICE
CUDA_TESTS=$(for f in tests/cuda/test_cuda*.c; do basename "$f" .c | sed 's/^/cuda_/'; done)
cmake --build build-gpu-pre -j 2 --target $CUDA_TESTS ops_conformance autodiff_gradcheck \
    optim_test_optim fashion_mnist example_graphs ember_cli gpu_bench $CPU_TESTS >/dev/null
for t in $CUDA_TESTS ops_conformance autodiff_gradcheck optim_test_optim; do
    cp "build-gpu-pre/tests/$t" "$P/"
done
cp build-gpu-pre/fashion_mnist build-gpu-pre/example_graphs build-gpu-pre/ember "$P/"
# the CPU fast-path tests too: the GPU machine's processor may have ISA extensions (AVX-512)
# that the development machine lacks
mkdir -p "$P/cpu"
for t in $CPU_TESTS; do cp "build-gpu-pre/tests/$t" "$P/cpu/"; done
cp build-gpu-pre/gpu_bench "$P/"
for b in "$P"/cuda_test_cuda "$P"/fashion_mnist "$P"/gpu_bench "$P"/ops_conformance "$P"/ember; do
    ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
    xargs -r -I{} cp -L {} "$P/lib/"
cp /usr/share/datasets/fashion-mnist/*.gz "$P/data/"
if [ -z "${NO_KCACHE:-}" ]; then
    if build-gpu-pre/ember cuda-cache sm_90a "$P/kcache"; then
        tar czf "$P/kcache.tgz" -C "$P/kcache" . && rm -rf "$P/kcache"
    else
        echo "no kernel cache (NVRTC missing?)" >&2
    fi
fi
du -sh "$P"
