#!/usr/bin/env bash
# docs.tutorial: runs docs/tutorial.md's program (PROGRAM, built from the page's C blocks) in a
# scratch folder and checks its test accuracy; then, where /usr/bin/python3 has PyTorch, runs
# the page's Python block (SCRIPT) on the saved model, which must predict what Ember predicted.
set -euo pipefail
prog=${1:?usage: run_tutorial.sh PROGRAM SCRIPT}
script=${2:?usage: run_tutorial.sh PROGRAM SCRIPT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$prog" | tee out.txt
acc=$(sed -n 's/^test accuracy \([0-9.]*\) %$/\1/p' out.txt)
if ! awk -v a="$acc" 'BEGIN { exit !(a != "" && a >= 90) }'; then
  echo "FAIL: test accuracy '$acc' (at least 90 % expected)"
  exit 1
fi
ember=$(grep '^predicted:' out.txt) || {
  echo "FAIL: no 'predicted:' line"
  exit 1
}
if ! /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null; then
  echo "PyTorch part skipped: /usr/bin/python3 has no torch"
  exit 0
fi
torch=$(/usr/bin/python3 "$script" | grep '^predicted:') || {
  echo "FAIL: the Python block printed no 'predicted:' line"
  exit 1
}
if [ "$torch" != "$ember" ]; then
  echo "FAIL: PyTorch $torch, Ember $ember"
  exit 1
fi
echo "PyTorch loads digits.safetensors and predicts the same: $torch"
