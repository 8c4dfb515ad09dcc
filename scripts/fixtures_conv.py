"""Golden fixtures for the convolution family (tests/ops/conf_conv.c): PyTorch's conv1d/2d/3d,
conv_transpose1d/2d/3d, F.unfold and F.fold on small f64 inputs.

Each case <name> stores <name>_x, <name>_w, <name>_b (empty when no bias), <name>_y and
<name>_opts = [nsp, stride[3], pad_lo[3], pad_hi[3], dilation[3], out_pad[3], groups] (i64).
Asymmetric padding is built from F.pad (conv) or by cropping (conv_transpose).
Run: /usr/bin/python3 scripts/fixtures_conv.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emfx  # noqa: E402

torch.manual_seed(1234)
out = {}


def pad3(v, nsp, fill):
    return list(v) + [fill] * (3 - nsp)


def add_case(name, transposed, x, w, bias, stride, plo, phi, dil, opad, groups):
    nsp = x.dim() - 2
    if not transposed:
        fn = [F.conv1d, F.conv2d, F.conv3d][nsp - 1]
        pads = []
        for d in reversed(range(nsp)):
            pads += [plo[d], phi[d]]
        y = fn(F.pad(x, pads), w, bias, stride=stride, dilation=dil, groups=groups)
    else:
        fn = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][nsp - 1]
        y = fn(x, w, bias, stride=stride, padding=0, output_padding=opad, groups=groups,
               dilation=dil)
        idx = [slice(None), slice(None)]
        for d in range(nsp):
            idx.append(slice(plo[d], y.shape[2 + d] - phi[d]))
        y = y[tuple(idx)]
    out[name + "_x"] = x
    out[name + "_w"] = w
    out[name + "_b"] = bias if bias is not None else torch.zeros(0, dtype=torch.float64)
    out[name + "_y"] = y
    opts = [nsp] + pad3(stride, nsp, 1) + pad3(plo, nsp, 0) + pad3(phi, nsp, 0) + \
        pad3(dil, nsp, 1) + pad3(opad, nsp, 0) + [groups]
    out[name + "_opts"] = torch.tensor(opts, dtype=torch.int64)


def r(*shape):
    return torch.randn(*shape, dtype=torch.float64)


# conv2d with groups, dilation, stride and asymmetric padding
add_case("conv2d", False, r(2, 4, 9, 8), r(6, 2, 3, 3), r(6), [2, 1], [1, 2], [2, 0], [2, 1],
         [0, 0], 2)
# conv1d, depthwise, no bias
add_case("conv1d", False, r(3, 3, 11), r(3, 1, 4), None, [3], [2], [1], [1], [0], 3)
# conv3d
add_case("conv3d", False, r(2, 2, 5, 4, 6), r(4, 2, 2, 3, 2), r(4), [1, 2, 2], [1, 0, 1],
         [0, 1, 1], [2, 1, 1], [0, 0, 0], 1)
# conv_transpose2d with out_pad and groups
add_case("convt2d", True, r(1, 4, 4, 5), r(4, 3, 3, 2), r(6), [2, 3], [1, 0], [1, 1], [1, 2],
         [1, 2], 2)
# conv_transpose1d with asymmetric crop and dilation
add_case("convt1d", True, r(3, 2, 6), r(2, 3, 3), r(3), [2], [2], [0], [2], [1], 1)
# conv_transpose3d
add_case("convt3d", True, r(1, 2, 2, 2, 3), r(2, 2, 2, 3, 2), None, [2, 1, 2], [0, 1, 1],
         [1, 0, 0], [1, 2, 1], [1, 1, 0], 2)

# unfold / fold
x = r(2, 3, 7, 6)
k, dl, p, s = [3, 2], [1, 2], [1, 0], [2, 1]
out["unfold_x"] = x
out["unfold_y"] = F.unfold(x, k, dilation=dl, padding=p, stride=s)
out["unfold_opts"] = torch.tensor(k + dl + p + s, dtype=torch.int64)
cols = r(2, 3 * 2 * 2, 20)
# fold to 5x6 with kernel 2x2, stride 1, padding 0 gives 4*5 = 20 blocks
out["fold_x"] = cols
out["fold_y"] = F.fold(cols, (5, 6), (2, 2))
out["fold_opts"] = torch.tensor([2, 2, 1, 1, 0, 0, 1, 1, 5, 6], dtype=torch.int64)

emfx.write("conv.emfx", out)
print("wrote conv.emfx with", len(out), "tensors")
