"""PyTorch peer of bench/ember_bench.c: the same cases, 2 threads, one tab-separated timing line
per case ("case median min max q1 q3 reps", milliseconds) as bench_common.h prints them."""
import sys

import torch
import torch.nn.functional as F

from bench_timing import run

torch.set_num_threads(2)
torch.manual_seed(0)
ARGS = sys.argv[1:]


def selected(name):
    """name starts with an argument, or is a group guard that an argument starts with"""
    return not ARGS or any(name.startswith(a) or a.startswith(name) for a in ARGS)


print(f"torch_version\t{torch.__version__}")
print(f"torch_threads\t{torch.get_num_threads()}")
with torch.no_grad():
    for n in (256, 1024, 2048, 4096):
        name = f"matmul_{n}"
        if selected(name):
            a, b = torch.randn(n, n), torch.randn(n, n)
            run(name, lambda: a @ b, 20 if n <= 256 else 1,
                3 if n >= 4096 else 5 if n >= 2048 else 15 if n >= 1024 else 101, 10 if n >= 4096 else 3)
    if selected("bf16_matmul_1024"):
        a, b = torch.randn(1024, 1024).bfloat16(), torch.randn(1024, 1024).bfloat16()
        run("bf16_matmul_1024", lambda: a @ b, 1, 15, 3)
    if selected("strided_matmul_1024"):
        a, b = torch.randn(1024, 2048)[:, ::2], torch.randn(1024, 2048)[:, ::2]
        run("strided_matmul_1024", lambda: a @ b, 1, 15, 3)
    if selected("gemv"):
        A, v = torch.randn(4096, 4096), torch.randn(4096)
        if selected("gemv_n"):
            run("gemv_n", lambda: torch.mv(A, v), 3, 21, 3)
        if selected("gemv_t"):
            run("gemv_t", lambda: torch.mv(A.t(), v), 3, 21, 3)
    if selected("conv_3x3"):
        x, w, b = torch.randn(16, 64, 56, 56), torch.randn(64, 64, 3, 3), torch.randn(64)
        run("conv_3x3", lambda: F.conv2d(x, w, b, padding=1), 1, 7, 4)
    if selected("conv_7x7s2"):
        x, w, b = torch.randn(16, 3, 224, 224), torch.randn(64, 3, 7, 7), torch.randn(64)
        run("conv_7x7s2", lambda: F.conv2d(x, w, b, stride=2, padding=3), 1, 7, 4)
    if selected("maxpool_k3s1"):
        x = torch.randn(2, 128, 512, 512)
        run("maxpool_k3s1", lambda: F.max_pool2d(x, 3, 1, 1), 1, 7, 6)
        del x
    if selected("maxpool_k5s2d2_cl"):
        x = torch.randn(2, 512, 512, 128).permute(0, 3, 1, 2)
        run("maxpool_k5s2d2_cl", lambda: F.max_pool2d(x, 5, 2, 2, 2), 1, 7, 6)
        del x
    if selected("softmax"):
        x = torch.randn(64, 1024, 1024)
        run("softmax", lambda: torch.softmax(x, -1), 1, 9, 5)
        del x
    if selected("fwbw_softmax"):
        x = torch.randn(4096, 1024, requires_grad=True)
        gy = torch.randn(4096, 1024)

        def smax():
            with torch.enable_grad():
                torch.autograd.grad(torch.softmax(x, -1), x, gy)
        run("fwbw_softmax", smax, 2, 11, 4)
        del x, gy
    if selected("fwbw_xent"):
        x = torch.randn(4096, 1000, requires_grad=True)
        t = torch.randint(0, 1000, (4096,))

        def xent():
            with torch.enable_grad():
                torch.autograd.grad(F.cross_entropy(x, t), x)
        run("fwbw_xent", xent, 2, 11, 4)
        del x, t
    if selected("layer_norm"):
        x, w, b = torch.randn(4096, 4096), torch.randn(4096), torch.randn(4096)
        run("layer_norm", lambda: F.layer_norm(x, (4096,), w, b, 1e-5), 1, 11, 4)
    if selected("gelu") or selected("sum"):
        x = torch.randn(64 << 20)
        if selected("gelu"):
            run("gelu", lambda: F.gelu(x), 1, 9, 5)
        if selected("sum"):
            run("sum", lambda: x.sum(), 1, 11, 4)
        del x
    for name, op, pos, i32 in (("ew_exp", torch.exp, 0, 0), ("ew_log", torch.log, 1, 0),
                               ("ew_tanh", torch.tanh, 0, 0), ("ew_sigmoid", torch.sigmoid, 0, 0),
                               ("ew_silu", F.silu, 0, 0), ("ew_erf", torch.erf, 0, 0),
                               ("ew_add", torch.add, 0, 0), ("ew_mul", torch.mul, 0, 0),
                               ("ew_div", torch.div, 0, 0), ("ew_pow", torch.pow, 1, 0),
                               ("ew_maximum", torch.maximum, 0, 0), ("ew_i32_add", torch.add, 0, 1),
                               ("ew_i32_div", torch.div, 0, 1),
                               ("ew_i32_remainder", torch.remainder, 0, 1),
                               ("ew_i32_maximum", torch.maximum, 0, 1)):
        if not selected(name):
            continue
        if i32:
            a = torch.randint(-1000, 1000, (1 << 20,), dtype=torch.int32)
            b = torch.randint(1, 100, (1 << 20,), dtype=torch.int32)
        else:
            a, b = torch.randn(1 << 20), torch.randn(1 << 20)
            if pos:
                a = a.abs() + 0.5
        unary = op in (torch.exp, torch.log, torch.tanh, torch.sigmoid, F.silu, torch.erf)
        run(name, (lambda op=op, a=a: op(a)) if unary else (lambda op=op, a=a, b=b: op(a, b)), 3, 51, 1)
    if selected("topk"):
        x = torch.randn(16, 1024, 1024)
        if selected("topk_k1_dim0"):
            run("topk_k1_dim0", lambda: torch.topk(x, 1, 0), 1, 9, 4)
        if selected("topk_k10_last"):
            run("topk_k10_last", lambda: torch.topk(x, 10, -1), 1, 9, 4)
    if selected("rfft"):
        x = torch.randn(1 << 20)
        run("rfft_1M", lambda: torch.fft.rfft(x), 2, 21, 3)


def train_case(name, net, xshape, reps, targets=None):
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(*xshape)
    y = torch.randint(0, 10, (targets or xshape[0],))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    run(name, step, 3, reps, 4)


if selected("conv_fwbw_7x7s2"):
    x, w, b = (torch.randn(16, 3, 224, 224).requires_grad_(), torch.randn(64, 3, 7, 7).requires_grad_(),
               torch.randn(64).requires_grad_())
    r = torch.randn(16, 64, 112, 112)

    def conv_fwbw():
        x.grad = w.grad = b.grad = None  # fresh gradients each time, as em_backward gives
        (F.conv2d(x, w, b, stride=2, padding=3) * r).sum().backward()

    run("conv_fwbw_7x7s2", conv_fwbw, 1, 7, 4)
if selected("train_mlp"):
    nn = torch.nn
    train_case("train_mlp", nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                                          nn.ReLU(), nn.Linear(512, 10)), (128, 1, 28, 28), 41)
if selected("train_cnn"):
    nn = torch.nn
    train_case("train_cnn", nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                          nn.Flatten(), nn.Linear(64 * 7 * 7, 10)), (64, 1, 28, 28), 21)
if selected("train_lstm"):
    nn = torch.nn

    class Tagger(nn.Module):  # as bench/ember_bench.c: LSTM 64 -> 256, a class of 10 per step
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(64, 256, batch_first=True)
            self.fc = nn.Linear(256, 10)

        def forward(self, x):
            return self.fc(self.lstm(x)[0].flatten(0, 1))

    train_case("train_lstm", Tagger(), (32, 64, 64), 11, targets=32 * 64)
