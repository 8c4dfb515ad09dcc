"""Golden fixtures from PyTorch for the ordering ops (sort, topk, median) and the real FFT
(rfft, irfft): writes tests/fixtures/order.emfx and tests/fixtures/signal.emfx.

Run with Debian's Python: /usr/bin/python3 scripts/fixtures_order.py
"""
import math

import torch

from emfx import write

torch.manual_seed(1234)


def order_fixtures():
    t = {}
    # sort: duplicates (stability) and NaN (largest) along dim 1, plus dim 0
    x = torch.randint(-4, 5, (4, 9)).double()
    x[1, 3] = math.nan
    x[2, 0] = math.nan
    x[2, 5] = math.nan
    t["sort_x"] = x
    for desc in (False, True):
        v, i = torch.sort(x, dim=1, descending=desc, stable=True)
        t["sort_d1_%s_v" % ("desc" if desc else "asc")] = v
        t["sort_d1_%s_i" % ("desc" if desc else "asc")] = i
        v, i = torch.sort(x, dim=0, descending=desc, stable=True)
        t["sort_d0_%s_v" % ("desc" if desc else "asc")] = v
        t["sort_d0_%s_i" % ("desc" if desc else "asc")] = i
    # topk: distinct values (torch leaves the order of ties unspecified)
    y = torch.randperm(60).double().reshape(5, 12) * 0.25 - 7
    t["topk_x"] = y
    for largest in (True, False):
        v, i = torch.topk(y, 4, dim=1, largest=largest, sorted=True)
        t["topk_%s_v" % ("large" if largest else "small")] = v
        t["topk_%s_i" % ("large" if largest else "small")] = i
    v, i = torch.topk(y, 3, dim=0, largest=True, sorted=True)
    t["topk_d0_v"] = v
    t["topk_d0_i"] = i
    # median: odd and even lengths (lower median), distinct values, a NaN row
    for n in (7, 8):
        m = torch.randperm(6 * n).double().reshape(6, n) - 10
        if n == 8:
            m[3, 2] = math.nan
        v, i = torch.median(m, dim=1)
        t["median%d_x" % n] = m
        t["median%d_v" % n] = v
        t["median%d_i" % n] = i
    t["median_all"] = torch.median(t["median7_x"])
    write("order.emfx", t)


def signal_fixtures():
    t = {}
    for n in (1, 2, 3, 5, 7, 12, 100):
        x = torch.randn(n, dtype=torch.float64)
        t["rfft%d_x" % n] = x
        t["rfft%d_y" % n] = torch.view_as_real(torch.fft.rfft(x))
        bins = n // 2 + 1
        c = torch.randn(bins, 2, dtype=torch.float64)
        t["irfft%d_x" % n] = c
        t["irfft%d_y" % n] = torch.fft.irfft(torch.view_as_complex(c), n=n)
    # along dim 0 of a matrix, with padding (n = 8 > 6) and cropping (n = 4)
    m = torch.randn(6, 3, dtype=torch.float64)
    t["rfft2d_x"] = m
    t["rfft2d_pad_y"] = torch.view_as_real(torch.fft.rfft(m, n=8, dim=0))
    t["rfft2d_crop_y"] = torch.view_as_real(torch.fft.rfft(m, n=4, dim=0))
    spec = torch.randn(3, 5, 2, dtype=torch.float64)
    t["irfft2d_x"] = spec
    t["irfft2d_y"] = torch.fft.irfft(torch.view_as_complex(spec), n=7, dim=1)
    write("signal.emfx", t)


if __name__ == "__main__":
    order_fixtures()
    signal_fixtures()
