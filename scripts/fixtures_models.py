#!/usr/bin/python3
"""Writes the model-file fixtures for tests/store/test_models.c, with PyTorch and torchvision:

  tests/fixtures/models/resnet_narrow.pt   torchvision ResNet (BasicBlock, [2, 2, 2, 2], the
                                           ResNet-18 layout) with widths 4-8-16-32 instead of
                                           64-128-256-512; running statistics from a few
                                           training-mode batches; torch.save'd state_dict (f32)
  tests/fixtures/models/transformer.pt     torch.nn.TransformerEncoder: 2 layers, d_model 16,
                                           2 heads, dim_feedforward 32, final LayerNorm
  tests/fixtures/models/mlp.safetensors    Linear(6, 8) - ReLU - Linear(8, 3) written with plain
                                           struct + json (no Ember, no safetensors package)
  tests/fixtures/models/mlp_dp.pt          the same MLP saved as a DataParallel checkpoint:
                                           {"epoch": .., "state_dict": {"module.0.weight": ..}}
  tests/fixtures/models.emfx               inputs and outputs, computed in f64 from the f32
                                           weights (eval mode)

Run: /usr/bin/python3 scripts/fixtures_models.py (needs python3-torchvision)."""
import collections
import json
import os
import struct

import torch
import torch.nn as nn
from torchvision.models.resnet import BasicBlock, ResNet

from emfx import write

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "models")


class NarrowResNet(ResNet):
    """torchvision's ResNet with its own BasicBlock, _make_layer and forward, narrower stages.
    (ResNet.__init__ hard-codes the widths 64-512; this repeats it with `widths`.)"""

    def __init__(self, widths, layers, num_classes):
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.inplanes = widths[0]
        self.dilation = 1
        self.groups = 1
        self.base_width = 64
        self.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(BasicBlock, widths[0], layers[0])
        self.layer2 = self._make_layer(BasicBlock, widths[1], layers[1], stride=2)
        self.layer3 = self._make_layer(BasicBlock, widths[2], layers[2], stride=2)
        self.layer4 = self._make_layer(BasicBlock, widths[3], layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3], num_classes)


def f32_exact(t):
    """Values exactly representable in f32, as f64."""
    return t.float().double()


def write_safetensors(path, tensors, metadata=None):
    names = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for k in order:
        b = tensors[k].detach().contiguous().numpy().tobytes()
        header[k] = {"dtype": names[tensors[k].dtype], "shape": list(tensors[k].shape),
                     "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    os.makedirs(OUT, exist_ok=True)
    fx = collections.OrderedDict()

    # ResNet: train-mode batches give real running statistics, then random affine parameters.
    torch.manual_seed(0)
    net = NarrowResNet((4, 8, 16, 32), (2, 2, 2, 2), 10)
    net.train()
    with torch.no_grad():
        for _ in range(3):
            net(torch.randn(4, 3, 24, 24))
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    net.eval()
    torch.save(net.state_dict(), os.path.join(OUT, "resnet_narrow.pt"))
    x = f32_exact(torch.randn(2, 3, 24, 24))
    with torch.no_grad():
        y = net.double()(x)
    fx["resnet.x"] = x
    fx["resnet.y"] = y

    # Transformer encoder, PyTorch's default layout [L, N, E].
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.1)
    enc = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(16),
                                enable_nested_tensor=False)
    with torch.no_grad():
        for n, p in enc.named_parameters():
            if "norm" in n:  # LayerNorm starts at ones/zeros: make it matter
                p.add_(0.1 * torch.randn_like(p))
            elif n.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
    enc.eval()
    torch.save(enc.state_dict(), os.path.join(OUT, "transformer.pt"))
    src = f32_exact(torch.randn(5, 2, 16))
    with torch.no_grad():
        out = enc.double()(src)
    fx["tf.x"] = src
    fx["tf.y"] = out

    # MLP from plain struct + json, and as a DataParallel checkpoint.
    torch.manual_seed(2)
    mlp = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    sd = mlp.state_dict()
    write_safetensors(os.path.join(OUT, "mlp.safetensors"), sd, {"format": "pt"})
    dp = collections.OrderedDict(("module." + k, v) for k, v in sd.items())
    torch.save({"epoch": 7, "state_dict": dp}, os.path.join(OUT, "mlp_dp.pt"))
    xm = f32_exact(torch.randn(4, 6))
    with torch.no_grad():
        ym = mlp.double()(xm)
    fx["mlp.x"] = xm
    fx["mlp.y"] = ym

    write("models.emfx", fx)


if __name__ == "__main__":
    main()
