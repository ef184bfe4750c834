/* model_recurrent.c — the recurrent mixers of hybrid models, one function per
 * family, written against backend.h like the rest of the forward pass
 * (model.c calls model_recurrent_mixer where a layer's mixer is not attention).
 * Each reads the normed rows in m->xb and leaves the mixer's output there;
 * the recurrent ops walk each sequence's rows in order from its state, so a
 * varlen batch of many sequences is one call per op.
 *
 *   shortconv (lfm2): [B, C, x] = xb·in_projᵀ; y = C ⊙ conv(B ⊙ x) with the
 *   last k-1 values of B ⊙ x carried as the state; out = y·out_projᵀ. */
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

int model_recurrent_mixer(model *m, const layer *ly, int T, float *const *states, llc_err *err) {
    switch (ly->mixer) {
    case MIX_SHORTCONV: return shortconv(m, ly, T, states, err);
    default: return llc_fail(err, LLC_ERR_UNSUPPORTED, "layer mixer %d has no forward pass", (int)ly->mixer);
    }
}
