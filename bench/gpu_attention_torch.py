"""PyTorch peer of bench/gpu_attention.c: F.scaled_dot_product_attention on cuda:0 for the same
q, k, v [B, H, S, D] (default 2 16 8192 128 bf16), non-causal and causal, timed the same way (21
reps after 2 warm-ups, host clock and torch.cuda.synchronize), printing the median and TFLOP/s.
    python3 bench/gpu_attention_torch.py [B H S D [bf16|f16]]"""
import sys
import time

import torch
import torch.nn.functional as F

a = sys.argv[1:]
B, H, S, D = (int(x) for x in a[:4]) if len(a) >= 4 else (2, 16, 8192, 128)
dt = torch.float16 if len(a) >= 5 and a[4] == "f16" else torch.bfloat16
q, k, v = (torch.randn(B, H, S, D, device="cuda:0", dtype=dt) for _ in range(3))
with torch.no_grad():
    for causal in (False, True):
        for _ in range(2):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        t = []
        for _ in range(21):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            t.append((time.perf_counter() - t0) * 1e3)
        t.sort()
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        name = f"torch_sdpa_{str(dt)[6:]}_b{B}_h{H}_s{S}_d{D}{'_causal' if causal else ''}"
        print(f"{name}\t{t[10]:.4f}\t{t[0]:.4f}\t{t[20]:.4f}\t{t[5]:.4f}\t{t[15]:.4f}\t21\t"
              f"{flops / (t[10] * 1e-3) / 1e12:.1f} TFLOP/s", flush=True)
