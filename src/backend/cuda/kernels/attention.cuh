// What the general attention kernels (attention.cu, attention_rows.cu) share: an SDPA record's
// geometry.
#ifndef EMBER_CUDA_ATTENTION_CUH
#define EMBER_CUDA_ATTENTION_CUH
#include "prelude.cuh"

// Geometry of one SDPA record; element strides, batch dims right-aligned to the output's batch
// shape with stride 0 where an input is broadcast. Matches attn_geo in cuda_attention.c.
struct attn_geo {
    i64 bshape[8];
    i64 qb[8], kb[8], vb[8], mb[8];
    i64 qs[2], ks[2], vs[2], ms[2]; // row and column strides (mask: 0 on broadcast dims)
    i64 L, S, E, Ev, nbatch;
    double scale;
    int nb, causal, mkind; // mkind: 0 none, 1 bool (true = attend), 2 additive
};
#endif
