"""Golden fixtures for the optimizers, clipping and schedulers (tests/optim).

Run with Debian's Python: /usr/bin/python3 scripts/fixtures_optim.py
A small f64 MLP (Linear(4,3), Tanh, Linear(3,2)) with fixed data; every optimizer configuration
runs 20 steps of loss = mean((mlp(x) - y)^2) from the same initial parameters and records the
parameters after each step. Lion and Muon are not in PyTorch 1.13: their references are written
here (Muon's Newton-Schulz in numpy), following docs/optim.md.
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emfx import write  # noqa: E402

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
STEPS = 20
NAMES = ["0.weight", "0.bias", "2.weight", "2.bias"]


def make_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))


X = torch.randn(8, 4)
Y = torch.randn(8, 2)
out = {"x": X, "y": Y}
m0 = make_model()
for n, p in m0.named_parameters():
    out["init." + n] = p.detach().clone()


def loss_of(model):
    return ((model(X) - Y) ** 2).mean()


def trajectory(tag, make_opt, manual=None):
    model = make_model()
    opt = make_opt(model) if make_opt else None
    traj = {n: [] for n in NAMES}
    state = {}
    for _ in range(STEPS):
        model.zero_grad()
        loss_of(model).backward()
        if opt:
            opt.step()
        else:
            with torch.no_grad():
                manual(model, state)
        for n, p in model.named_parameters():
            traj[n].append(p.detach().clone())
    for n in NAMES:
        out[tag + "." + n] = torch.stack(traj[n])


O = torch.optim
trajectory("sgd", lambda m: O.SGD(m.parameters(), lr=0.1))
trajectory("sgd_mom", lambda m: O.SGD(m.parameters(), lr=0.1, momentum=0.9, dampening=0.3))
trajectory("sgd_nest", lambda m: O.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                       weight_decay=1e-2))
trajectory("sgd_max", lambda m: O.SGD(m.parameters(), lr=0.01, momentum=0.5, maximize=True))
trajectory("adam", lambda m: O.Adam(m.parameters(), lr=1e-2))
trajectory("adam_ams", lambda m: O.Adam(m.parameters(), lr=1e-2, amsgrad=True, weight_decay=1e-2,
                                        betas=(0.8, 0.99)))
trajectory("adam_max", lambda m: O.Adam(m.parameters(), lr=1e-3, maximize=True, eps=1e-6))
trajectory("adamw", lambda m: O.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1))
trajectory("adamw_ams", lambda m: O.AdamW(m.parameters(), lr=1e-2, amsgrad=True))
trajectory("rmsprop", lambda m: O.RMSprop(m.parameters(), lr=1e-2))
trajectory("rms_cm", lambda m: O.RMSprop(m.parameters(), lr=1e-2, alpha=0.9, centered=True,
                                         momentum=0.9, weight_decay=1e-3))
trajectory("rms_max", lambda m: O.RMSprop(m.parameters(), lr=1e-3, momentum=0.5, maximize=True))
trajectory("adagrad", lambda m: O.Adagrad(m.parameters(), lr=0.1))
trajectory("adagrad_opt", lambda m: O.Adagrad(m.parameters(), lr=0.1, lr_decay=0.01,
                                              weight_decay=0.01, initial_accumulator_value=0.1))
trajectory("adagrad_max", lambda m: O.Adagrad(m.parameters(), lr=0.01, maximize=True))


def groups(m):
    p = dict(m.named_parameters())
    return O.AdamW([{"params": [p["0.weight"]], "lr": 0.05},
                    {"params": [p["0.bias"]], "lr": 0.05, "weight_decay": 0.1},
                    {"params": [p["2.weight"]]},
                    {"params": [p["2.bias"]], "weight_decay": 0.1}], lr=1e-2, weight_decay=1e-2)


trajectory("groups", groups)


def lion(lr, b1, b2, wd):
    def step(model, state):
        for n, p in model.named_parameters():
            m = state.setdefault(n, torch.zeros_like(p))
            c = b1 * m + (1 - b1) * p.grad
            p.mul_(1 - lr * wd)
            p.add_(torch.sign(c), alpha=-lr)
            m.mul_(b2).add_(p.grad, alpha=1 - b2)
    return step


trajectory("lion", None, lion(1e-3, 0.9, 0.99, 0.0))
trajectory("lion_wd", None, lion(3e-3, 0.8, 0.95, 0.5))


def newton_schulz(u, steps):
    a, b, c = 3.4445, -4.7750, 2.0315
    x = u / (np.linalg.norm(u) + 1e-7)
    tall = u.shape[0] > u.shape[1]
    if tall:
        x = x.T
    for _ in range(steps):
        A = x @ x.T
        B = b * A + c * (A @ A)
        x = a * x + B @ x
    return x.T if tall else x


def muon(lr, mom, nesterov, ns, wd, alr, awd):
    def step(model, state):
        state["t"] = state.get("t", 0) + 1
        t = state["t"]
        for n, p in model.named_parameters():
            g = p.grad
            if p.dim() == 2:
                buf = state.setdefault(n, torch.zeros_like(p))
                buf.mul_(mom).add_(g)
                u = g + mom * buf if nesterov else buf
                x = torch.from_numpy(newton_schulz(u.numpy(), ns))
                scale = max(1.0, p.shape[0] / p.shape[1]) ** 0.5
                p.mul_(1 - lr * wd)
                p.add_(x, alpha=-lr * scale)
            else:  # AdamW fallback (defaults beta 0.9/0.999, eps 1e-8)
                m, v = state.setdefault(n, (torch.zeros_like(p), torch.zeros_like(p)))
                p.mul_(1 - alr * awd)
                m.mul_(0.9).add_(g, alpha=0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                denom = (v.sqrt() / math.sqrt(1 - 0.999 ** t)).add_(1e-8)
                p.addcdiv_(m, denom, value=-alr / (1 - 0.9 ** t))
    return step


trajectory("muon", None, muon(2e-2, 0.95, True, 5, 0.0, 1e-3, 1e-2))
trajectory("muon_opt", None, muon(5e-2, 0.9, False, 3, 0.1, 1e-2, 0.0))

# clipping: gradients at the initial parameters
m = make_model()
loss_of(m).backward()
grads = {n: p.grad.detach().clone() for n, p in m.named_parameters()}
for n in NAMES:
    out["grad." + n] = grads[n]
for tag, max_norm, nt in [("clip2", 0.5, 2.0), ("clipinf", 0.1, math.inf), ("clip1", 0.3, 1.0),
                          ("clipbig", 100.0, 2.0)]:
    ps = list(m.parameters())
    for p, n in zip(ps, NAMES):
        p.grad = grads[n].clone()
    total = torch.nn.utils.clip_grad_norm_(ps, max_norm, nt)
    out[tag + ".total"] = total.reshape(1)
    for p, n in zip(ps, NAMES):
        out[tag + "." + n] = p.grad.clone()
ps = list(m.parameters())
for p, n in zip(ps, NAMES):
    p.grad = grads[n].clone()
torch.nn.utils.clip_grad_value_(ps, 0.05)
for p, n in zip(ps, NAMES):
    out["clipval." + n] = p.grad.clone()

# schedulers: lr after construction, then after each of 40 steps (base lr 0.1)
S = torch.optim.lr_scheduler
NS = 40


def lrs(tag, make, metrics=None):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = O.SGD([p], lr=0.1, momentum=0.9)
    s = make(opt)
    seq = [opt.param_groups[0]["lr"]]
    for i in range(NS):
        opt.step()
        if metrics is not None:
            s.step(metrics[i])
        else:
            s.step()
        seq.append(opt.param_groups[0]["lr"])
    out["lr." + tag] = np.array(seq)


lrs("constant", lambda o: S.ConstantLR(o, factor=0.5, total_iters=4))
lrs("step", lambda o: S.StepLR(o, step_size=7, gamma=0.5))
lrs("multistep", lambda o: S.MultiStepLR(o, milestones=[5, 12, 20], gamma=0.3))
lrs("exponential", lambda o: S.ExponentialLR(o, gamma=0.9))
lrs("linear", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=10))
lrs("linear_down", lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=30))
lrs("cosine", lambda o: S.CosineAnnealingLR(o, T_max=15, eta_min=0.001))
lrs("restarts", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=0.01))
lrs("restarts1", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=7))
lrs("onecycle", lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=41, cycle_momentum=False))
lrs("onecycle2", lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=50, pct_start=0.5,
                                         div_factor=10, final_div_factor=100,
                                         cycle_momentum=False))
lrs("warmup_cos", lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=5),
                                              S.CosineAnnealingLR(o, T_max=20)], milestones=[5]))
lrs("warmup_exp", lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.2, total_iters=8),
                                              S.ExponentialLR(o, gamma=0.95)], milestones=[8]))
lrs("noam", lambda o: S.LambdaLR(o, lambda t: 64 ** -0.5 * min((t + 1) ** -0.5,
                                                                (t + 1) * 10 ** -1.5)))
rng = np.random.RandomState(3)
metrics = np.concatenate([np.linspace(1.0, 0.5, 10), 0.5 + 0.01 * rng.rand(30)])
out["plateau.metrics"] = metrics
lrs("plateau", lambda o: S.ReduceLROnPlateau(o, mode="min", factor=0.5, patience=3, cooldown=2,
                                             min_lr=0.004), metrics)
lrs("plateau_max", lambda o: S.ReduceLROnPlateau(o, mode="max", patience=2, threshold=0.01),
    -metrics)

write("optim.emfx", out)
print("wrote optim.emfx:", len(out), "tensors")
