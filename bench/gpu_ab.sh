#!/usr/bin/env bash
# Compares two builds of bench/gpu_bench on one GPU: the programs take turns for ROUNDS rounds
# (default 3), and the table gives each side's median over the rounds' medians and the median of
# the rounds' ratios (B / A: above 1 means B is slower). Use it for a before/after check of a
# change: build gpu_bench at both commits (scripts/gpu-prebuild.sh), carry both, run this.
# Usage: bench/gpu_ab.sh A_BINARY B_BINARY [case prefixes ...]
set -u
[ $# -ge 2 ] || { echo "usage: bench/gpu_ab.sh A_BINARY B_BINARY [case prefixes ...]" >&2; exit 2; }
A=$1 B=$2
shift 2
dir=$(mktemp -d /tmp/gpu-ab.XXXXXX)
for r in $(seq "${ROUNDS:-3}"); do
    EMBER_CPU_FALLBACK=1 "$A" "$@" >"$dir/a_$r.txt" 2>"$dir/a_$r.err" || echo "A failed in round $r" >&2
    EMBER_CPU_FALLBACK=1 "$B" "$@" >"$dir/b_$r.txt" 2>"$dir/b_$r.err" || echo "B failed in round $r" >&2
done
python3 - "$dir" "${ROUNDS:-3}" <<'EOF'
import statistics as st, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def load(side, r):
    out = {}
    for line in open(f"{d}/{side}_{r}.txt"):
        f = line.split()
        if len(f) >= 2:
            try: out[f[0]] = float(f[1])
            except ValueError: pass
    return out
A = [load("a", r) for r in range(1, rounds + 1)]
B = [load("b", r) for r in range(1, rounds + 1)]
names = [n for n in A[0] if all(n in x for x in A + B)]
print(f"{rounds} rounds; ms: median of the rounds' medians; B/A: median of the rounds' ratios (range)\n")
print("| case | A ms | B ms | B/A |")
print("|---|---:|---:|---:|")
for n in names:
    ra = [a[n] for a in A]; rb = [b[n] for b in B]
    q = [y / x for x, y in zip(ra, rb) if x > 0]
    print(f"| {n} | {st.median(ra):.4f} | {st.median(rb):.4f} | "
          f"{st.median(q):.2f} ({min(q):.2f}-{max(q):.2f}) |")
only = sorted(set().union(*A, *B) - set(names))
if only: print("\nin one build only:", " ".join(only))
EOF
