"""Golden fixtures for pooling, interpolation and pixel shuffle, computed by PyTorch in f64.

Run: /usr/bin/python3 scripts/fixtures_pool.py   (writes tests/fixtures/pool.emfx)
"""
import torch
import torch.nn.functional as F

import emfx

torch.manual_seed(1)
d = torch.float64
t = {}

x2 = torch.randn(2, 3, 9, 8, dtype=d)
t["x2"] = x2
y, i = F.max_pool2d(x2, 3, stride=2, padding=1, dilation=1, ceil_mode=True, return_indices=True)
t["max2d_a"], t["max2d_a.idx"] = y, i
y, i = F.max_pool2d(x2, (2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 2),
                    return_indices=True)
t["max2d_b"], t["max2d_b.idx"] = y, i
t["avg2d_a"] = F.avg_pool2d(x2, 3, stride=2, padding=1, ceil_mode=True)
t["avg2d_b"] = F.avg_pool2d(x2, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
x1 = torch.randn(2, 3, 11, dtype=d)
t["x1"] = x1
y, i = F.max_pool1d(x1, 4, stride=3, padding=2, return_indices=True)
t["max1d"], t["max1d.idx"] = y, i
t["avg1d"] = F.avg_pool1d(x1, 4, stride=3, padding=2)
x3 = torch.randn(1, 2, 5, 6, 7, dtype=d)
t["x3"] = x3
y, i = F.max_pool3d(x3, 2, stride=(1, 2, 2), padding=1, return_indices=True)
t["max3d"], t["max3d.idx"] = y, i
t["avg3d"] = F.avg_pool3d(x3, (2, 3, 2), stride=2, padding=(1, 1, 0), ceil_mode=True)
t["aavg2d"] = F.adaptive_avg_pool2d(x2, (4, 3))
y, i = F.adaptive_max_pool2d(x2, (5, 3), return_indices=True)
t["amax2d"], t["amax2d.idx"] = y, i
t["aavg1d"] = F.adaptive_avg_pool1d(x1, 4)
y, i = F.adaptive_max_pool1d(x1, 5, return_indices=True)
t["amax1d"], t["amax1d.idx"] = y, i

xi = torch.randn(2, 2, 5, 4, dtype=d)
t["xi"] = xi
t["nearest"] = F.interpolate(xi, size=(7, 3), mode="nearest")
t["bilinear"] = F.interpolate(xi, size=(8, 7), mode="bilinear", align_corners=False)
t["bilinear_ac"] = F.interpolate(xi, size=(8, 7), mode="bilinear", align_corners=True)
t["bicubic"] = F.interpolate(xi, size=(9, 6), mode="bicubic", align_corners=False)
t["bicubic_ac"] = F.interpolate(xi, size=(3, 6), mode="bicubic", align_corners=True)
t["linear1d"] = F.interpolate(x1, size=17, mode="linear", align_corners=False)
t["nearest1d"] = F.interpolate(x1, size=5, mode="nearest")

xs = torch.randn(2, 8, 3, 2, dtype=d)
t["xs"] = xs
t["shuffle"] = F.pixel_shuffle(xs, 2)
t["unshuffle"] = F.pixel_unshuffle(t["shuffle"], 2)

emfx.write("pool.emfx", t)
