"""Golden fixtures for the nn layer modules (include/ember/nn_layers.h), computed by PyTorch in f64.

For each case: the module's state_dict before the first step ("<case>.p.<name>"), and for each
step s the input ("<case>.x<s>"), output ("<case>.y<s>"), and the gradients of
L = sum(y * w) (w[i] = cos(0.7 i + 0.3), row-major, computed on both sides) with respect to the
input ("<case>.gx<s>") and to each parameter ("<case>.g<s>.<name>"); the buffers after the
last step ("<case>.r.<name>"); "<case>.steps" and "<case>.train".

Run: /usr/bin/python3 scripts/fixtures_layers.py   (writes tests/fixtures/layers.emfx)
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import emfx

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
d = torch.float64
t = {}


def loss_weight(y):
    n = y.numel()
    return torch.cos(0.7 * torch.arange(n, dtype=d) + 0.3).reshape(y.shape)


def case(name, mod, xs, train=True, randomize=False, integer_input=False):
    mod = mod.double()
    if randomize:
        with torch.no_grad():
            for k, v in mod.state_dict().items():
                if k.endswith("running_var"):
                    v.copy_(torch.rand_like(v) + 0.5)
                elif k.endswith("num_batches_tracked"):
                    pass
                elif k.endswith("weight") or k.endswith("bias") or k.endswith("running_mean"):
                    v.copy_(torch.randn_like(v))
    mod.train(train)
    for k, v in mod.state_dict().items():
        t["%s.p.%s" % (name, k)] = v.clone()
    t[name + ".steps"] = len(xs)
    t[name + ".train"] = int(train)
    for s, x in enumerate(xs):
        if not integer_input:
            x = x.clone().requires_grad_(True)
        mod.zero_grad()
        y = mod(x)
        (y * loss_weight(y)).sum().backward()
        t["%s.x%d" % (name, s)] = x.detach()
        t["%s.y%d" % (name, s)] = y.detach()
        if not integer_input:
            t["%s.gx%d" % (name, s)] = x.grad.clone()
        for k, p in mod.named_parameters():
            t["%s.g%d.%s" % (name, s, k)] = p.grad.clone() if p.grad is not None else torch.zeros_like(p)
    for k, v in mod.named_buffers():
        t["%s.r.%s" % (name, k)] = v.clone()


def rn(*shape, scale=1.0):
    return torch.randn(*shape, dtype=d) * scale


class PadConv2d(nn.Conv2d):
    """Conv2d after an asymmetric zero pad (F.pad order: last dim first)."""

    def __init__(self, pads, *a, **k):
        super().__init__(*a, **k)
        self.pads = pads

    def forward(self, x):
        return super().forward(F.pad(x, self.pads))


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    def __init__(self, d_in, d_out, bias=False):
        super().__init__()
        self.w1 = nn.Linear(d_in, d_out, bias=bias)
        self.w2 = nn.Linear(d_in, d_out, bias=bias)

    def forward(self, x):
        return F.silu(self.w1(x)) * self.w2(x)


class Act(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


# convolutions
case("conv1d", nn.Conv1d(4, 6, 3, stride=2, padding=1), [rn(2, 4, 9)])
case("conv1d_same", nn.Conv1d(3, 4, 4, padding="same", dilation=2), [rn(2, 3, 10)])
case("conv2d", nn.Conv2d(3, 4, 3, padding=1), [rn(2, 3, 5, 5)])
case("conv2d_groups", nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2),
                                groups=2), [rn(2, 4, 6, 7)])
case("conv2d_valid", nn.Conv2d(2, 3, 2, padding="valid", bias=False), [rn(1, 2, 4, 5)])
case("conv2d_same_even", nn.Conv2d(2, 3, (2, 4), padding="same"), [rn(2, 2, 5, 6)])
case("conv2d_asym", PadConv2d((1, 0, 0, 2), 2, 3, 3), [rn(2, 2, 5, 5)])
case("conv2d_reflect", nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), [rn(1, 2, 5, 5)])
case("conv3d", nn.Conv3d(2, 3, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1)),
     [rn(1, 2, 4, 5, 4)])
case("convt1d", nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1), [rn(2, 3, 5)])
case("convt2d", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
     [rn(1, 4, 3, 4)])
case("convt2d_dil", nn.ConvTranspose2d(2, 3, (2, 3), stride=(2, 1), padding=(0, 1),
                                       dilation=(1, 2), bias=False), [rn(2, 2, 3, 3)])
case("convt3d", nn.ConvTranspose3d(2, 2, 2, stride=2), [rn(1, 2, 2, 3, 2)])

# pooling
case("maxpool1d", nn.MaxPool1d(3, stride=2, padding=1), [rn(2, 3, 9)])
case("maxpool2d", nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), [rn(2, 2, 7, 7)])
case("maxpool2d_dil", nn.MaxPool2d(2, stride=1, dilation=2), [rn(1, 2, 5, 5)])
case("maxpool3d", nn.MaxPool3d(2), [rn(1, 2, 4, 4, 4)])
case("avgpool1d", nn.AvgPool1d(3, stride=2, padding=1), [rn(2, 3, 8)])
case("avgpool2d", nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
     [rn(2, 2, 7, 6)])
case("avgpool3d", nn.AvgPool3d(2, stride=1), [rn(1, 2, 3, 4, 3)])
case("adavg1d", nn.AdaptiveAvgPool1d(4), [rn(2, 3, 10)])
case("adavg2d", nn.AdaptiveAvgPool2d((3, 2)), [rn(2, 2, 7, 5)])
case("admax1d", nn.AdaptiveMaxPool1d(3), [rn(2, 2, 8)])
case("admax2d", nn.AdaptiveMaxPool2d((2, 3)), [rn(1, 2, 5, 7)])

# batch and instance norm
case("bn1d", nn.BatchNorm1d(4), [rn(6, 4, scale=2) + 1, rn(6, 4)], randomize=True)
case("bn1d_seq", nn.BatchNorm1d(3), [rn(4, 3, 5)], randomize=True)
case("bn2d", nn.BatchNorm2d(3), [rn(4, 3, 3, 3) + 0.5, rn(4, 3, 3, 3, scale=3)], randomize=True)
case("bn2d_eval", nn.BatchNorm2d(3), [rn(2, 3, 3, 3)], train=False, randomize=True)
case("bn2d_cum", nn.BatchNorm2d(3, momentum=None), [rn(2, 3, 2, 3), rn(2, 3, 2, 3) - 1])
case("bn2d_notrack", nn.BatchNorm2d(2, track_running_stats=False), [rn(3, 2, 2, 2)], train=False,
     randomize=True)
case("bn3d", nn.BatchNorm3d(2, affine=False, momentum=0.3), [rn(2, 2, 2, 3, 2), rn(2, 2, 2, 3, 2)])
case("in1d", nn.InstanceNorm1d(3), [rn(2, 3, 6)])
case("in2d_affine", nn.InstanceNorm2d(3, affine=True), [rn(2, 3, 4, 4)], randomize=True)
case("in2d_track", nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
     [rn(2, 3, 3, 4), rn(2, 3, 3, 4) + 2], randomize=True)
case("in2d_track_eval", nn.InstanceNorm2d(3, track_running_stats=True), [rn(2, 3, 3, 3)],
     train=False, randomize=True)
case("in3d", nn.InstanceNorm3d(2), [rn(2, 2, 3, 3, 2)])

# layer, group and RMS norm
case("ln", nn.LayerNorm((4, 5)), [rn(2, 3, 4, 5)], randomize=True)
case("ln_noaffine", nn.LayerNorm(5, elementwise_affine=False, eps=1e-3), [rn(2, 3, 5)])
case("gn", nn.GroupNorm(3, 6), [rn(2, 6, 3, 2)], randomize=True)
case("rms", RMSNorm(5, 1e-6), [rn(2, 3, 5)], randomize=True)

# activations
xa = rn(2, 3, 4, scale=3)
case("relu6", nn.ReLU6(), [rn(2, 3, 4, scale=4)])
case("elu", nn.ELU(0.7), [xa])
case("selu", nn.SELU(), [xa])
# PyTorch's f64 backward of CELU and Hardsigmoid uses f32 constants (1/alpha.toFloat(), 1.0f/6):
# the exact f64 gradients come from the same functions written with primitive ops
case("celu", Act(lambda x: torch.clamp(x, min=0) + torch.clamp(1.3 * torch.expm1(x / 1.3), max=0)),
     [xa])
case("gelu_tanh", nn.GELU(approximate="tanh"), [xa])
case("logsigmoid", nn.LogSigmoid(), [xa])
xh = rn(2, 3, 4, scale=4)
case("hardsigmoid", Act(lambda x: torch.clamp(x / 6 + 0.5, 0, 1)), [xh])
assert torch.allclose(t["celu.y0"], nn.CELU(1.3)(xa), rtol=1e-14, atol=1e-15)
assert torch.allclose(t["hardsigmoid.y0"], nn.Hardsigmoid()(xh), rtol=1e-14, atol=1e-15)
case("hardswish", nn.Hardswish(), [rn(2, 3, 4, scale=4)])
case("mish", nn.Mish(), [xa])
case("softplus", nn.Softplus(2, 3), [xa])
case("softsign", nn.Softsign(), [xa])
case("hardtanh", nn.Hardtanh(-0.5, 1.5), [xa])
case("tanhshrink", nn.Tanhshrink(), [xa])
case("logsoftmax", nn.LogSoftmax(1), [xa])
case("softmin", nn.Softmin(-1), [xa])
case("prelu", nn.PReLU(), [xa])
case("prelu_c", nn.PReLU(3), [rn(2, 3, 4, 2)], randomize=True)
case("glu", nn.GLU(), [rn(2, 3, 6)])
case("glu_dim1", nn.GLU(1), [rn(2, 4, 3)])
case("swiglu", SwiGLU(5, 4), [rn(2, 3, 5)])
case("swiglu_bias", SwiGLU(3, 2, bias=True), [rn(4, 3)])

# resampling, patches, embedding
case("up_nearest", nn.Upsample(size=(6, 7)), [rn(1, 2, 3, 4)])
case("up_bilinear", nn.Upsample(scale_factor=2, mode="bilinear"), [rn(1, 2, 3, 4)])
case("up_bilinear_ac", nn.Upsample(size=(5, 7), mode="bilinear", align_corners=True),
     [rn(1, 2, 3, 4)])
case("up_bicubic", nn.Upsample(scale_factor=2, mode="bicubic"), [rn(1, 1, 3, 4)])
case("up_linear", nn.Upsample(scale_factor=3, mode="linear"), [rn(2, 2, 5)])
case("pixel_shuffle", nn.PixelShuffle(2), [rn(1, 8, 2, 3)])
case("pixel_unshuffle", nn.PixelUnshuffle(2), [rn(1, 2, 4, 6)])
case("unfold", nn.Unfold((2, 3), padding=1, stride=(2, 1)), [rn(2, 2, 5, 5)])
case("fold", nn.Fold((5, 6), (2, 2)), [rn(2, 8, 20)])
case("embedding", nn.Embedding(10, 4), [torch.tensor([[1, 3, 3, 9, 0], [2, 2, 7, 5, 1]])],
     integer_input=True)
case("embedding_pad", nn.Embedding(10, 4, padding_idx=2),
     [torch.tensor([[1, 2, 3, 2], [2, 6, 7, 8]])], integer_input=True)

emfx.write("layers.emfx", t)
print(len(t), "tensors")
