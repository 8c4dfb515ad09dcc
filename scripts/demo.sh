#!/usr/bin/env bash
# The README's main job: installs what it needs, builds Ember and runs the example program.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target example_tour
./build/example_tour
