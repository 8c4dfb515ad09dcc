"""Golden gradients of a small MLP and a small CNN, computed by PyTorch in f64.

Run: /usr/bin/python3 scripts/fixtures_autodiff.py   (writes tests/fixtures/autodiff.emfx)
"""
import torch
import torch.nn.functional as F

import emfx

torch.manual_seed(3)
d = torch.float64
t = {}

# MLP: 6 -> 8 (tanh) -> 8 (relu) -> 3, cross-entropy on class indices
x = torch.randn(5, 6, dtype=d)
y = torch.tensor([0, 2, 1, 2, 0])
w1 = torch.randn(8, 6, dtype=d, requires_grad=True)
b1 = torch.randn(8, dtype=d, requires_grad=True)
w2 = torch.randn(8, 8, dtype=d, requires_grad=True)
b2 = torch.randn(8, dtype=d, requires_grad=True)
w3 = torch.randn(3, 8, dtype=d, requires_grad=True)
b3 = torch.randn(3, dtype=d, requires_grad=True)
h = torch.tanh(x @ w1.T + b1)
h = torch.relu(h @ w2.T + b2)
z = h @ w3.T + b3
loss = F.cross_entropy(z, y)
loss.backward()
t["mlp.x"], t["mlp.y"], t["mlp.loss"] = x, y, loss.detach()
for name, p in [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("w3", w3), ("b3", b3)]:
    t["mlp." + name] = p.detach()
    t["mlp.g" + name] = p.grad

# CNN: conv 1->3 (3x3, pad 1) -> relu -> max_pool 2 -> conv 3->4 (3x3) -> gelu -> flatten -> linear 4*1*1... 
xc = torch.randn(2, 1, 8, 8, dtype=d)
yc = torch.tensor([1, 0])
c1 = torch.randn(3, 1, 3, 3, dtype=d, requires_grad=True)
cb1 = torch.randn(3, dtype=d, requires_grad=True)
c2 = torch.randn(4, 3, 3, 3, dtype=d, requires_grad=True)
cb2 = torch.randn(4, dtype=d, requires_grad=True)
wl = torch.randn(2, 4 * 2 * 2, dtype=d, requires_grad=True)
bl = torch.randn(2, dtype=d, requires_grad=True)
a = F.max_pool2d(torch.relu(F.conv2d(xc, c1, cb1, padding=1)), 2)
a = F.gelu(F.conv2d(a, c2, cb2))
a = F.avg_pool2d(a, 1)
z = a.flatten(1) @ wl.T + bl
loss = F.cross_entropy(z, yc)
loss.backward()
t["cnn.x"], t["cnn.y"], t["cnn.loss"] = xc, yc, loss.detach()
for name, p in [("c1", c1), ("cb1", cb1), ("c2", c2), ("cb2", cb2), ("wl", wl), ("bl", bl)]:
    t["cnn." + name] = p.detach()
    t["cnn.g" + name] = p.grad

emfx.write("autodiff.emfx", t)
