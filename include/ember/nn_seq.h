/* Ember nn: attention, transformer, positional encodings and recurrent layers. Included by nn.h.
 * Layout: every layer here takes batch-first input ([N, L, E]) by default, unlike PyTorch,
 * whose default is batch_first=False; set seq_first for PyTorch's [L, N, E]. Parameters are
 * named as PyTorch's state_dict names them, so PyTorch weights load by name. Guide:
 * docs/sequence.md. */
#ifndef EMBER_NN_SEQ_H
#define EMBER_NN_SEQ_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- multi-head attention ---------------------------------------------------------------- */

/* Multi-head attention options; zero means PyTorch's default. */
typedef struct em_mha_cfg {
    int64_t embed_dim, num_heads;
    int64_t num_kv_heads; /* grouped-query attention: key/value heads (0: num_heads); must divide
                           * num_heads, each k/v head serves num_heads/num_kv_heads query heads */
    int64_t kdim, vdim;   /* feature sizes of key and value inputs (0: embed_dim) */
    double dropout;       /* on the attention weights, training mode only */
    bool no_bias;         /* no in_proj_bias and no out_proj.bias (PyTorch's bias=False) */
    bool seq_first;       /* inputs [L, N, E] (PyTorch's default); default here is [N, L, E] */
    bool rotary;          /* apply rotary encoding (em_rope) to q and k after projection */
    double rope_base;     /* rotary base (0: 10000) */
} em_mha_cfg;

/* Multi-head attention like torch.nn.MultiheadAttention. Parameters: in_proj_weight [3E, E]
 * when kdim == vdim == embed_dim and no grouped-query heads, else q_proj_weight [E, E],
 * k_proj_weight [Hkv*D, kdim], v_proj_weight [Hkv*D, vdim]; in_proj_bias [E + 2*Hkv*D]; child
 * out_proj (weight [E, E], bias [E]). Init as PyTorch: Xavier-uniform projections, zero biases.
 * em_forward with one input is self-attention; em_forward_n with (query, key, value) is
 * cross-attention. */
EM_API em_module *em_mha_new(em_mha_cfg cfg, em_device dev);

/* Keys and values seen so far, for incremental decoding. The caller owns it: start from
 * (em_kv_cache){0}; each forward appends the new projected keys/values and attends over all of
 * them; em_kv_cache_clear releases the tensors. k: [N, Hkv, S, D], v: [N, Hkv, S, Dv]. */
typedef struct em_kv_cache {
    em_tensor *k, *v;
    int64_t len; /* S: positions cached (also the rotary position offset of the next call) */
} em_kv_cache;
EM_API void em_kv_cache_clear(em_kv_cache *cache);

/* Per-call attention options (all optional). Masks follow PyTorch: key_padding_mask [N, S]
 * bool, true = that key is ignored (or float, added); attn_mask [L, S] or [N*H, L, S], bool
 * (true = not allowed to attend) or float (added to the scores). causal masks key j for query
 * i when j > i + (S - L) (so with a cache, new queries see every cached key). Rows with every
 * key masked give NaN, as PyTorch. */
typedef struct em_mha_args {
    const em_tensor *key_padding_mask;
    const em_tensor *attn_mask;
    bool causal;
    em_kv_cache *cache;  /* NULL: no cache */
    em_tensor **weights; /* when not NULL receives the attention weights [N, L, S], averaged
                          * over heads (or [N, H, L, S] with per_head_weights) */
    bool per_head_weights;
} em_mha_args;

/* query [N, L, E] (or [L, E] unbatched), key [N, S, kdim], value [N, S, vdim]; key/value NULL
 * means self-attention (key = value = query). Returns [N, L, E]. */
EM_API em_tensor *em_mha_forward(em_module *mha, const em_tensor *query, const em_tensor *key,
                                 const em_tensor *value, em_mha_args args);

/* ---- positional encodings ---------------------------------------------------------------- */

/* The "Attention is all you need" table [max_len, d_model]: pe[p, 2i] = sin(p / 10000^(2i/d)),
 * pe[p, 2i+1] = cos(p / 10000^(2i/d)) (odd d_model allowed). */
EM_API em_tensor *em_sinusoidal_table(int64_t max_len, int64_t d_model, em_dtype dt, em_device dev);

typedef struct em_posenc_cfg {
    int64_t d_model;
    int64_t max_len; /* 0: 5000 */
    double dropout;  /* applied after the addition in training mode (0: none) */
    bool seq_first;  /* input [L, N, E] instead of [N, L, E] */
} em_posenc_cfg;
/* Module adding the sinusoidal table to its input; buffer "pe" [max_len, d_model]. */
EM_API em_module *em_sinusoidal_pe_new(em_posenc_cfg cfg, em_device dev);
/* The same with positions starting at offset (incremental decoding). */
EM_API em_tensor *em_sinusoidal_pe_forward(em_module *pe, const em_tensor *x, int64_t offset);

/* Rotary position embedding of x [..., L, D] (D even), positions offset..offset+L-1, base 0
 * meaning 10000. Half-split layout (GPT-NeoX / Hugging Face LLaMA rotate_half): element i pairs
 * with i + D/2, angle (p) * base^(-2i/D); out = x * cos + cat(-x2, x1) * sin. Differentiable. */
EM_API em_tensor *em_rope(const em_tensor *x, int64_t offset, double base);

/* ---- transformer ------------------------------------------------------------------------- */

typedef enum em_ffn_activation {
    EM_FFN_RELU = 0,
    EM_FFN_GELU = 1, /* erf form */
} em_ffn_activation;

/* Position-wise feed-forward linear2(dropout(act(linear1(x)))); children linear1 [d_ff, d],
 * linear2 [d, d_ff]. dropout is the plain probability (0: none). */
typedef struct em_ffn_cfg {
    int64_t d_model, dim_feedforward;
    em_ffn_activation activation;
    double dropout;
} em_ffn_cfg;
EM_API em_module *em_feed_forward_new(em_ffn_cfg cfg, em_device dev);

/* Transformer layer options; zero means PyTorch's default: dim_feedforward 2048, dropout 0.1
 * (no_dropout for none), relu, layer_norm_eps 1e-5, post-norm, batch first (seq_first for
 * PyTorch's default [L, N, E]). */
typedef struct em_transformer_cfg {
    int64_t d_model, nhead;
    int64_t dim_feedforward;
    double dropout;
    bool no_dropout;
    em_ffn_activation activation;
    double layer_norm_eps;
    bool norm_first; /* pre-norm: x + block(norm(x)) */
    bool seq_first;
    int64_t num_layers; /* stacks only (at least 1) */
    bool final_norm;    /* stacks only: a LayerNorm "norm" after the last layer */
} em_transformer_cfg;

/* Masks for a transformer call (all optional; PyTorch semantics as in em_mha_args). */
typedef struct em_transformer_masks {
    const em_tensor *src_mask, *src_key_padding_mask; /* encoder self-attention */
    bool src_causal;
    const em_tensor *tgt_mask, *tgt_key_padding_mask; /* decoder self-attention */
    bool tgt_causal;
    const em_tensor *memory_mask, *memory_key_padding_mask; /* decoder cross-attention */
} em_transformer_masks;

/* Layers with PyTorch's names: self_attn (MHA), linear1, linear2, norm1, norm2 and, in the
 * decoder, multihead_attn and norm3. em_forward(enc, src); em_forward_n(dec, {tgt, memory}). */
EM_API em_module *em_transformer_encoder_layer_new(em_transformer_cfg cfg, em_device dev);
EM_API em_module *em_transformer_decoder_layer_new(em_transformer_cfg cfg, em_device dev);
/* Stacks of num_layers identical (independently initialised) layers "layers.0", ... and, with
 * final_norm, "norm". */
EM_API em_module *em_transformer_encoder_new(em_transformer_cfg cfg, em_device dev);
EM_API em_module *em_transformer_decoder_new(em_transformer_cfg cfg, em_device dev);
/* Forward with masks; works on a layer or a stack. */
EM_API em_tensor *em_transformer_encode(em_module *enc, const em_tensor *src,
                                        em_transformer_masks mk);
EM_API em_tensor *em_transformer_decode(em_module *dec, const em_tensor *tgt,
                                        const em_tensor *memory, em_transformer_masks mk);

/* ---- recurrent layers -------------------------------------------------------------------- */

typedef enum em_rnn_nonlinearity {
    EM_RNN_TANH = 0,
    EM_RNN_RELU = 1,
} em_rnn_nonlinearity;

/* RNN/LSTM/GRU options; zero means PyTorch's default (1 layer, bias, unidirectional, no
 * dropout), except the layout: batch first [N, T, I] here (seq_first for [T, N, I]). */
typedef struct em_rnn_cfg {
    int64_t input_size, hidden_size;
    int64_t num_layers;
    em_rnn_nonlinearity nonlinearity; /* RNN only */
    bool no_bias;
    bool seq_first;
    double dropout; /* on the outputs of every layer but the last, training mode only */
    bool bidirectional;
} em_rnn_cfg;

/* Parameters weight_ih_l{k} [G*H, in], weight_hh_l{k} [G*H, H], bias_ih_l{k}, bias_hh_l{k}
 * [G*H] (and the same with _reverse), G = 1 (RNN), 4 (LSTM: gates i, f, g, o), 3 (GRU: r, z,
 * n, with n = tanh(W_in x + b_in + r * (W_hn h + b_hn))); all U(-1/sqrt(H), 1/sqrt(H)). */
EM_API em_module *em_rnn_new(em_rnn_cfg cfg, em_device dev);
EM_API em_module *em_lstm_new(em_rnn_cfg cfg, em_device dev);
EM_API em_module *em_gru_new(em_rnn_cfg cfg, em_device dev);

/* x [N, T, I] (or [T, I] unbatched); h0 and c0 (LSTM only) [layers*dirs, N, H] or NULL for
 * zeros. Returns the output [N, T, dirs*H] (last layer, both directions concatenated); the
 * final states [layers*dirs, N, H] go to *h_n and *c_n when those are not NULL. em_forward_n
 * with (x[, h0[, c0]]) returns the output only. */
EM_API em_tensor *em_rnn_forward(em_module *rnn, const em_tensor *x, const em_tensor *h0,
                                 const em_tensor *c0, em_tensor **h_n, em_tensor **c_n);

#ifdef __cplusplus
}
#endif
#endif
