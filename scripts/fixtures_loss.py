"""Golden fixtures for the loss functions, computed by PyTorch in f64.

Run: /usr/bin/python3 scripts/fixtures_loss.py   (writes tests/fixtures/loss.emfx)

Per case <c>: inputs <c>.in<i>; <c>.meta = [has mean, has sum, has none, has batchmean,
wrt in0, wrt in1, ...]; per reduction <r>: <c>.<r>.loss, gradients <c>.<r>.g<i> of the loss
(for none: of sum(loss * <c>.none.cot)). The C test (tests/nn/test_loss.c) knows each case's
options by name.
"""
import math

import torch
import torch.nn.functional as F

import emfx

torch.manual_seed(0)
d = torch.float64
t = {}
REDS = ["mean", "sum", "none", "batchmean"]


def case(name, fn, inputs, wrt, reds=("mean", "sum", "none")):
    """fn(*inputs, reduction) -> loss; wrt: which inputs get gradients."""
    meta = [1 if r in reds else 0 for r in REDS] + [1 if w else 0 for w in wrt]
    t[name + ".meta"] = torch.tensor(meta, dtype=torch.int64)
    for i, x in enumerate(inputs):
        t["%s.in%d" % (name, i)] = x
    for r in reds:
        xs = [x.clone().requires_grad_(w) for x, w in zip(inputs, wrt)]
        loss = fn(*xs, r)
        t["%s.%s.loss" % (name, r)] = loss.detach()
        if not any(wrt):
            continue
        if r == "none":
            cot = torch.randn(loss.shape, dtype=d)
            t["%s.none.cot" % name] = cot
            (loss * cot).sum().backward()
        else:
            loss.backward()
        for i, (x, w) in enumerate(zip(xs, wrt)):
            if w:
                g = x.grad if x.grad is not None else torch.zeros_like(x)
                t["%s.%s.g%d" % (name, r, i)] = g


def randint(hi, shape):
    return torch.randint(0, hi, shape, dtype=torch.int64)


# ---- cross-entropy ------------------------------------------------------------------------
x = torch.randn(6, 4, dtype=d)
y = torch.tensor([0, 3, 1, 1, 2, 3])
w = torch.rand(4, dtype=d) + 0.5
case("ce", lambda a, b, r: F.cross_entropy(a, b, reduction=r), [x, y], [True, False])
case("ce_w", lambda a, b, c, r: F.cross_entropy(a, b, weight=c, reduction=r), [x, y, w],
     [True, False, False])
case("ce_ign", lambda a, b, r: F.cross_entropy(a, b, ignore_index=1, reduction=r), [x, y],
     [True, False])
yi = torch.tensor([0, -100, 1, 2, -100, 3])
case("ce_ign100", lambda a, b, r: F.cross_entropy(a, b, reduction=r), [x, yi], [True, False])
case("ce_ls", lambda a, b, r: F.cross_entropy(a, b, label_smoothing=0.2, reduction=r), [x, y],
     [True, False])
case("ce_ls_w_ign", lambda a, b, c, r: F.cross_entropy(a, b, weight=c, ignore_index=3,
                                                      label_smoothing=0.15, reduction=r),
     [x, y, w], [True, False, False])
x4 = torch.randn(2, 3, 4, 2, dtype=d)
y4 = randint(3, (2, 4, 2))
y4[0, 1, 1] = 0
w3 = torch.rand(3, dtype=d) + 0.5
case("ce_nd", lambda a, b, c, r: F.cross_entropy(a, b, weight=c, ignore_index=0, reduction=r),
     [x4, y4, w3], [True, False, False])
case("ce_nd_ls", lambda a, b, r: F.cross_entropy(a, b, label_smoothing=0.3, reduction=r),
     [x4, y4], [True, False])
p = torch.softmax(torch.randn(5, 4, dtype=d), 1)
x5 = torch.randn(5, 4, dtype=d)
case("ce_prob", lambda a, b, r: F.cross_entropy(a, b, reduction=r), [x5, p], [True, True])
case("ce_prob_ls_w", lambda a, b, c, r: F.cross_entropy(a, b, weight=c, label_smoothing=0.1,
                                                       reduction=r),
     [x5, p, w], [True, True, False])
p3 = torch.softmax(torch.randn(2, 3, 4, dtype=d), 1)
x3 = torch.randn(2, 3, 4, dtype=d)
case("ce_prob_nd", lambda a, b, r: F.cross_entropy(a, b, reduction=r), [x3, p3], [True, True])
xu = torch.randn(5, dtype=d)
case("ce_unb", lambda a, b, r: F.cross_entropy(a, b, reduction=r), [xu, torch.tensor(2)],
     [True, False])
case("ce_allign", lambda a, b, r: F.cross_entropy(a, b, reduction=r),
     [x[:3].clone(), torch.tensor([-100, -100, -100])], [True, False])

# ---- NLL ----------------------------------------------------------------------------------
lp = torch.randn(6, 4, dtype=d)
case("nll_w_ign", lambda a, b, c, r: F.nll_loss(a, b, weight=c, ignore_index=2, reduction=r),
     [lp, y, w], [True, False, False])
case("nll_nd", lambda a, b, r: F.nll_loss(a, b, reduction=r), [x4, y4], [True, False])

# ---- regression ---------------------------------------------------------------------------
a = torch.randn(3, 4, dtype=d)
b = torch.randn(3, 4, dtype=d)
b[0, 0] = a[0, 0] + 0.3  # inside the quadratic zones
b[1, 1] = a[1, 1] - 0.6
case("mse", lambda u, v, r: F.mse_loss(u, v, reduction=r), [a, b], [True, True])
case("l1", lambda u, v, r: F.l1_loss(u, v, reduction=r), [a, b], [True, True])
case("sl1", lambda u, v, r: F.smooth_l1_loss(u, v, reduction=r), [a, b], [True, True])
case("sl1_b", lambda u, v, r: F.smooth_l1_loss(u, v, beta=0.5, reduction=r), [a, b],
     [True, True])
case("sl1_b0", lambda u, v, r: F.smooth_l1_loss(u, v, beta=0.0, reduction=r), [a, b],
     [True, True])
case("huber", lambda u, v, r: F.huber_loss(u, v, reduction=r), [a, b], [True, True])
case("huber_d", lambda u, v, r: F.huber_loss(u, v, delta=0.7, reduction=r), [a, b],
     [True, True])

# ---- binary cross-entropy -----------------------------------------------------------------
pr = torch.sigmoid(torch.randn(3, 4, dtype=d))
tg = torch.rand(3, 4, dtype=d)
tg[0] = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=d)
bw = torch.rand(4, dtype=d) + 0.5
try:  # PyTorch differentiates BCE's target only in some versions
    F.binary_cross_entropy(pr, tg.clone().requires_grad_()).backward()
    bce_t = True
except RuntimeError:
    bce_t = False
case("bce", lambda u, v, r: F.binary_cross_entropy(u, v, reduction=r), [pr, tg], [True, bce_t])
case("bce_w", lambda u, v, c, r: F.binary_cross_entropy(u, v, weight=c, reduction=r),
     [pr, tg, bw], [True, bce_t, False])
lg = torch.randn(3, 4, dtype=d) * 3
pw = torch.rand(4, dtype=d) * 3 + 0.2
case("bcel", lambda u, v, r: F.binary_cross_entropy_with_logits(u, v, reduction=r), [lg, tg],
     [True, True])
case("bcel_w_pw", lambda u, v, c, e, r: F.binary_cross_entropy_with_logits(
    u, v, weight=c, pos_weight=e, reduction=r), [lg, tg, bw, pw], [True, True, False, False])
case("bcel_pw", lambda u, v, e, r: F.binary_cross_entropy_with_logits(
    u, v, pos_weight=e, reduction=r), [lg, tg, pw], [True, True, False])
ex = torch.tensor([[100.0, -100.0, 100.0, -100.0], [80.0, -80.0, 0.0, 40.0]], dtype=d)
et = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.3, 0.7, 1.0, 0.0]], dtype=d)
case("bcel_ext", lambda u, v, r: F.binary_cross_entropy_with_logits(u, v, reduction=r), [ex, et],
     [True, True])
case("bcel_ext_pw", lambda u, v, e, r: F.binary_cross_entropy_with_logits(
    u, v, pos_weight=e, reduction=r), [ex, et, pw], [True, True, False])

# ---- KL divergence ------------------------------------------------------------------------
ki = torch.log_softmax(torch.randn(3, 5, dtype=d), 1)
kt = torch.softmax(torch.randn(3, 5, dtype=d), 1)
case("kl", lambda u, v, r: F.kl_div(u, v, reduction=r), [ki, kt], [True, True], REDS)
case("kl_log", lambda u, v, r: F.kl_div(u, v, reduction=r, log_target=True), [ki, kt.log()],
     [True, True], REDS)
kz = kt.clone()
kz[0, 1] = 0.0
case("kl_zero", lambda u, v, r: F.kl_div(u, v, reduction=r), [ki, kz], [True, False], REDS)

# ---- pairwise and triplet -----------------------------------------------------------------
c1 = torch.randn(5, 6, dtype=d)
c2 = torch.randn(5, 6, dtype=d)
c2[1] = c1[1] * 0.8 + 0.2 * c2[1]
cy = torch.tensor([1, -1, -1, 1, -1])
case("cos", lambda u, v, e, r: F.cosine_embedding_loss(u, v, e, reduction=r), [c1, c2, cy],
     [True, True, False])
case("cos_m", lambda u, v, e, r: F.cosine_embedding_loss(u, v, e, margin=-0.2, reduction=r),
     [c1, c2, cy], [True, True, False])
case("cos_unb", lambda u, v, e, r: F.cosine_embedding_loss(u, v, e, reduction=r),
     [c1[0].clone(), c2[0].clone(), torch.tensor(1)], [True, True, False])
m1 = torch.randn(7, dtype=d)
m2 = torch.randn(7, dtype=d)
my = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 1.0], dtype=d)
case("rank", lambda u, v, e, r: F.margin_ranking_loss(u, v, e, reduction=r), [m1, m2, my],
     [True, True, False])
case("rank_m", lambda u, v, e, r: F.margin_ranking_loss(u, v, e, margin=0.5, reduction=r),
     [m1, m2, my], [True, True, False])
ta = torch.randn(4, 5, dtype=d)
tp = torch.randn(4, 5, dtype=d)
tn = torch.randn(4, 5, dtype=d)
case("trip", lambda u, v, e, r: F.triplet_margin_loss(u, v, e, reduction=r), [ta, tp, tn],
     [True, True, True])
case("trip_p1", lambda u, v, e, r: F.triplet_margin_loss(u, v, e, margin=3.0, p=1, reduction=r),
     [ta, tp, tn], [True, True, True])
case("trip_swap", lambda u, v, e, r: F.triplet_margin_loss(u, v, e, margin=2.0, p=3, eps=1e-3,
                                                           swap=True, reduction=r),
     [ta, tp, tn], [True, True, True])

# ---- likelihoods --------------------------------------------------------------------------
pi = torch.randn(3, 4, dtype=d)
pt = torch.tensor([[0.0, 1.0, 2.0, 3.0], [5.0, 0.5, 1.5, 7.0], [0.0, 4.0, 2.5, 1.0]], dtype=d)
case("pois", lambda u, v, r: F.poisson_nll_loss(u, v, reduction=r), [pi, pt], [True, True])
pr2 = torch.rand(3, 4, dtype=d) * 3 + 0.1
case("pois_rate", lambda u, v, r: F.poisson_nll_loss(u, v, log_input=False, eps=1e-3,
                                                     reduction=r), [pr2, pt], [True, True])
pt2 = pt.clone() + 0.25
case("pois_full", lambda u, v, r: F.poisson_nll_loss(u, v, full=True, reduction=r), [pi, pt2],
     [True, True])
gi = torch.randn(3, 4, dtype=d)
gt = torch.randn(3, 4, dtype=d)
gv = torch.rand(3, 4, dtype=d) + 0.1
gv[0, 0] = 1e-8  # clamped to eps
case("gauss", lambda u, v, s, r: F.gaussian_nll_loss(u, v, s, reduction=r), [gi, gt, gv],
     [True, True, True])
case("gauss_full", lambda u, v, s, r: F.gaussian_nll_loss(u, v, s, full=True, eps=1e-2,
                                                          reduction=r), [gi, gt, gv],
     [True, True, True])
case("gauss_short", lambda u, v, s, r: F.gaussian_nll_loss(u, v, s, reduction=r),
     [gi, gt, gv[:, 0].clone()], [True, True, True])
case("gauss_last1", lambda u, v, s, r: F.gaussian_nll_loss(u, v, s, reduction=r),
     [gi, gt, gv[:, :1].clone()], [True, True, True])

# ---- CTC (gradients through log_softmax of the logits: PyTorch's own gradient with respect
# to log_probs assumes that normalisation) ------------------------------------------------
T, N, C = 6, 3, 5
cl = torch.randn(T, N, C, dtype=d)
ctg = torch.tensor([[1, 2, 2], [3, 1, 0], [4, 0, 0]])
il = torch.tensor([6, 5, 4])
tl = torch.tensor([3, 2, 1])


def ctc(u, tg_, il_, tl_, r, **kw):
    return F.ctc_loss(torch.log_softmax(u, -1), tg_, il_, tl_, reduction=r, **kw)


case("ctc", lambda u, v, e, f, r: ctc(u, v, e, f, r), [cl, ctg, il, tl],
     [True, False, False, False])
ccat = torch.tensor([1, 2, 2, 3, 1, 4])
case("ctc_cat", lambda u, v, e, f, r: ctc(u, v, e, f, r), [cl, ccat, il, tl],
     [True, False, False, False])
cb = torch.tensor([[0, 2, 2], [3, 1, 1], [1, 1, 1]])
case("ctc_blank4_empty", lambda u, v, e, f, r: ctc(u, v, e, f, r, blank=4), [cl, cb, il,
                                                                            torch.tensor([3, 0, 2])],
     [True, False, False, False])
ci = torch.tensor([[2, 2, 2], [3, 1, 1], [1, 2, 3]])
il_bad = torch.tensor([3, 6, 6])
case("ctc_inf", lambda u, v, e, f, r: ctc(u, v, e, f, r), [cl, ci, il_bad, tl.new_tensor([3, 3, 3])],
     [False, False, False, False])
case("ctc_zinf", lambda u, v, e, f, r: ctc(u, v, e, f, r, zero_infinity=True),
     [cl, ci, il_bad, tl.new_tensor([3, 3, 3])], [True, False, False, False])
cu = torch.randn(5, 4, dtype=d)
case("ctc_unb", lambda u, v, e, f, r: ctc(u, v, e, f, r), [cu, torch.tensor([1, 3]),
                                                           torch.tensor(5), torch.tensor(2)],
     [True, False, False, False])

emfx.write("loss.emfx", t)
print(len(t), "tensors")
