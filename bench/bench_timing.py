"""The Python peers' rep loop (bench/torch_bench.py, bench/gpu_torch.py), timed as bench_common.h
times the C side: warm-up, then up to `reps` timings (at least 3, stopping after `budget`
seconds), one tab-separated line "case median min max q1 q3 reps" in milliseconds. `sync` runs
after the work of each timing (torch.cuda.synchronize on a GPU)."""
import time


def run(name, fn, warmup, reps, budget, sync=None):
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    t = []
    start = time.perf_counter()
    while len(t) < reps:
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        t.append((time.perf_counter() - t0) * 1e3)
        if len(t) >= 3 and time.perf_counter() - start > budget:
            break
    t.sort()
    n = len(t)
    med = t[n // 2] if n % 2 else 0.5 * (t[n // 2 - 1] + t[n // 2])
    print(f"{name}\t{med:.4f}\t{t[0]:.4f}\t{t[-1]:.4f}\t{t[n // 4]:.4f}\t{t[min(3 * n // 4, n - 1)]:.4f}\t{n}",
          flush=True)
