#!/usr/bin/env bash
# The README's main job: installs what it needs (Debian packages, including the Fashion-MNIST
# data set), builds Ember and trains the Fashion-MNIST CNN on the CPU with the live dashboard
# (plain progress lines when the output is not a terminal), then reports the test accuracy.
# Extra arguments go to the example (e.g. --epochs 5).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target fashion_mnist
start=$(date +%s)
./build/fashion_mnist "$@"
echo "main job took $(( $(date +%s) - start )) s (training and evaluation)"
