"""Golden fixtures for the sequence layers (tests/nn/test_seq.c): multi-head attention (self,
cross, grouped-query against a manual reference), transformer layers and stacks, sinusoidal and
rotary encodings, RNN/LSTM/GRU. Everything in f64 with fixed seeds. For each case the file holds
the inputs, every parameter under its PyTorch state_dict name ("<case>.p.<name>"), the outputs,
the loss seeds ("<case>.s*": loss = sum(out * seed)) and the gradients of the inputs and of the
parameters ("<case>.g.<name>").

Run with Debian's Python (torch 1.13): /usr/bin/python3 scripts/fixtures_seq.py
"""
import math

import torch
import torch.nn as nn

from emfx import write

torch.set_default_dtype(torch.float64)
OUT = {}


def randomize(mod, scale=0.5):
    """Non-trivial values for every parameter (PyTorch zero-initialises some biases)."""
    with torch.no_grad():
        for p in mod.parameters():
            p.uniform_(-scale, scale)


def put_params(case, mod, grads=True):
    OUT[f"{case}.nparams"] = sum(p.numel() for p in mod.parameters())
    for name, p in mod.named_parameters():
        OUT[f"{case}.p.{name}"] = p
        if grads:
            OUT[f"{case}.g.{name}"] = p.grad if p.grad is not None else torch.zeros_like(p)


def leaf(case, name, shape):
    t = torch.randn(*shape).requires_grad_(True)
    OUT[f"{case}.{name}"] = t
    return t


def seed_loss(case, outs):
    """loss = sum_i sum(outs[i] * s_i), the seeds stored as <case>.s0, .s1, ..."""
    loss = 0
    for i, o in enumerate(outs):
        s = torch.randn_like(o)
        OUT[f"{case}.s{i}"] = s
        loss = loss + (o * s).sum()
    loss.backward()


N, L, S, E, H = 2, 5, 4, 8, 2

# ---- MHA self-attention: packed in_proj, key padding mask + causal bool mask ------------------
torch.manual_seed(1)
mha = nn.MultiheadAttention(E, H, batch_first=True)
randomize(mha)
x = leaf("mha_self", "x", (N, L, E))
kpm = torch.zeros(N, L, dtype=torch.bool)
kpm[1, 3:] = True  # batch 1 ignores keys 3, 4
causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
y, w = mha(x, x, x, key_padding_mask=kpm, attn_mask=causal)
OUT["mha_self.kpm"] = kpm
OUT["mha_self.y"] = y
OUT["mha_self.w"] = w
seed_loss("mha_self", [y])
OUT["mha_self.gx"] = x.grad
put_params("mha_self", mha)

# ---- MHA cross-attention: kdim/vdim (separate projections), float [N*H, L, S] mask + kpm -------
torch.manual_seed(2)
mha = nn.MultiheadAttention(E, H, batch_first=True, kdim=6, vdim=7)
randomize(mha)
q = leaf("mha_cross", "q", (N, L, E))
k = leaf("mha_cross", "k", (N, S, 6))
v = leaf("mha_cross", "v", (N, S, 7))
am = torch.randn(N * H, L, S)
kpm = torch.zeros(N, S, dtype=torch.bool)
kpm[0, 0] = True
y, w = mha(q, k, v, key_padding_mask=kpm, attn_mask=am)
OUT["mha_cross.am"] = am
OUT["mha_cross.kpm"] = kpm
OUT["mha_cross.y"] = y
OUT["mha_cross.w"] = w
seed_loss("mha_cross", [y])
OUT["mha_cross.gq"] = q.grad
OUT["mha_cross.gk"] = k.grad
OUT["mha_cross.gv"] = v.grad
put_params("mha_cross", mha)

# ---- grouped-query attention: manual reference (4 query heads share 2 k/v heads) ---------------
torch.manual_seed(3)
Hq, Hkv, D = 4, 2, 2
params = {
    "q_proj_weight": torch.empty(E, E).uniform_(-0.5, 0.5),
    "k_proj_weight": torch.empty(Hkv * D, E).uniform_(-0.5, 0.5),
    "v_proj_weight": torch.empty(Hkv * D, E).uniform_(-0.5, 0.5),
    "in_proj_bias": torch.empty(E + 2 * Hkv * D).uniform_(-0.5, 0.5),
    "out_proj.weight": torch.empty(E, E).uniform_(-0.5, 0.5),
    "out_proj.bias": torch.empty(E).uniform_(-0.5, 0.5),
}
for p in params.values():
    p.requires_grad_(True)
x = leaf("gqa", "x", (N, L, E))
kpm = torch.zeros(N, L, dtype=torch.bool)
kpm[0, 4] = True
b = params["in_proj_bias"]
qh = (x @ params["q_proj_weight"].T + b[:E]).view(N, L, Hq, D).transpose(1, 2)
kh = (x @ params["k_proj_weight"].T + b[E:E + Hkv * D]).view(N, L, Hkv, D).transpose(1, 2)
vh = (x @ params["v_proj_weight"].T + b[E + Hkv * D:]).view(N, L, Hkv, D).transpose(1, 2)
kh = kh.repeat_interleave(Hq // Hkv, dim=1)
vh = vh.repeat_interleave(Hq // Hkv, dim=1)
scores = qh @ kh.transpose(-2, -1) / math.sqrt(D)
ignore = torch.triu(torch.ones(L, L, dtype=torch.bool), 1) | kpm[:, None, None, :]
scores = scores.masked_fill(ignore, float("-inf"))
att = torch.softmax(scores, -1)
o = (att @ vh).transpose(1, 2).reshape(N, L, E)
y = o @ params["out_proj.weight"].T + params["out_proj.bias"]
OUT["gqa.kpm"] = kpm
OUT["gqa.y"] = y
OUT["gqa.w"] = att.mean(1)
seed_loss("gqa", [y])
OUT["gqa.gx"] = x.grad
OUT["gqa.nparams"] = sum(p.numel() for p in params.values())
for name, p in params.items():
    OUT[f"gqa.p.{name}"] = p
    OUT[f"gqa.g.{name}"] = p.grad


# ---- transformer layers and stacks (eval mode: dropout off) ------------------------------------
def tf_case(case, mod, inputs, kwargs, param_grads):
    randomize(mod)
    mod.eval()
    y = mod(*inputs, **kwargs)
    OUT[f"{case}.y"] = y
    seed_loss(case, [y])
    put_params(case, mod, grads=param_grads)


FF = 8
tkpm = torch.zeros(N, L, dtype=torch.bool)
tkpm[1, 4] = True
mkpm = torch.zeros(N, S, dtype=torch.bool)
mkpm[0, 3] = True
OUT["tf.tkpm"] = tkpm
OUT["tf.mkpm"] = mkpm
for case, norm_first, act, grads in [("enc_post", False, "relu", True),
                                     ("enc_pre", True, "gelu", False)]:
    torch.manual_seed(10)
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.1, activation=act,
                                       norm_first=norm_first, batch_first=True)
    src = leaf(case, "x", (N, L, E))
    tf_case(case, layer, [src], dict(src_mask=causal, src_key_padding_mask=tkpm), grads)
    OUT[f"{case}.gx"] = src.grad

for case, norm_first, act, grads in [("dec_post", False, "relu", False),
                                     ("dec_pre", True, "gelu", True)]:
    torch.manual_seed(11)
    layer = nn.TransformerDecoderLayer(E, H, FF, dropout=0.1, activation=act,
                                       norm_first=norm_first, batch_first=True)
    tgt = leaf(case, "x", (N, L, E))
    mem = leaf(case, "m", (N, S, E))
    tf_case(case, layer, [tgt, mem],
            dict(tgt_mask=causal, tgt_key_padding_mask=tkpm, memory_key_padding_mask=mkpm), grads)
    OUT[f"{case}.gx"] = tgt.grad
    OUT[f"{case}.gm"] = mem.grad

torch.manual_seed(12)
enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, batch_first=True), 2,
                            norm=nn.LayerNorm(E), enable_nested_tensor=False)
src = leaf("enc_stack", "x", (N, L, E))
tf_case("enc_stack", enc, [src], dict(src_key_padding_mask=tkpm), False)
OUT["enc_stack.gx"] = src.grad

torch.manual_seed(13)
dec = nn.TransformerDecoder(
    nn.TransformerDecoderLayer(E, H, FF, batch_first=True, norm_first=True), 2)
tgt = leaf("dec_stack", "x", (N, L, E))
mem = leaf("dec_stack", "m", (N, S, E))
tf_case("dec_stack", dec, [tgt, mem], dict(tgt_mask=causal), False)
OUT["dec_stack.gx"] = tgt.grad
OUT["dec_stack.gm"] = mem.grad

# ---- positional encodings ----------------------------------------------------------------------
torch.manual_seed(20)
max_len, d_pe = 16, 7  # odd d_model: the last sin column has no cos partner
pe = torch.zeros(max_len, d_pe)
pos = torch.arange(max_len).unsqueeze(1).double()
div = torch.exp(torch.arange(0, d_pe, 2).double() * (-math.log(10000.0) / d_pe))
pe[:, 0::2] = torch.sin(pos * div)
pe[:, 1::2] = torch.cos(pos * div[: d_pe // 2])
OUT["sin.table"] = pe
x = torch.randn(N, L, d_pe)
OUT["sin.x"] = x
OUT["sin.y3"] = x + pe[3:3 + L]  # offset 3


def rope_ref(t, offset, base=10000.0):
    d = t.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, d, 2).double() / d)
    p = torch.arange(offset, offset + t.shape[-2]).double()
    f = torch.outer(p, inv)
    emb = torch.cat([f, f], -1)
    t1, t2 = t[..., : d // 2], t[..., d // 2:]
    return t * emb.cos() + torch.cat([-t2, t1], -1) * emb.sin()


x = leaf("rope", "x", (N, H, L, 4))
y = rope_ref(x, 3)
OUT["rope.y"] = y
seed_loss("rope", [y])
OUT["rope.gx"] = x.grad

# ---- recurrent layers: 2 layers, bidirectional, batch first, initial states --------------------
I, HID, T = 3, 4, 5
for case, cls, kw in [("rnn", nn.RNN, {}), ("lstm", nn.LSTM, {}), ("gru", nn.GRU, {}),
                      ("rnn_relu", nn.RNN, {"nonlinearity": "relu"})]:
    torch.manual_seed(30)
    if case == "rnn_relu":  # one layer, sequence first, no initial state
        mod = cls(I, HID, batch_first=False, **kw)
        x = leaf(case, "x", (T, N, I))
        out, hn = mod(x)
        OUT[f"{case}.y"] = out
        OUT[f"{case}.hn"] = hn
        seed_loss(case, [out, hn])
        OUT[f"{case}.gx"] = x.grad
        put_params(case, mod)
        continue
    mod = cls(I, HID, num_layers=2, bidirectional=True, batch_first=True, **kw)
    x = leaf(case, "x", (N, T, I))
    h0 = leaf(case, "h0", (4, N, HID))
    if cls is nn.LSTM:
        c0 = leaf(case, "c0", (4, N, HID))
        out, (hn, cn) = mod(x, (h0, c0))
        OUT[f"{case}.cn"] = cn
        outs = [out, hn, cn]
    else:
        out, hn = mod(x, h0)
        outs = [out, hn]
    OUT[f"{case}.y"] = out
    OUT[f"{case}.hn"] = hn
    seed_loss(case, outs)
    OUT[f"{case}.gx"] = x.grad
    OUT[f"{case}.gh0"] = h0.grad
    if cls is nn.LSTM:
        OUT[f"{case}.gc0"] = c0.grad
    put_params(case, mod)

write("seq.emfx", OUT)
print(len(OUT), "tensors")
