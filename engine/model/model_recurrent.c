/* model_recurrent.c — the recurrent mixers of hybrid models, one function per
 * family, written against backend.h like the rest of the forward pass
 * (model.c calls model_recurrent_mixer where a layer's mixer is not attention).
 * Each reads the normed rows in m->xb and leaves the mixer's output there;
 * the recurrent ops walk each sequence's rows in order from its state, so a
 * varlen batch of many sequences is one call per op.
 *
 *   shortconv (lfm2): [B, C, x] = xb·in_projᵀ; y = C ⊙ conv(B ⊙ x) with the
 *   last k-1 values of B ⊙ x carried as the state; out = y·out_projᵀ.
 *
 *   deltanet (qwen35): qkv = SiLU(conv(xb·attn_qkvᵀ)) (the convolution's
 *   window carried), then the gated delta rule per value head (backend.h's
 *   delta_net: decay from alpha, write strength from beta, a [head_v × head_k]
 *   matrix carried), each head's output RMS-normed and times SiLU(xb·attn_gateᵀ),
 *   out = that·ssm_outᵀ. State: the convolution's window, then the matrices.
 *
 *   mamba2 (granitehybrid): [z, xBC, dt] = xb·ssm_inᵀ; xBC = SiLU(conv(xBC) +
 *   bias) (window carried); y = the selective scan over x with B, C, dt
 *   (backend.h's ssm_scan, a [head_dim × d_state] matrix per head carried)
 *   plus D·x; y ⊙ SiLU(z), RMS-normed per group; out = that·ssm_outᵀ. */
#include "engine/model/model_internal.h"

#define OP(call)                                                                        \
    do {                                                                                \
        int op_rc_ = (call);                                                            \
        if (op_rc_) return llc_fail(err, op_rc_, "backend op %s failed", #call);        \
    } while (0)

static int shortconv(model *m, const layer *ly, int T, float *const *states, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const int ch = ly->conv_ch;
    const size_t n = (size_t)T * ch;
    float *bcx[3] = {m->rb[0], m->rb[1], m->rb[2]};
    if (op->matmul_multi) {
        const bk_weight *w[3] = {&ly->rec_in[0], &ly->rec_in[1], &ly->rec_in[2]};
        OP(op->matmul_multi(c, w, 3, m->xb, T, bcx));
    } else {
        for (int i = 0; i < 3; i++) OP(op->matmul(c, &ly->rec_in[i], m->xb, T, bcx[i]));
    }
    OP(op->mul(c, bcx[0], bcx[2], n));                                   /* B ⊙ x */
    OP(op->conv1d_state(c, bcx[0], ch, &ly->conv_w, NULL, states, false, bcx[2]));
    OP(op->mul(c, bcx[2], bcx[1], n));                                   /* C ⊙ conv */
    OP(op->matmul(c, &ly->rec_out, bcx[2], T, m->xb));
    return 0;
}

static int deltanet(model *m, const layer *ly, int T, int n_seqs, float *const *states, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const bk_delta *d = &ly->delta;
    const int conv_dim = ly->conv_ch, nv = d->n_v_heads;
    float *qkv = m->rb[0], *conv = m->rb[1], *z = m->rb[2], *alpha = m->rb[3], *beta = m->rb[4], *o = m->rb[5];
    const bk_weight *w[4] = {&ly->rec_in[0], &ly->rec_z, &ly->ssm_alpha, &ly->ssm_beta};
    float *const y[4] = {qkv, z, alpha, beta};
    if (op->matmul_multi) OP(op->matmul_multi(c, w, 4, m->xb, T, y));
    else
        for (int i = 0; i < 4; i++) OP(op->matmul(c, w[i], m->xb, T, y[i]));
    OP(op->conv1d_state(c, qkv, conv_dim, &ly->conv_w, ly->conv_b.data ? &ly->conv_b : NULL, states, true, conv));
    for (int s = 0; s < n_seqs; s++) m->h_aux_state[s] = states[s] + (size_t)(ly->conv_k - 1) * conv_dim;
    OP(op->delta_net(c, conv, alpha, beta, &ly->dt_bias, &ly->ssm_a, m->h_aux_state, d, o));
    OP(op->rmsnorm(c, o, &ly->ssm_norm, o, T * nv, d->head_v, m->hp.norm_eps));
    OP(op->silu_mul(c, z, o, (size_t)T * nv * d->head_v));
    OP(op->matmul(c, &ly->rec_out, z, T, m->xb));
    return 0;
}

static int mamba2(model *m, const layer *ly, int T, int n_seqs, float *const *states, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const bk_ssm *g = &ly->ssm;
    const int conv_dim = ly->conv_ch, inner = g->n_heads * g->head_dim;
    float *z = m->rb[0], *xbc = m->rb[1], *dt = m->rb[2], *conv = m->rb[3], *y = m->rb[4];
    const bk_weight *w[3] = {&ly->rec_in[0], &ly->rec_in[1], &ly->rec_in[2]};
    float *const out[3] = {z, xbc, dt};
    if (op->matmul_multi) OP(op->matmul_multi(c, w, 3, m->xb, T, out));
    else
        for (int i = 0; i < 3; i++) OP(op->matmul(c, w[i], m->xb, T, out[i]));
    OP(op->conv1d_state(c, xbc, conv_dim, &ly->conv_w, ly->conv_b.data ? &ly->conv_b : NULL, states, true, conv));
    for (int s = 0; s < n_seqs; s++) m->h_aux_state[s] = states[s] + (size_t)(ly->conv_k - 1) * conv_dim;
    OP(op->ssm_scan(c, conv, dt, &ly->dt_bias, &ly->ssm_a, &ly->ssm_d, m->h_aux_state, g, y));
    OP(op->silu_mul(c, z, y, (size_t)T * inner));
    if (ly->ssm_norm.data) OP(op->rmsnorm_groups(c, z, &ly->ssm_norm, T, inner, g->n_groups, m->hp.norm_eps));
    OP(op->matmul(c, &ly->rec_out, z, T, m->xb));
    return 0;
}

int model_recurrent_mixer(model *m, const layer *ly, int T, int n_seqs, float *const *states, llc_err *err) {
    switch (ly->mixer) {
    case MIX_SHORTCONV: return shortconv(m, ly, T, states, err);
    case MIX_DELTANET: return deltanet(m, ly, T, n_seqs, states, err);
    case MIX_MAMBA2: return mamba2(m, ly, T, n_seqs, states, err);
    default: return llc_fail(err, LLC_ERR_UNSUPPORTED, "layer mixer %d has no forward pass", (int)ly->mixer);
    }
}
