#!/usr/bin/env bash
# Ember vs PyTorch on one epoch of Fashion-MNIST with the same CNN, batch size and optimizer:
# runs examples/fashion_mnist (build/fashion_mnist --epochs 1) and bench/fashion_mnist_torch.py
# (Debian's PyTorch, 2 threads) one after the other in this run, then prints the training seconds
# per epoch of each, their ratio (PyTorch / Ember: above 1 means Ember is faster) and each test
# accuracy on the 10,000 test images.
#
# Usage: bench/fashion_mnist.sh [--limit N] [--data DIR]
#   --limit N  train on the first N training images only (a smoke test; accuracy will be lower)
# The full run trains on 60,000 images twice (a few minutes on 2 cores): the machine may be
# shared, so prefer --limit while checking that the script works.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIMIT=0
DATA=${EMBER_DATA_FASHION:-/usr/share/datasets/fashion-mnist}
while [ $# -gt 0 ]; do
    case "$1" in
    --limit) LIMIT=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    *) echo "usage: bench/fashion_mnist.sh [--limit N] [--data DIR]" >&2; exit 2 ;;
    esac
done
if [ ! -f "$DATA/train-images-idx3-ubyte.gz" ]; then
    scripts/fetch-data.sh fashion-mnist >&2
fi
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "installing python3-torch" >&2
    apt-get install -y -qq python3-torch >/dev/null
fi
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j 2 --target fashion_mnist >/dev/null

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOAD_BEFORE=$(uptime | sed 's/.*load average: //')
export EMBER_NUM_THREADS=2 EMBER_DASHBOARD=0

echo "== Ember: build/fashion_mnist --epochs 1 --limit $LIMIT" >&2
(cd "$WORK" && "$ROOT/$BUILD/fashion_mnist" --epochs 1 --limit "$LIMIT" --data "$DATA") \
    >"$WORK/ember.log" 2>&1 || { cat "$WORK/ember.log" >&2; exit 1; }
grep -E "done:|test accuracy" "$WORK/ember.log" >&2

echo "== PyTorch: bench/fashion_mnist_torch.py --epochs 1 --limit $LIMIT" >&2
/usr/bin/python3 bench/fashion_mnist_torch.py --epochs 1 --limit "$LIMIT" --data "$DATA" \
    >"$WORK/torch.log" 2>&1 || { cat "$WORK/torch.log" >&2; exit 1; }
grep -E "^(torch|epoch)" "$WORK/torch.log" >&2
LOAD_AFTER=$(uptime | sed 's/.*load average: //')

/usr/bin/python3 - "$WORK/runs/fashion_mnist/epochs.jsonl" "$WORK/torch.log" "$LIMIT" \
    "$LOAD_BEFORE" "$LOAD_AFTER" <<'EOF'
import json, sys
epochs, torch_log, limit, load0, load1 = sys.argv[1:]
rec = [json.loads(l) for l in open(epochs) if l.strip()][-1]
items = int(limit) if int(limit) > 0 else 60000
e_train = items / rec["items_per_sec"]          # training part of the epoch
e_total = rec["time_s"]                          # training + evaluation of the 10,000 test images
e_acc = rec["val_accuracy"]
line = [l for l in open(torch_log) if l.startswith("result\t")][-1].split("\t")
t_train, t_eval, t_acc = float(line[1]), float(line[2]), float(line[3])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"Fashion-MNIST CNN, 1 epoch on {items} training images, batch 128, Adam; 2 threads")
print(f"cpu: {cpu}; load average before: {load0}, after: {load1}")
print(f"{'':10s}{'train s/epoch':>15s}{'train+eval s':>14s}{'images/s':>10s}{'test accuracy':>15s}")
print(f"{'Ember':10s}{e_train:15.2f}{e_total:14.2f}{items / e_train:10.0f}{100 * e_acc:14.2f}%")
print(f"{'PyTorch':10s}{t_train:15.2f}{t_train + t_eval:14.2f}{items / t_train:10.0f}{100 * t_acc:14.2f}%")
print(f"ratio PyTorch/Ember (train seconds per epoch): {t_train / e_train:.2f} "
      f"({'Ember faster' if t_train > e_train else 'PyTorch faster'})")
EOF
