"""Golden fixtures for normalisation and attention, computed by PyTorch in f64.

Run: /usr/bin/python3 scripts/fixtures_norm.py   (writes tests/fixtures/norm.emfx)
"""
import math

import torch
import torch.nn.functional as F

import emfx

torch.manual_seed(0)
d = torch.float64
t = {}

x = torch.randn(2, 3, 4, 5, dtype=d)
w = torch.randn(4, 5, dtype=d)
b = torch.randn(4, 5, dtype=d)
t["ln.x"], t["ln.w"], t["ln.b"] = x, w, b
t["ln.y"] = F.layer_norm(x, (4, 5), w, b, eps=1e-5)
t["ln.y_noaffine"] = F.layer_norm(x, (5,), eps=1e-3)

# RMS norm as in LLaMA/torch 2.x: x / sqrt(mean(x^2) + eps) * w
w1 = torch.randn(5, dtype=d)
t["rms.w"] = w1
t["rms.y"] = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w1

xg = torch.randn(2, 6, 3, 2, dtype=d)
wg = torch.randn(6, dtype=d)
bg = torch.randn(6, dtype=d)
t["gn.x"], t["gn.w"], t["gn.b"] = xg, wg, bg
t["gn.y"] = F.group_norm(xg, 3, wg, bg, eps=1e-5)

mean = torch.randn(6, dtype=d)
var = torch.rand(6, dtype=d) + 0.5
t["bn.mean"], t["bn.var"] = mean, var
t["bn.y"] = F.batch_norm(xg, mean, var, wg, bg, training=False, eps=1e-5)


def sdpa(q, k, v, mask=None, causal=False, scale=None):
    s = q @ k.transpose(-1, -2) * (scale if scale else 1 / math.sqrt(q.shape[-1]))
    if causal:
        L, S = q.shape[-2], k.shape[-2]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


q = torch.randn(2, 3, 4, 8, dtype=d)
k = torch.randn(2, 3, 6, 8, dtype=d)
v = torch.randn(2, 3, 6, 5, dtype=d)
bm = torch.rand(4, 6) > 0.3
bm[:, 0] = True
am = torch.randn(2, 1, 4, 6, dtype=d)
t["sdpa.q"], t["sdpa.k"], t["sdpa.v"] = q, k, v
t["sdpa.bool_mask"], t["sdpa.add_mask"] = bm, am
t["sdpa.y"] = sdpa(q, k, v)
t["sdpa.y_causal"] = sdpa(q, k, v, causal=True)
t["sdpa.y_bool"] = sdpa(q, k, v, mask=bm)
t["sdpa.y_add"] = sdpa(q, k, v, mask=am, scale=0.3)

emfx.write("norm.emfx", t)
