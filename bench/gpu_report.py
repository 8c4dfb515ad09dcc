"""Joins bench/gpu_bench.c's and bench/gpu_torch.py's lines into one table: medians (ms), the
ratio torch/Ember (> 1: Ember faster) and the rate each case reaches (TFLOP/s for matmul, TB/s
of bytes read + written for memory-bound cases, us per op for tiny_add).
Usage: gpu_report.py EMBER TORCH [EMBER TORCH ...]: one pair of outputs per round (the two
programs ran one after the other, round after round). With several rounds, each side's ms is
the median of its rounds' medians and the ratio the median of the rounds' ratios, with their
range."""
import sys


NOTES = {}


def read(path):
    d = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 7:
            d[f[0]] = [float(x) for x in f[1:6]]
        elif len(f) == 3 and f[0] == "note":
            NOTES[f[1]] = f[2]
    return d


def inner(case):
    """Ops per timed repetition in both programs (small cases repeat the op)."""
    if case == "tiny_add":
        return 1000
    if case in ("layer_norm", "gemv_n_4096", "gemv_t_4096") or case.startswith("sgemm_") or (case.startswith("matmul_") and int(case.rsplit("_", 1)[1]) <= 2048):
        return 10
    return 1


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


args = sys.argv[1:]
if len(args) < 2 or len(args) % 2:
    sys.exit("usage: gpu_report.py EMBER TORCH [EMBER TORCH ...]")
rounds = [(read(args[i]), read(args[i + 1])) for i in range(0, len(args), 2)]
for pair in rounds:
    for d in pair:
        for case in d:
            d[case] = [v / inner(case) for v in d[case]]


def side(k, case):
    """The case's median over the rounds that have it (ms per op), or None."""
    v = [r[k][case][0] for r in rounds if case in r[k]]
    return median(v) if v else None


def ratio(case):
    rs = [r[1][case][0] / r[0][case][0] for r in rounds if case in r[0] and case in r[1]]
    if not rs:
        return "-"
    if len(rs) == 1:
        return f"{rs[0]:.2f}"
    return f"{median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f})"
BYTES = {"copy_256m": 8 << 28, "add_256m": 12 << 28, "add_bcast_col": 8 << 27, "add_bcast_row": 8 << 27, "sum_cols": 4 << 27, "sum_rows": 4 << 27, "neg_256m": 8 << 28, "sum_256m": 4 << 28,
         "softmax": 8 << 26, "fwbw_softmax": 20 << 26, "fwbw_xent": 6 << 27, "layer_norm": 8 << 24, "fwbw_layer_norm": 20 << 24, "maxpool_k3s1": 8 << 26, "topk_k10_last": 4 << 24,
         "gemv_n_4096": 4 << 24, "gemv_t_4096": 4 << 24, "h2d_64m": 4 << 26, "h2d_pinned_64m": 4 << 26,
         "d2h_64m": 4 << 26, "d2h_pinned_64m": 4 << 26}


def rate(case, ms):
    if ms is None:
        return ""
    if case.startswith("matmul_"):
        n = int(case.rsplit("_", 1)[1])
        return f"{2 * n ** 3 / (ms * 1e-3) / 1e12:.1f} TFLOP/s"
    if case.startswith("sgemm_"):  # sgemm_MxNxK[_t]
        m, n, k = (int(v) for v in case.split("_")[1].split("x"))
        return f"{2 * m * n * k / (ms * 1e-3) / 1e12:.1f} TFLOP/s"
    if case in BYTES:
        rate = BYTES[case] / (ms * 1e-3)
        return f"{rate / 1e12:.2f} TB/s" if rate >= 1e11 else f"{rate / 1e9:.1f} GB/s"  # host copies
    if case.startswith("conv_"):  # 3x3: 2 N C^2 H W 9 flops (conv_<dtype>_<C>[_path])
        ch = int(case.split("_")[2])
        n, hw = {64: (16, 56), 128: (16, 56), 256: (32, 28), 512: (32, 14)}[ch]
        return f"{2 * n * ch * ch * hw * hw * 9 / (ms * 1e-3) / 1e12:.1f} TFLOP/s"
    if case == "tiny_add":
        return f"{ms * 1e3:.1f} us/op"
    if case == "graph_add_1000":  # a rep is 1000 ops: ms per rep = us per op
        return f"{ms:.2f} us/op"
    if case.startswith("sdpa_fwbw_"):  # forward 4 B H S^2 D flops, backward 10 (FlashAttention-2's count)
        flops = 14 * 2 * 16 * 8192 ** 2 * 128 / (2 if case.endswith("causal") else 1)
        return f"{flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s"
    if case.startswith("sdpa_"):  # B=2 H=16 S=8192 D=128: 4 B H S^2 D flops, half when causal
        flops = 4 * 2 * 16 * 8192 ** 2 * 128 / (2 if case.endswith("causal") else 1)
        return f"{flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s"
    return ""


if len(rounds) > 1:
    print(f"{len(rounds)} rounds; ms: median of the rounds' medians; ratio: median of the rounds' "
          "ratios (range)\n")
print("| case | Ember ms/op | torch ms/op | torch/Ember | Ember rate | torch rate |")
print("|---|---:|---:|---:|---:|---:|")
names = [c for r in rounds for d in r for c in d]
for case in dict.fromkeys(names):
    e, t = side(0, case), side(1, case)
    es = f"{e:.4f}" if e is not None else ("(reference)" if case == "copy_256m" else "not native")
    ts = f"{t:.4f}" if t is not None else "-"
    print(f"| {case} | {es} | {ts} | {ratio(case)} | {rate(case, e)} | {rate(case, t)} |")
for case, note in NOTES.items():
    print(f"\n{case}: {note}")
