"""Merges the outputs of bench/run.sh's programs into one table: case, Ember median, spread,
peer median, spread, ratio peer/Ember (> 1: Ember is faster), and Ember's share of the machine's
FMA peak (compute-bound cases) or copy bandwidth (memory-bound cases, bytes read + written once).
The programs' outputs hold one block per round ("round N" lines); a case run in several rounds
gets the median of its rounds' medians, the extremes of their spreads, and the median of the
rounds' ratios (each round's peer and Ember ran one after the other), with their range.
Usage: report.py DIR [--record LABEL] (appends the table to bench/RESULTS.md with LABEL)."""
import datetime
import os
import subprocess
import sys


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def read(path):
    """meta, rows: rows[case] = {round: {med, lo, hi, q1, q3, n}}."""
    meta, rows = {}, {}
    if not os.path.exists(path):
        return meta, rows
    rnd = 1
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 7:
            rows.setdefault(f[0], {})[rnd] = dict(med=float(f[1]), lo=float(f[2]), hi=float(f[3]),
                                                  q1=float(f[4]), q3=float(f[5]), n=int(f[6]))
        elif len(f) == 2 and f[0] == "round":
            rnd = int(f[1])
        elif len(f) == 2 and f[0].endswith("_check"):
            meta.setdefault(f[0], []).append(f[1])
        elif len(f) == 2:
            meta[f[0]] = f[1]
    return meta, rows


def merged(r):
    """One case's rounds as one row: medians of the medians, extremes of the spreads."""
    if not r:
        return None
    v = list(r.values())
    return dict(med=median([x["med"] for x in v]), lo=min(x["lo"] for x in v),
                hi=max(x["hi"] for x in v), rounds=len(v))


def ratio(p, e):
    """The median of the rounds' peer/Ember ratios and their range, over the rounds both ran."""
    rs = [p[k]["med"] / e[k]["med"] for k in sorted(set(p) & set(e))]
    if not rs:
        return "-"
    if len(rs) == 1:
        return f"{rs[0]:.2f}"
    return f"{median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f})"


d = sys.argv[1]
machine, _ = read(os.path.join(d, "machine.txt"))
emeta, ember = read(os.path.join(d, "ember.txt"))
tmeta, torch = read(os.path.join(d, "torch.txt"))
ometa, oblas = read(os.path.join(d, "openblas.txt"))
peak = float(machine.get("peak_fma_2t", "nan"))
bw = float(machine.get("bw_copy", "nan"))

F = 4  # bytes per f32
work = {  # case: ("flop", count) or ("byte", count)
    "matmul_256": ("flop", 2 * 256**3), "matmul_1024": ("flop", 2 * 1024**3),
    "matmul_2048": ("flop", 2 * 2048**3), "matmul_4096": ("flop", 2 * 4096**3),
    "bf16_matmul_1024": ("flop", 2 * 1024**3), "strided_matmul_1024": ("flop", 2 * 1024**3),
    "gemv_n": ("byte", F * 4096 * 4096), "gemv_t": ("byte", F * 4096 * 4096),
    "conv_3x3": ("flop", 2 * 16 * 64 * 56 * 56 * 64 * 9),
    "conv_7x7s2": ("flop", 2 * 16 * 64 * 112 * 112 * 3 * 49),
    # the forward and the gradients of x and w (a product of the forward's size each) and bias
    "conv_fwbw_7x7s2": ("flop", 3 * 2 * 16 * 64 * 112 * 112 * 3 * 49),
    # max pooling without indices (both programs ask for values only): the input read once and
    # the output written once; k5 s2 p2 d2's windows touch only the even rows and columns, a
    # quarter of the input, but the whole input is counted, as for every case
    "maxpool_k3s1": ("byte", F * 2 * (2 * 128 * 512 * 512)),
    "maxpool_k5s2d2_cl": ("byte", F * (2 * 128 * 512 * 512 + 2 * 128 * 256 * 256)),
    "softmax": ("byte", F * 2 * 64 * 1024 * 1024),
    # softmax forward (x read, y written) and backward (y and g read, the gradient written); cross
    # entropy the same with the log-softmax, its gradient scattered into zeros (one more write)
    "fwbw_softmax": ("byte", F * 5 * 4096 * 1024), "fwbw_xent": ("byte", F * 6 * 4096 * 1000), "layer_norm": ("byte", F * 2 * 4096 * 4096),
    "gelu": ("byte", F * 2 * (64 << 20)), "sum": ("byte", F * (64 << 20)),
    "topk_k1_dim0": ("byte", F * 16 * 1024 * 1024), "topk_k10_last": ("byte", F * 16 * 1024 * 1024),
}

order = ["matmul_256", "matmul_1024", "matmul_2048", "matmul_4096", "bf16_matmul_1024",
         "strided_matmul_1024", "gemv_n", "gemv_t", "conv_3x3",
         "conv_7x7s2", "conv_fwbw_7x7s2", "maxpool_k3s1", "maxpool_k5s2d2_cl", "softmax", "fwbw_softmax", "fwbw_xent", "layer_norm", "gelu", "sum",
         "topk_k1_dim0", "topk_k10_last", "rfft_1M", "train_mlp", "train_cnn",
         "train_lstm"]


def fmt(r):
    return f"{r['med']:.2f}" if r else "-"


def spread(r):
    return f"{r['lo']:.2f}-{r['hi']:.2f}" if r else "-"


lines = ["| case | peer | Ember ms | Ember min-max | peer ms | peer min-max | peer/Ember (rounds' range) | Ember % peak or bw |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]
nrounds = max([len(r) for r in list(ember.values()) + list(torch.values())] or [0])
for c in order:
    er = ember.get(c, {})
    e = merged(er)
    peers = [("torch", torch.get(c, {}))]
    if c.startswith("matmul") or c.startswith("gemv"):
        peers.insert(0, ("openblas", oblas.get(c, {})))
    for pname, pr in peers:
        p = merged(pr)
        if not e and not p:
            continue
        rat = ratio(pr, er)
        eff = ""
        if e and c in work:
            kind, n = work[c]
            if kind == "flop":
                eff = f"{n / (e['med'] * 1e-3) / 1e9:.1f} GF/s = {100 * n / (e['med'] * 1e-3) / 1e9 / peak:.0f}% peak"
            else:
                eff = f"{n / (e['med'] * 1e-3) / 1e9:.1f} GB/s = {100 * n / (e['med'] * 1e-3) / 1e9 / bw:.0f}% bw"
        lines.append(f"| {c} | {pname} | {fmt(e)} | {spread(e)} | {fmt(p)} | {spread(p)} | {rat} | {eff} |")

head = [
    f"machine: {machine.get('cpu', '?')}; ISA {machine.get('isa', '?')}; FMA peak {machine.get('peak_fma_1t')} GFLOP/s (1 thread), "
    f"{machine.get('peak_fma_2t')} (2 threads); copy {machine.get('bw_copy')} GB/s, triad {machine.get('bw_triad')} GB/s (2 threads)",
    f"load before the run: {machine.get('load', '?')}; threads: Ember {emeta.get('ember_threads')}, torch {tmeta.get('torch_threads')} "
    f"({tmeta.get('torch_version')}), OpenBLAS 2 (core {ometa.get('openblas_core')}; {ometa.get('openblas_config')})",
    f"rounds: {nrounds} (the programs take turns case by case; ms: median of the rounds' medians)",
    f"OpenBLAS env: OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} "
    f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')} in the shell, both unset for the peers; "
    f"Ember cache: {emeta.get('ember_cache', '?')}",
]
checks = ometa.get("openblas_check", [])
if checks:
    bad = [c for c in checks if " ok " not in c]
    head.append(f"OpenBLAS results checked against f64 sums: {len(checks) - len(bad)} of {len(checks)} ok"
                + (" (" + "; ".join(bad) + ")" if bad else ""))
table = "\n".join(head + [""] + lines)
print(table)
if "--record" in sys.argv:
    label = sys.argv[sys.argv.index("--record") + 1]
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
    with open(path, "a") as f:
        f.write(f"\n## {label}\n\n{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}, commit {rev} (+ working tree), "
                f"command `{os.environ.get('BENCH_CMD', 'bench/run.sh')}`; medians in ms\n\n{table}\n")
