#!/usr/bin/env bash
# Fails when a file generated from the op table (src/ir/ops.def) is stale: docs/ops.md's dtypes
# and grad cells and its list of kinds (tools/opgen.c writes them; refresh with
# `cmake --build build --target ops_docs`). Needs only a C compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${CC:-cc}" -std=c11 -O1 -DEMBER_OPGEN -Iinclude -Isrc tools/opgen.c -o "$tmp/opgen"
"$tmp/opgen" --check docs/ops.md
echo "check-generated: docs/ops.md matches src/ir/ops.def"
