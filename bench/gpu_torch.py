"""PyTorch peer of bench/gpu_bench.c on cuda:0: the same cases, timed the same way (host clock
around the work and torch.cuda.synchronize), one line per case ("case median min max q1 q3 reps",
ms), plus PyTorch-only cases (tf32 matmul, device copy, layer_norm, max_pool2d, topk) for the
table's reference column."""
import sys

import bench_timing
import torch
import torch.nn.functional as F

ARGS = sys.argv[1:]
dev = "cuda:0"
torch.manual_seed(0)


def selected(name):
    return not ARGS or any(name.startswith(a) for a in ARGS)


def run(name, fn, inner=1, reps=21, budget=2.0):
    def rep():
        for _ in range(inner):
            fn()
    bench_timing.run(name, rep, 2, reps, budget, sync=torch.cuda.synchronize)


print(f"torch_version\t{torch.__version__}")
print(f"gpu\t{torch.cuda.get_device_name(0)}")
with torch.no_grad():
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16), ("f16", torch.float16), ("tf32", torch.float32)):
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        for n in (1024, 2048, 4096, 8192):
            case = f"matmul_{name}_{n}"
            if selected(case):
                a = torch.randn(n, n, device=dev, dtype=dt)
                b = torch.randn(n, n, device=dev, dtype=dt)
                run(case, lambda: a @ b, inner=10 if n <= 2048 else 1)
                del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    big = 1 << 28
    a = torch.randn(big, device=dev)
    b = torch.randn(big, device=dev)
    if selected("copy_256m"):
        o = torch.empty_like(a)
        run("copy_256m", lambda: o.copy_(a))
        del o
    if selected("add_256m"):
        run("add_256m", lambda: a + b)
    if selected("neg_256m"):
        run("neg_256m", lambda: -a)
    if selected("sum_256m"):
        run("sum_256m", lambda: a.sum())
    del a, b
    if selected("softmax"):
        x = torch.randn(64, 1024, 1024, device=dev)
        run("softmax", lambda: torch.softmax(x, -1))
        del x
    if selected("layer_norm"):
        x = torch.randn(4096, 4096, device=dev)
        run("layer_norm", lambda: F.layer_norm(x, (4096,)), inner=10)
    if selected("maxpool_k3s1"):
        x = torch.randn(2, 128, 512, 512, device=dev)
        run("maxpool_k3s1", lambda: F.max_pool2d(x, 3, 1, 1))
        del x
    if selected("topk_k10_last"):
        x = torch.randn(16, 1024, 1024, device=dev)
        run("topk_k10_last", lambda: torch.topk(x, 10, -1))
        del x
    if selected("tiny_add"):
        a = torch.randn(1, device=dev)
        b = torch.randn(1, device=dev)
        run("tiny_add", lambda: a + b, inner=1000, reps=11)
