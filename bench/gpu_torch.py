"""PyTorch peer of bench/gpu_bench.c on cuda:0: the same cases, timed the same way (host clock
around the work and torch.cuda.synchronize), one line per case ("case median min max q1 q3 reps",
ms), plus PyTorch-only cases (tf32 matmul, device copy, layer_norm, max_pool2d, topk) for the
table's reference column."""
import os
import sys
import time

import bench_timing
import torch
import torch.nn.functional as F

ARGS = sys.argv[1:]
# seconds the GPU idles before the warm-up of each matmul, conv and sdpa case, as in
# bench/gpu_bench.c (the GPU's power cap slows a product that follows a heavy one for a fraction of
# a second; the launch-bound cases get no pause); the host spins meanwhile
PAUSE = float(os.environ.get("EMBER_BENCH_PAUSE") or 0.5)
dev = "cuda:0"
torch.manual_seed(0)


def selected(name):
    return not ARGS or any(name.startswith(a) for a in ARGS)


def run(name, fn, inner=1, reps=21, budget=2.0):
    def rep():
        for _ in range(inner):
            fn()
    if PAUSE > 0 and name.startswith(("matmul", "conv", "sdpa")):  # after one call, as in gpu_bench.c
        rep()
        torch.cuda.synchronize()
        end = time.perf_counter() + PAUSE
        while time.perf_counter() < end:
            pass
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
    for t in (0, 1):
        case = "gemv_t_4096" if t else "gemv_n_4096"
        if selected(case):
            a = torch.randn(4096, 4096, device=dev)
            x = torch.randn(4096, device=dev)
            run(case, (lambda: x @ a) if t else (lambda: a @ x), inner=10)
            del a, x
    # short exact-f32 products, as bench/gpu_bench.c's sgemm cases
    for m, n, k, t in ((1024, 768, 256, 0), (1024, 256, 256, 0), (1024, 1024, 256, 0),
                       (1024, 256, 1024, 0), (256, 768, 1024, 1), (256, 1024, 1024, 1),
                       (1024, 8192, 256, 0), (1024, 256, 8192, 0), (8192, 256, 1024, 1),
                       (1024, 256, 4096, 0)):
        case = f"sgemm_{m}x{n}x{k}" + ("_t" if t else "")
        if selected(case):
            a = torch.randn(k, m, device=dev).t() if t else torch.randn(m, k, device=dev)
            b = torch.randn(k, n, device=dev)
            run(case, lambda: a @ b, inner=10)
            del a, b
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
    if any(selected(c) for c in ("add_bcast_col", "add_bcast_row", "sum_cols", "sum_rows")):
        a = torch.randn(16384, 8192, device=dev)
        c = torch.randn(16384, 1, device=dev)
        r = torch.randn(8192, device=dev)
        if selected("add_bcast_col"):
            run("add_bcast_col", lambda: a + c)
        if selected("add_bcast_row"):
            run("add_bcast_row", lambda: a + r)
        if selected("sum_cols"):
            run("sum_cols", lambda: a.sum(0))
        if selected("sum_rows"):
            run("sum_rows", lambda: a.sum(-1))
        del a, c, r
    if any(selected(c) for c in ("h2d_64m", "h2d_pinned_64m", "d2h_64m", "d2h_pinned_64m")):
        # 64 Mi floats, pageable and pinned host memory
        h = torch.rand(1 << 26)
        p = h.pin_memory()
        d = h.to(dev)
        if selected("h2d_64m"):
            run("h2d_64m", lambda: h.to(dev), reps=11)
        if selected("h2d_pinned_64m"):
            run("h2d_pinned_64m", lambda: p.to(dev, non_blocking=True), reps=11)
        if selected("d2h_64m"):
            run("d2h_64m", lambda: d.cpu(), reps=11)
        if selected("d2h_pinned_64m"):
            run("d2h_pinned_64m", lambda: p.copy_(d, non_blocking=True), reps=11)
        del h, p, d
    if selected("softmax"):
        x = torch.randn(64, 1024, 1024, device=dev)
        run("softmax", lambda: torch.softmax(x, -1))
        del x
    # softmax and cross entropy forward and backward, as bench/gpu_bench.c's fwbw cases
    if selected("fwbw_softmax"):
        x = torch.randn(65536, 1024, device=dev, requires_grad=True)
        gy = torch.randn(65536, 1024, device=dev)

        def smax():
            with torch.enable_grad():
                torch.autograd.grad(torch.softmax(x, -1), x, gy)
        run("fwbw_softmax", smax)
        del x, gy
    if selected("fwbw_xent"):
        x = torch.randn(4096, 8192, device=dev, requires_grad=True)
        t = torch.randint(0, 8192, (4096,), device=dev)

        def xent():
            with torch.enable_grad():
                torch.autograd.grad(F.cross_entropy(x, t), x)
        run("fwbw_xent", xent)
        del x, t
    if selected("layer_norm"):
        x = torch.randn(4096, 4096, device=dev)
        run("layer_norm", lambda: F.layer_norm(x, (4096,)), inner=10)
    if selected("fwbw_layer_norm"):
        x = torch.randn(4096, 4096, device=dev, requires_grad=True)
        w = torch.randn(4096, device=dev, requires_grad=True)
        b = torch.randn(4096, device=dev, requires_grad=True)
        gy = torch.randn(4096, 4096, device=dev)

        def lnorm():
            with torch.enable_grad():
                torch.autograd.grad(F.layer_norm(x, (4096,), w, b), (x, w, b), gy)
        run("fwbw_layer_norm", lnorm)
        del x, w, b, gy
    if selected("maxpool_k3s1"):
        x = torch.randn(2, 128, 512, 512, device=dev)
        run("maxpool_k3s1", lambda: F.max_pool2d(x, 3, 1, 1))
        del x
    # conv2d 3x3 pad 1 (cuDNN; f32 without TF32, as Ember's default)
    torch.backends.cudnn.allow_tf32 = False
    for ch, hw, n in ((64, 56, 16), (128, 56, 16), (256, 28, 32), (512, 14, 32)):
        for tn, dt in (("f32", torch.float32), ("bf16", torch.bfloat16), ("f16", torch.float16)):
            case = f"conv_{tn}_{ch}"
            if selected(case):
                x = torch.randn(n, ch, hw, hw, device=dev, dtype=dt)
                w = torch.randn(ch, ch, 3, 3, device=dev, dtype=dt)
                run(case, lambda: F.conv2d(x, w, padding=1))
                del x, w
    torch.backends.cudnn.allow_tf32 = True
    if selected("topk"):
        x = torch.randn(16, 1024, 1024, device=dev)
        if selected("topk_k1_dim0"):
            run("topk_k1_dim0", lambda: torch.topk(x, 1, 0))
        if selected("topk_k10_last"):
            run("topk_k10_last", lambda: torch.topk(x, 10, -1))
        del x
    if selected("sdpa"):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q = torch.randn(2, 16, 8192, 128, device=dev, dtype=torch.bfloat16)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            if selected("sdpa_bf16_8k"):
                run("sdpa_bf16_8k", lambda: F.scaled_dot_product_attention(q, q, q), reps=11, budget=3.0)
            if selected("sdpa_bf16_8k_causal"):
                run("sdpa_bf16_8k_causal", lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True),
                    reps=11, budget=3.0)
        del q
    if selected("sdpa_fwbw"):
        # forward and backward with a fixed output gradient (torch.autograd.grad: no .grad
        # accumulation), as bench/gpu_bench.c's sdpa_fwbw cases
        from torch.nn.attention import SDPBackend, sdpa_kernel
        shape = (2, 16, 8192, 128)
        qkv = [torch.randn(*shape, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)]
        gy = torch.randn(*shape, device=dev, dtype=torch.bfloat16)

        def fwbw(causal):
            with torch.enable_grad():
                y = F.scaled_dot_product_attention(*qkv, is_causal=causal)
                torch.autograd.grad(y, qkv, gy)

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            if selected("sdpa_fwbw_bf16_8k"):
                run("sdpa_fwbw_bf16_8k", lambda: fwbw(False), reps=11, budget=4.0)
            if selected("sdpa_fwbw_bf16_8k_causal"):
                run("sdpa_fwbw_bf16_8k_causal", lambda: fwbw(True), reps=11, budget=4.0)
        del qkv, gy
    if selected("tiny_add"):
        a = torch.randn(1, device=dev)
        b = torch.randn(1, device=dev)
        run("tiny_add", lambda: a + b, inner=1000, reps=11)
    if selected("graph_add_1000"):
        # the tiny add 1000 times in a chain, captured once (warmed up on a side stream, as
        # torch.cuda.graphs' documentation does); a rep is one replay
        a = torch.randn(1, device=dev)
        b = torch.randn(1, device=dev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                a + b
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = a
            for _ in range(1000):
                y = y + b
        run("graph_add_1000", graph.replay, reps=21)


def train_case(name, net, xshape, reps):
    net = net.to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(*xshape, device=dev)
    y = torch.randint(0, 10, (xshape[0],), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), y).backward()
        opt.step()

    run(name, step, reps=reps, budget=4.0)


nn = torch.nn
if selected("train_mlp"):
    train_case("train_mlp", nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                                          nn.ReLU(), nn.Linear(512, 10)), (128, 1, 28, 28), 41)
def graph_case(name, net, loss, reps):
    # forward, backward and a capturable Adam step of net in one graph (torch.cuda.graphs'
    # whole-network recipe: warmed up on a side stream); loss() computes the loss; a rep is one
    # replay
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss().backward()
        opt.step()
    run(name, graph.replay, reps=reps, budget=4.0)


if selected("train_mlp_graph"):
    # train_mlp's MLP with an MSE loss
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 10)).to(dev)
    x = torch.randn(128, 1, 28, 28, device=dev)
    y = torch.randn(128, 10, device=dev)
    graph_case("train_mlp_graph", net, lambda: F.mse_loss(net(x), y), 41)
if selected("train_lm") or selected("train_lm_graph"):
    # bench/gpu_bench.c's small language model: embedding, 2-layer encoder, vocabulary head,
    # cross entropy on all 16 x 64 tokens, Adam; eager, and as one captured graph
    def lm():
        layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
        return nn.Sequential(nn.Embedding(8192, 256), nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
                             nn.Linear(256, 8192), nn.Flatten(0, 1)).to(dev)
    x = torch.randint(0, 8192, (16, 64), device=dev)
    y = torch.randint(0, 8192, (16 * 64,), device=dev)
    if selected("train_lm"):
        net = lm()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)

        def lm_step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(x), y).backward()
            opt.step()
        run("train_lm", lm_step, reps=21, budget=4.0)
    if selected("train_lm_graph"):
        lm_net = lm()
        graph_case("train_lm_graph", lm_net, lambda: F.cross_entropy(lm_net(x), y), 21)
if selected("train_cnn"):
    train_case("train_cnn", nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                          nn.Flatten(), nn.Linear(64 * 7 * 7, 10)), (64, 1, 28, 28), 41)
if selected("encoder"):
    layer = nn.TransformerEncoderLayer(768, 12, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).to(dev)
    opt = torch.optim.Adam(enc.parameters(), lr=1e-4)
    x = torch.randn(2, 256, 768, device=dev)
    if selected("encoder_fwd"):
        with torch.no_grad():
            run("encoder_fwd", lambda: enc(x), reps=21, budget=3.0)

    def enc_step():
        opt.zero_grad(set_to_none=True)
        enc(x).square().mean().backward()
        opt.step()

    if selected("encoder_train"):
        run("encoder_train", enc_step, reps=21, budget=4.0)
