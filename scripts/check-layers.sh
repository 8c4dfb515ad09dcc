#!/usr/bin/env bash
# Checks that no layer of src/ includes a header of a layer above it (docs/architecture.md,
# "Layers"). Reads every `#include "..."` of src/ (a path relative to the including file, else
# to src/) and fails, naming the file and the line, on an include that points up the order
# below. Headers outside src/ (the public include/ember/, generated files) are not layers.
#
# The order the code follows, lowest first:
#   core      errors, config, allocator, threads, RNG, dtypes
#   ir        the op table, typed parameters, the op record and the views kernels see
#   backend   the backend interface and registry, cpu/, cuda/ (kernels see ir views only)
#   fusion    (planned) lazy op streams and fused kernels, between backends and dispatch
#   tensor    handles, views, scopes, op front-ends, dispatch (calls the backends)
#   autodiff  tape and backward rules
#   nn models modules, layers, losses; ready-made architectures
#   optim     optimizers, schedulers (devices through the tensor layer)
#   data      datasets and loaders
#   store     safetensors, .pt, checkpoints
#   train     learner, metrics, dashboard
#   onnx quant dist  (planned)
# The backends sit below the tensor layer (DESIGN.md lists them above it): dispatch calls them,
# and they never call back; they see records as ir views, so they need nothing of tensor/.
# Each backend folder (src/backend/cpu/, cuda/ ...) is private: the layers above reach backends
# through src/backend/backend.h only, and one backend never includes another's headers (what
# two backends share lives in src/ir/).
# Usage: scripts/check-layers.sh (from anywhere); exit 1 on a violation.
set -euo pipefail
cd "$(dirname "$0")/.."

order=(core ir backend fusion tensor autodiff "nn models" optim data store train "onnx quant dist")
declare -A rank
for i in "${!order[@]}"; do
    for layer in ${order[$i]}; do rank[$layer]=$i; done
done

status=0
while IFS= read -r -d '' file; do
    from=${file#src/}
    from=${from%%/*}
    if [ -z "${rank[$from]+x}" ]; then
        echo "check-layers: $file: layer '$from' is not in the order (scripts/check-layers.sh)" >&2
        status=1
        continue
    fi
    n=0
    while IFS= read -r line; do
        n=$((n + 1))
        [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
        inc=${BASH_REMATCH[1]}
        target=$(realpath -m --relative-to=. "$(dirname "$file")/$inc")
        [ -e "$target" ] || target=$(realpath -m --relative-to=. "src/$inc")
        [ -e "$target" ] || continue # generated or outside the tree: not a layer
        case $target in src/*) ;; *) continue ;; esac
        to=${target#src/}
        to=${to%%/*}
        if [ -z "${rank[$to]+x}" ]; then
            echo "check-layers: $file:$n includes $target, whose layer '$to' is not in the order" >&2
            status=1
        elif [ "${rank[$to]}" -gt "${rank[$from]}" ]; then
            echo "check-layers: $file:$n: layer $from includes $target of layer $to above it" >&2
            status=1
        elif [[ $target == src/backend/*/* ]]; then
            owner=${target#src/backend/}
            owner=${owner%%/*}
            if [ "$from" != backend ]; then
                echo "check-layers: $file:$n: includes $target, private to the $owner backend" >&2
                status=1
            elif [[ $file == src/backend/*/* && $file != src/backend/$owner/* ]]; then
                echo "check-layers: $file:$n: one backend includes $target of the $owner backend" >&2
                status=1
            fi
        fi
    done <"$file"
done < <(find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.def' -o -name '*.inc' \) -print0 | sort -z)

if [ $status -eq 0 ]; then echo "check-layers: every include of src/ points down the layer order"; fi
exit $status
