/* model.c — the forward pass, written once against backend.h, and the paged KV
 * cache's storage (loading is model_load.c). The pass: embed (scaled for gemma),
 * then per layer attention (RMSNorm, QKV with optional biases, optional Q/K norms,
 * RoPE, paged KV, causal attention over everything or a sliding window with
 * optional soft-capping, output projection, optional post-norm, residual) and a
 * gated feed-forward (SwiGLU or GeGLU; or a mixture of experts routed on the
 * host), then the final norm and logits (optionally soft-capped) for the rows
 * that ask for them, and the final norm alone (hidden states, for embeddings)
 * for the rows that ask for that. Q, K and V, and gate and up, read the same
 * input and go to the backend as one call (matmul_multi) where it has one. A
 * backend that can record steps (graph_begin: CUDA graphs) replays a step whose
 * key (step_key: model, cache, buffers, batch shape) it has recorded. */
#include "engine/model/model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/quant.h"
#include "kernels/topk.h"

struct model_kv {
    const model *m;
    uint64_t serial;   /* unique per cache (recorded steps name it) */
    int n_blocks, block_size;
    uint32_t type;     /* element type of K and V */
    size_t *row_bytes; /* [n_layers] one slot's row of the layer's kv_dim elements */
    void **k, **v;     /* [n_layers] -> [n_blocks * block_size] rows (a layer that shares an
                          earlier layer's cache points at it; NULL for a recurrent layer) */
    float **state;     /* [n_state] recurrent-state slots of model_state_bytes each (hybrid models) */
    int n_state;
};

/* Serial numbers of models and caches: a recorded step names the ones it used,
 * and an address can be reused after a free. */
static uint64_t g_serials;

int model_load(const gguf *g, backend *be, model **out, llc_err *err) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    m->be = be;
    m->serial = __atomic_add_fetch(&g_serials, 1, __ATOMIC_RELAXED);
    int rc = model_load_from(g, m, err);
    if (rc) {
        model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* Runs one backend op; its failure (a GPU fault, an unsupported weight type)
 * ends the step with the op's name, instead of surfacing a step later. */
#define OP(call)                                                                        \
    do {                                                                                \
        int op_rc_ = (call);                                                            \
        if (op_rc_) return llc_fail(err, op_rc_, "backend op %s failed", #call);        \
    } while (0)

static void free_activations(model *m) {
    float **bufs[] = {&m->x, &m->xb, &m->q, &m->k, &m->v, &m->att, &m->hb, &m->hb2, &m->xo, &m->logits,
                      &m->router_out, &m->xe, &m->ye, &m->moe_out, &m->ple, &m->ple_proj, &m->ple_l, &m->ple_g};
    for (size_t i = 0; i < LLC_ARRAY_LEN(bufs); i++) {
        if (*bufs[i]) m->be->ops->free(m->be->ctx, *bufs[i]);
        *bufs[i] = NULL;
    }
    free(m->h_router), free(m->h_rows), free(m->h_weights), free(m->h_count);
    free(m->h_all_rows), free(m->h_row_gate), free(m->h_ple_rows);
    m->h_ple_rows = NULL;
    m->h_router = NULL, m->h_rows = NULL, m->h_weights = NULL, m->h_count = NULL;
    m->h_all_rows = NULL, m->h_row_gate = NULL;
    for (int i = 0; i < (int)LLC_ARRAY_LEN(m->rb); i++) {
        if (m->rb[i]) m->be->ops->free(m->be->ctx, m->rb[i]);
        m->rb[i] = NULL;
    }
    free(m->h_q_rows), free(m->h_g_rows);
    m->h_q_rows = m->h_g_rows = NULL;
    m->cap_rows = m->cap_out = 0;
}

void model_free(model *m) {
    if (!m) return;
    free_activations(m);
    free(m->layers);
    free(m->expert_views);
    free(m->rope_factors);
    free(m->h_ones);
    free(m->h_seq_state);
    free(m->h_layer_state);
    free(m->h_aux_state);
    free(m);
}

const model_hparams *model_hparams_of(const model *m) { return &m->hp; }
uint64_t model_weight_bytes(const model *m) { return m->weight_bytes; }

static int max3i(int a, int b, int c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Grows the activation buffers to hold `rows` rows and `n_out` logit rows. */
static int ensure_activations(model *m, int rows, int n_out, llc_err *err) {
    if (rows <= m->cap_rows && n_out <= m->cap_out) return 0;
    int cap_rows = rows > m->cap_rows ? rows : m->cap_rows;
    int cap_out = n_out > m->cap_out ? n_out : m->cap_out;
    free_activations(m);
    const model_hparams *hp = &m->hp;
    size_t q_dim = 0, kv_dim = 0;
    for (int l = 0; l < hp->n_layers; l++) { /* the widest layer's */
        const layer *ly = &m->layers[l];
        if ((size_t)ly->n_heads * ly->head_dim > q_dim) q_dim = (size_t)ly->n_heads * ly->head_dim;
        if ((size_t)ly->n_kv_heads * ly->head_dim > kv_dim) kv_dim = (size_t)ly->n_kv_heads * ly->head_dim;
    }
    size_t R = (size_t)cap_rows, ff = (size_t)max3i(hp->ffn_dim, hp->expert_ffn_dim, hp->shared_ffn_dim),
           moe = hp->n_expert ? R : 0, n_exp = (size_t)hp->n_expert, pl = (size_t)hp->n_embd_per_layer,
           ple_all = pl * (size_t)hp->n_layers;
    struct { float **p; size_t n; } plan[] = {
        {&m->x, R * hp->dim}, {&m->xb, R * (hp->dim > (int)q_dim ? (size_t)hp->dim : q_dim)},
        {&m->q, R * q_dim}, {&m->k, R * kv_dim}, {&m->v, R * kv_dim}, {&m->att, R * q_dim},
        {&m->hb, R * ff}, {&m->hb2, R * ff},
        {&m->xo, (size_t)cap_out * hp->dim}, {&m->logits, (size_t)cap_out * hp->n_vocab},
        {&m->router_out, moe * n_exp}, {&m->xe, moe * hp->dim}, {&m->ye, moe * hp->dim},
        {&m->moe_out, moe * hp->dim},
        {&m->ple, R * ple_all}, {&m->ple_proj, R * ple_all}, {&m->ple_l, R * pl}, {&m->ple_g, R * pl},
        {&m->rb[0], R * m->rec_width}, {&m->rb[1], R * m->rec_width}, {&m->rb[2], R * m->rec_width},
        {&m->rb[3], R * m->rec_width}, {&m->rb[4], R * m->rec_width}, {&m->rb[5], R * m->rec_width},
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(plan); i++) {
        if (!plan[i].n) continue;
        *plan[i].p = m->be->ops->alloc(m->be->ctx, plan[i].n * sizeof(float));
        if (!*plan[i].p) {
            free_activations(m);
            return llc_fail(err, LLC_ERR_NOMEM, "out of memory for activations of %d rows", cap_rows);
        }
    }
    if (moe) {
        m->h_router = malloc(moe * n_exp * sizeof *m->h_router);
        m->h_rows = malloc(moe * n_exp * sizeof *m->h_rows);
        m->h_weights = malloc(moe * n_exp * sizeof *m->h_weights);
        m->h_count = malloc(n_exp * sizeof *m->h_count);
        m->h_all_rows = malloc(moe * sizeof *m->h_all_rows);
        m->h_row_gate = malloc(moe * sizeof *m->h_row_gate);
        if (!m->h_router || !m->h_rows || !m->h_weights || !m->h_count || !m->h_all_rows || !m->h_row_gate) {
            free_activations(m);
            return llc_fail(err, LLC_ERR_NOMEM, "out of memory for expert routing of %d rows", cap_rows);
        }
    }
    bool gated = false;
    for (int l = 0; l < hp->n_layers; l++) gated |= m->layers[l].attn_gate;
    if (gated) { /* wq's output as rows of head_dim: head h of row t is row (t·heads + h)·2, its gate the next */
        m->h_q_rows = malloc(R * (size_t)hp->n_heads * sizeof *m->h_q_rows);
        m->h_g_rows = malloc(R * (size_t)hp->n_heads * sizeof *m->h_g_rows);
        if (!m->h_q_rows || !m->h_g_rows) {
            free_activations(m);
            return llc_fail(err, LLC_ERR_NOMEM, "out of memory for activations of %d rows", cap_rows);
        }
        for (size_t i = 0; i < R * (size_t)hp->n_heads; i++) m->h_q_rows[i] = (int32_t)(2 * i), m->h_g_rows[i] = (int32_t)(2 * i + 1);
    }
    if (pl && !(m->h_ple_rows = malloc(R * (size_t)hp->n_layers * sizeof *m->h_ple_rows))) {
        free_activations(m);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory for activations of %d rows", cap_rows);
    }
    m->cap_rows = cap_rows;
    m->cap_out = cap_out;
    return 0;
}

/* ---- KV cache ---- */

/* Bytes of one slot's row of a layer's kv_dim elements as type, or 0 when the
 * cache cannot hold that type for it (why: a message for the error). */
static size_t kv_row_bytes(const layer *ly, uint32_t type, char *why, size_t why_n) {
    const int kv_dim = ly->n_kv_heads * ly->head_dim;
    if (why_n) why[0] = 0;
    switch (type) {
    case QT_F32: return (size_t)kv_dim * sizeof(float);
    case QT_F16: return (size_t)kv_dim * sizeof(uint16_t);
    case QT_Q8_0:
        if (kv_dim % QK8_0 == 0 && ly->head_dim % 8 == 0) return qtype_row_bytes(QT_Q8_0, kv_dim);
        if (why_n)
            snprintf(why, why_n, "a Q8_0 KV cache needs KV rows that are whole blocks of %d and heads a multiple "
                     "of 8 wide (this model: %d KV heads of %d)", QK8_0, ly->n_kv_heads, ly->head_dim);
        return 0;
    default:
        if (why_n) snprintf(why, why_n, "the KV cache cannot be stored as %s (f32, f16 or q8_0)", qtype_name(type));
        return 0;
    }
}

/* Whether layer l keeps a cache of its own (not one shared with an earlier
 * layer, and not a recurrent layer, which keeps a state instead). */
static bool owns_kv(const model *m, int l) { return m->layers[l].kv_layer == l && m->layers[l].mixer == MIX_ATTN; }

size_t model_kv_bytes_per_token(const model *m, uint32_t kv_type) {
    size_t sum = 0;
    for (int l = 0; l < m->hp.n_layers; l++)
        if (owns_kv(m, l)) {
            const size_t rb = kv_row_bytes(&m->layers[l], kv_type, NULL, 0);
            if (!rb) return 0;
            sum += 2 * rb;
        }
    return sum;
}

int model_kv_check_type(const model *m, uint32_t kv_type, llc_err *err) {
    char why[200];
    for (int l = 0; l < m->hp.n_layers; l++)
        if (m->layers[l].mixer == MIX_ATTN && !kv_row_bytes(&m->layers[l], kv_type, why, sizeof why))
            return llc_fail(err, LLC_ERR_UNSUPPORTED, "%s", why);
    return 0;
}

int model_kv_type_from_name(const char *name) {
    static const uint32_t types[] = {QT_F32, QT_F16, QT_Q8_0};
    for (size_t i = 0; name && i < LLC_ARRAY_LEN(types); i++)
        if (!strcasecmp(name, model_kv_type_name(types[i]))) return (int)types[i];
    return -1;
}

const char *model_kv_type_name(uint32_t kv_type) {
    switch (kv_type) {
    case QT_F32: return "f32";
    case QT_F16: return "f16";
    case QT_Q8_0: return "q8_0";
    default: return "?";
    }
}

int model_kv_create(const model *m, int n_blocks, int block_size, uint32_t kv_type, model_kv **out,
                    llc_err *err) {
    *out = NULL;
    if (n_blocks < 1 || block_size < 1 || (int64_t)n_blocks * block_size > INT32_MAX)
        return llc_fail(err, LLC_ERR_RANGE, "bad KV cache geometry %d x %d", n_blocks, block_size);
    int rc = model_kv_check_type(m, kv_type, err);
    if (rc) return rc;
    model_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    const int L = m->hp.n_layers;
    kv->m = m;
    kv->serial = __atomic_add_fetch(&g_serials, 1, __ATOMIC_RELAXED);
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->type = kv_type;
    kv->row_bytes = calloc((size_t)L, sizeof *kv->row_bytes);
    kv->k = calloc((size_t)L, sizeof *kv->k);
    kv->v = calloc((size_t)L, sizeof *kv->v);
    bool ok = kv->k && kv->v && kv->row_bytes;
    for (int l = 0; ok && l < L; l++) {
        kv->row_bytes[l] = kv_row_bytes(&m->layers[l], kv_type, NULL, 0);
        if (!owns_kv(m, l)) { /* the earlier layer's cache (allocated: it comes first) */
            kv->k[l] = kv->k[m->layers[l].kv_layer];
            kv->v[l] = kv->v[m->layers[l].kv_layer];
            continue;
        }
        const size_t bytes = (size_t)n_blocks * block_size * kv->row_bytes[l];
        kv->k[l] = m->be->ops->alloc(m->be->ctx, bytes);
        kv->v[l] = m->be->ops->alloc(m->be->ctx, bytes);
        ok = kv->k[l] && kv->v[l];
        if (ok) /* (a backend that cannot clear the memory cannot use it either) */
            ok = !m->be->ops->memset0(m->be->ctx, kv->k[l], bytes) &&
                 !m->be->ops->memset0(m->be->ctx, kv->v[l], bytes);
    }
    if (!ok) {
        model_kv_free(kv);
        return llc_fail(err, LLC_ERR_NOMEM, "KV cache of %.1f MiB does not fit in memory",
                        (double)n_blocks * block_size * model_kv_bytes_per_token(m, kv_type) / (1024.0 * 1024.0));
    }
    *out = kv;
    return 0;
}

void model_kv_free(model_kv *kv) {
    if (!kv) return;
    const model *m = kv->m;
    const backend *be = m->be;
    for (int l = 0; l < m->hp.n_layers; l++) {
        if (!owns_kv(m, l)) continue;
        if (kv->k && kv->k[l]) be->ops->free(be->ctx, kv->k[l]);
        if (kv->v && kv->v[l]) be->ops->free(be->ctx, kv->v[l]);
    }
    for (int i = 0; i < kv->n_state; i++) be->ops->free(be->ctx, kv->state[i]);
    free(kv->state);
    free(kv->k);
    free(kv->v);
    free(kv->row_bytes);
    free(kv);
}

int model_kv_copy_blocks(model_kv *kv, const int32_t *src, const int32_t *dst, int n, llc_err *err) {
    for (int i = 0; i < n; i++)
        if (src[i] < 0 || src[i] >= kv->n_blocks || dst[i] < 0 || dst[i] >= kv->n_blocks)
            return llc_fail(err, LLC_ERR_RANGE, "block copy %d -> %d outside the cache", src[i], dst[i]);
    if (n == 0) return 0;
    const model *m = kv->m;
    for (int l = 0; l < m->hp.n_layers; l++) {
        if (!owns_kv(m, l)) continue;
        const size_t block_bytes = (size_t)kv->block_size * kv->row_bytes[l];
        int rc = m->be->ops->copy_blocks(m->be->ctx, kv->k[l], src, dst, n, block_bytes);
        if (!rc) rc = m->be->ops->copy_blocks(m->be->ctx, kv->v[l], src, dst, n, block_bytes);
        if (rc) return llc_fail(err, rc, "copying KV blocks failed in the backend");
    }
    return 0;
}

int model_kv_type(const model_kv *kv) { return (int)kv->type; }

/* ---- recurrent state slots ---- */

size_t model_state_bytes(const model *m) { return m->state_n * sizeof(float); }
int model_kv_state_slots(const model_kv *kv) { return kv->n_state; }

/* The most slots a cache makes: far above any running set (a bad slot id is an error, not a huge allocation). */
#define MODEL_MAX_STATE_SLOTS (1 << 16)

/* Makes slots up to n (zeroed). */
static int state_reserve(model_kv *kv, int n, llc_err *err) {
    if (n <= kv->n_state) return 0;
    const model *m = kv->m;
    if (n > MODEL_MAX_STATE_SLOTS) return llc_fail(err, LLC_ERR_RANGE, "state slot %d is out of range", n - 1);
    float **p = realloc(kv->state, (size_t)n * sizeof *p);
    if (!p) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    kv->state = p;
    while (kv->n_state < n) {
        float *st = m->be->ops->alloc(m->be->ctx, model_state_bytes(m));
        if (!st || m->be->ops->memset0(m->be->ctx, st, model_state_bytes(m))) {
            if (st) m->be->ops->free(m->be->ctx, st);
            return llc_fail(err, LLC_ERR_NOMEM, "recurrent state of %.1f MiB does not fit in memory",
                            (double)model_state_bytes(m) / (1024.0 * 1024.0));
        }
        kv->state[kv->n_state++] = st;
    }
    return 0;
}

int model_kv_state_copy(model_kv *kv, int src, int dst, llc_err *err) {
    const model *m = kv->m;
    if (!m->state_n) return 0;
    if (src < 0 || dst < 0) return llc_fail(err, LLC_ERR_RANGE, "state copy %d -> %d: bad slot", src, dst);
    int rc = state_reserve(kv, (src > dst ? src : dst) + 1, err);
    if (rc || src == dst) return rc;
    if (!m->be->ops->copy) return llc_fail(err, LLC_ERR_UNSUPPORTED, "the %s backend cannot copy states", m->be->name);
    rc = m->be->ops->copy(m->be->ctx, kv->state[dst], kv->state[src], model_state_bytes(m));
    return rc ? llc_fail(err, rc, "copying a recurrent state failed in the backend") : 0;
}

/* Each sequence's slot for this step (made if new; zeroed for a sequence that
 * starts at position 0) into m->h_seq_state. Two sequences of one step may not
 * share a slot. */
static int prepare_states(model *m, model_kv *kv, const bk_batch *b, llc_err *err) {
    if (b->n_seqs > m->cap_seqs) {
        float **a = realloc(m->h_seq_state, (size_t)b->n_seqs * sizeof *a);
        if (a) m->h_seq_state = a;
        float **l = a ? realloc(m->h_layer_state, (size_t)b->n_seqs * sizeof *l) : NULL;
        if (l) m->h_layer_state = l;
        float **x = l ? realloc(m->h_aux_state, (size_t)b->n_seqs * sizeof *x) : NULL;
        if (x) m->h_aux_state = x;
        if (!a || !l || !x) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        m->cap_seqs = b->n_seqs;
    }
    int max_slot = -1;
    for (int s = 0; s < b->n_seqs; s++) {
        const int slot = b->state_slots ? b->state_slots[s] : s;
        if (slot < 0 || slot >= MODEL_MAX_STATE_SLOTS)
            return llc_fail(err, LLC_ERR_RANGE, "sequence %d: state slot %d is out of range", s, slot);
        for (int t = 0; t < s; t++)
            if ((b->state_slots ? b->state_slots[t] : t) == slot)
                return llc_fail(err, LLC_ERR_RANGE, "sequences %d and %d of one step share state slot %d", t, s, slot);
        if (slot > max_slot) max_slot = slot;
    }
    int rc = state_reserve(kv, max_slot + 1, err);
    if (rc) return rc;
    for (int s = 0; s < b->n_seqs; s++) {
        float *st = kv->state[b->state_slots ? b->state_slots[s] : s];
        m->h_seq_state[s] = st;
        if (b->positions[b->seq_start[s]] == 0) OP(m->be->ops->memset0(m->be->ctx, st, model_state_bytes(m)));
    }
    return 0;
}

/* ---- forward ---- */

/* Everything in the batch that indexes memory is checked here, once, on the host. */
static int check_batch(const model *m, const model_kv *kv, const bk_batch *b, llc_err *err) {
    if (b->n_tokens < 1 || b->n_seqs < 1 || b->n_out < 0 || b->n_out > b->n_tokens)
        return llc_fail(err, LLC_ERR_RANGE, "empty or inconsistent batch");
    if (b->seq_start[0] != 0 || b->seq_start[b->n_seqs] != b->n_tokens)
        return llc_fail(err, LLC_ERR_RANGE, "batch rows do not add up");
    int64_t n_slots = (int64_t)kv->n_blocks * kv->block_size;
    for (int s = 0; s < b->n_seqs; s++) {
        int lo = b->seq_start[s], hi = b->seq_start[s + 1];
        int kv_len = b->kv_len[s];
        if (lo > hi || kv_len < hi - lo || kv_len > b->max_blocks * kv->block_size)
            return llc_fail(err, LLC_ERR_RANGE, "sequence %d: bad KV length %d", s, kv_len);
        int used = (kv_len + kv->block_size - 1) / kv->block_size;
        for (int i = 0; i < used; i++) {
            int32_t blk = b->block_table[(size_t)s * b->max_blocks + i];
            if (blk < 0 || blk >= kv->n_blocks)
                return llc_fail(err, LLC_ERR_RANGE, "sequence %d: block id %d out of range", s, blk);
        }
        for (int r = lo; r < hi; r++)
            if (b->positions[r] < 0 || b->positions[r] >= kv_len)
                return llc_fail(err, LLC_ERR_RANGE, "row %d: position %d outside its KV length %d",
                                r, b->positions[r], kv_len);
    }
    for (int r = 0; r < b->n_tokens; r++) {
        if (b->tokens[r] < 0 || b->tokens[r] >= m->hp.n_vocab)
            return llc_fail(err, LLC_ERR_RANGE, "token id %d is outside the vocabulary (%d)",
                            b->tokens[r], m->hp.n_vocab);
        if (b->slots[r] < 0 || b->slots[r] >= n_slots)
            return llc_fail(err, LLC_ERR_RANGE, "KV slot %d is outside the cache", b->slots[r]);
    }
    for (int k = 0; k < b->n_out; k++)
        if (b->out_rows[k] < 0 || b->out_rows[k] >= b->n_tokens)
            return llc_fail(err, LLC_ERR_RANGE, "output row %d is not in the batch", b->out_rows[k]);
    if (b->n_hidden < 0 || b->n_hidden > b->n_tokens)
        return llc_fail(err, LLC_ERR_RANGE, "bad count of hidden-state rows %d", b->n_hidden);
    for (int k = 0; k < b->n_hidden; k++)
        if (b->hidden_rows[k] < 0 || b->hidden_rows[k] >= b->n_tokens)
            return llc_fail(err, LLC_ERR_RANGE, "hidden-state row %d is not in the batch", b->hidden_rows[k]);
    return 0;
}

/* p[0..n) becomes its softmax */
static void softmax_inplace(float *p, int n) {
    float max = p[0];
    for (int i = 1; i < n; i++) max = p[i] > max ? p[i] : max;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += p[i] = expf(p[i] - max);
    for (int i = 0; i < n; i++) p[i] = (float)(p[i] / sum);
}

/* Routes each of T rows to its n_expert_used best experts (the router logits are
 * in m->h_router [T][n_expert]): softmax, the largest probabilities (ties to the
 * lower expert), their weights renormalised to sum 1 (MOE_SOFTMAX_NORM, as
 * qwen3moe does) or taken as they are (MOE_SOFTMAX: qwen2moe); or the largest
 * logits, weighted by a softmax over just those (MOE_TOPK_SOFTMAX: gpt-oss). Fills,
 * per expert, the rows routed to it in row order and their weights. */
static void route_rows(model *m, int T) {
    const int E = m->hp.n_expert, K = m->hp.n_expert_used;
    memset(m->h_count, 0, (size_t)E * sizeof *m->h_count);
    const bool topk_softmax = m->hp.gating == MOE_TOPK_SOFTMAX;
    for (int t = 0; t < T; t++) {
        float *p = m->h_router + (size_t)t * E;
        if (!topk_softmax) softmax_inplace(p, E);
        int pick[MODEL_MAX_EXPERT_USED];
        float w[MODEL_MAX_EXPERT_USED], wsum = 0;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if (p[e] != -INFINITY && (best < 0 || p[e] > p[best])) best = e;
            pick[k] = best;
            w[k] = p[best];
            p[best] = -INFINITY; /* taken */
        }
        if (topk_softmax) softmax_inplace(w, K);
        for (int k = 0; k < K; k++) wsum += w[k];
        const float norm = m->hp.gating == MOE_SOFTMAX_NORM ? wsum : 1.0f;
        for (int k = 0; k < K; k++) {
            const int e = pick[k], i = m->h_count[e]++;
            m->h_rows[(size_t)e * m->cap_rows + i] = t;
            m->h_weights[(size_t)e * m->cap_rows + i] = w[k] / norm;
        }
    }
}

/* y[i] = x · w[i]ᵀ for i < n (the same input: Q, K and V; gate and up): one
 * backend call where the backend multiplies by several matrices at once, else n. */
static int matmul_n(model *m, const bk_weight *const *w, int n, const float *x, int rows, float *const *y,
                    llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    if (op->matmul_multi) OP(op->matmul_multi(c, w, n, x, rows, y));
    else
        for (int i = 0; i < n; i++) OP(op->matmul(c, w[i], x, rows, y[i]));
    return 0;
}

/* The gated feed-forward of `rows` rows of in: act(in·gateᵀ + b) ⊙ (in·upᵀ + b),
 * then down (+ bias) into out. Uses hb and hb2. */
static int gated_ffn(model *m, const bk_weight *gate, const bk_weight *up, const bk_weight *down,
                     const bk_weight *b_gate, const bk_weight *b_up, const bk_weight *b_down,
                     const float *in, int rows, float *out, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const size_t n = (size_t)rows * gate->n_out;
    const bk_weight *w[2] = {gate, up};
    float *const y[2] = {m->hb, m->hb2};
    int rc = matmul_n(m, w, 2, in, rows, y, err);
    if (rc) return rc;
    if (b_gate && b_gate->data) OP(op->add_bias(c, m->hb, b_gate, rows));
    if (b_up && b_up->data) OP(op->add_bias(c, m->hb2, b_up, rows));
    switch (m->hp.act) {
    case FFN_GELU: OP(op->gelu_mul(c, m->hb, m->hb2, n)); break;
    case FFN_SWIGLU_OAI: OP(op->swiglu_oai(c, m->hb, m->hb2, n, 1.702f, 7.0f)); break;
    default: OP(op->silu_mul(c, m->hb, m->hb2, n)); break;
    }
    OP(op->matmul(c, down, m->hb, rows, out));
    if (b_down && b_down->data) OP(op->add_bias(c, out, b_down, rows));
    return 0;
}

/* The shared expert (qwen2moe): a gated FFN over every row of m->xb, added into
 * m->moe_out after the routed experts, each row's output times
 * sigmoid(x·sh_gate_inp) where the layer has that gate. */
static int shared_expert(model *m, const layer *ly, int T, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    int rc = gated_ffn(m, &ly->sh_gate, &ly->sh_up, &ly->sh_down, NULL, NULL, NULL, m->xb, T, m->ye, err);
    if (rc) return rc;
    for (int t = 0; t < T; t++) m->h_all_rows[t] = t, m->h_row_gate[t] = 1.0f;
    if (ly->sh_gate_inp.data) {
        OP(op->matmul(c, &ly->sh_gate_inp, m->xb, T, m->router_out));
        OP(op->to_host(c, m->h_row_gate, m->router_out, (size_t)T * sizeof(float)));
        for (int t = 0; t < T; t++) m->h_row_gate[t] = 1.0f / (1.0f + expf(-m->h_row_gate[t]));
    }
    OP(op->scatter_add_rows(c, m->moe_out, m->hp.dim, m->h_all_rows, m->h_row_gate, T, m->ye));
    return 0;
}

/* Mixture of experts over the T rows of m->xb into m->moe_out: the router's
 * logits go to the host, which picks each row's experts; then each expert runs
 * once over all the rows routed to it (gathered, one batched matmul per weight)
 * and adds its weighted output into theirs. Every row sums its experts in expert
 * order, so a row's result does not depend on the other rows of the step. */
static int moe_ffn(model *m, const layer *ly, int T, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const int E = m->hp.n_expert, dim = m->hp.dim;
    OP(op->matmul(c, &ly->router, m->xb, T, m->router_out));
    if (ly->router_b.data) OP(op->add_bias(c, m->router_out, &ly->router_b, T));
    OP(op->to_host(c, m->h_router, m->router_out, (size_t)T * E * sizeof(float)));
    route_rows(m, T);
    OP(op->memset0(c, m->moe_out, (size_t)T * dim * sizeof(float)));
    for (int e = 0; e < E; e++) {
        const int n = m->h_count[e];
        if (!n) continue;
        const int32_t *rows = m->h_rows + (size_t)e * m->cap_rows;
        OP(op->gather_rows(c, m->xb, dim, rows, n, m->xe));
        int rc = gated_ffn(m, &ly->exp_gate[e], &ly->exp_up[e], &ly->exp_down[e], ly->exp_b_gate ? &ly->exp_b_gate[e] : NULL,
                           ly->exp_b_up ? &ly->exp_b_up[e] : NULL, ly->exp_b_down ? &ly->exp_b_down[e] : NULL, m->xe, n,
                           m->ye, err);
        if (rc) return rc;
        OP(op->scatter_add_rows(c, m->moe_out, dim, rows, m->h_weights + (size_t)e * m->cap_rows, n, m->ye));
    }
    if (ly->sh_gate.data) return shared_expert(m, ly, T, err);
    return 0;
}

int model_forward(model *m, model_kv *kv, const bk_batch *batch, float *logits, llc_err *err) {
    return model_forward_hidden(m, kv, batch, logits, NULL, err);
}

/* What decides a step's ops and their arguments, apart from the batch contents
 * that begin() uploads (tokens, positions, slots, the block table, KV lengths):
 * the model, the cache, the activation buffers and the batch's shape. */
static uint64_t step_key(const model *m, const model_kv *kv, const bk_batch *b) {
    const uint64_t parts[] = {m->serial, kv->serial, (uint64_t)kv->n_blocks, (uintptr_t)kv->k[0],
                              (uintptr_t)m->x, (uint64_t)m->cap_rows, (uint64_t)m->cap_out,
                              (uint64_t)b->n_tokens, (uint64_t)b->n_seqs, (uint64_t)b->n_out,
                              (uint64_t)b->max_blocks};
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the words */
    for (size_t i = 0; i < LLC_ARRAY_LEN(parts); i++) {
        h ^= parts[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

/* gemma4's per-layer inputs, once per step into m->ple ([T][n_layers][n]): each
 * token's row of the per-layer table times sqrt(n), plus the projection of the
 * scaled embedding (times 1/sqrt(dim), RMS-normed per layer), times 1/sqrt(2). */
static int per_layer_inputs(model *m, int T, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const model_hparams *hp = &m->hp;
    const int n = hp->n_embd_per_layer, L = hp->n_layers;
    const size_t all = (size_t)T * L * n;
    OP(op->embed(c, &m->ple_embd, m->ple));
    OP(op->scale(c, m->ple, sqrtf((float)n), all));
    OP(op->matmul(c, &m->ple_model_proj, m->x, T, m->ple_proj));
    OP(op->scale(c, m->ple_proj, 1.0f / sqrtf((float)hp->dim), all));
    OP(op->rmsnorm(c, m->ple_proj, &m->ple_proj_norm, m->ple_proj, T * L, n, hp->norm_eps));
    OP(op->add(c, m->ple, m->ple_proj, all));
    OP(op->scale(c, m->ple, 1.0f / sqrtf(2.0f), all));
    for (int l = 0; l < L; l++) /* layer l's slice: rows t * L + l of n */
        for (int t = 0; t < T; t++) m->h_ple_rows[(size_t)l * m->cap_rows + t] = t * L + l;
    return 0;
}

/* gemma4's per-layer embedding after layer l: x += norm(proj(gelu(x·gate) ⊙ ple_l)). */
static int per_layer_embedding(model *m, const layer *ly, int l, int T, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const model_hparams *hp = &m->hp;
    const int n = hp->n_embd_per_layer;
    OP(op->matmul(c, &ly->ple_gate, m->x, T, m->ple_g));
    OP(op->gather_rows(c, m->ple, n, m->h_ple_rows + (size_t)l * m->cap_rows, T, m->ple_l));
    OP(op->gelu_mul(c, m->ple_g, m->ple_l, (size_t)T * n));
    OP(op->matmul(c, &ly->ple_proj, m->ple_g, T, m->xb));
    OP(op->rmsnorm(c, m->xb, &ly->ple_norm, m->xb, T, hp->dim, hp->norm_eps));
    OP(op->add(c, m->x, m->xb, (size_t)T * hp->dim));
    return 0;
}

/* Attention of layer ly (l) over the normed rows in m->xb: Q, K, V (biases,
 * norms, RoPE), K and V into the cache, causal attention, the output projection
 * (and bias) into m->xb. */
static int attention(model *m, model_kv *kv, const layer *ly, int l, int T, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const model_hparams *hp = &m->hp;
    const int nh = ly->n_heads, nkv = ly->n_kv_heads, hd = ly->head_dim;
    const bool own_kv = ly->kv_layer == l; /* else K and V come from an earlier layer's cache */
    int rc;
    const bk_weight *qkv[3] = {&ly->wq, &ly->wk, &ly->wv};
    float *const qkv_out[3] = {ly->attn_gate ? m->rb[0] : m->q, m->k, m->v};
    if ((rc = matmul_n(m, qkv, own_kv ? 3 : 1, m->xb, T, qkv_out, err))) return rc;
    if (ly->attn_gate) { /* each head's query and its gate, apart */
        OP(op->gather_rows(c, m->rb[0], hd, m->h_q_rows, T * nh, m->q));
        OP(op->gather_rows(c, m->rb[0], hd, m->h_g_rows, T * nh, m->rb[1]));
    }
    if (ly->bq.data) OP(op->add_bias(c, m->q, &ly->bq, T));
    if (ly->bk.data) OP(op->add_bias(c, m->k, &ly->bk, T));
    if (ly->bv.data) OP(op->add_bias(c, m->v, &ly->bv, T));
    if (ly->q_norm.data) OP(op->rmsnorm(c, m->q, &ly->q_norm, m->q, T * nh, hd, hp->norm_eps));
    if (ly->k_norm.data) OP(op->rmsnorm(c, m->k, &ly->k_norm, m->k, T * nkv, hd, hp->norm_eps));
    if (ly->v_norm && own_kv) OP(op->rmsnorm(c, m->v, &m->ones, m->v, T * nkv, hd, hp->norm_eps));
    if (!ly->no_rope) {
        bk_rope rope_q = *ly->rope;
        rope_q.temp_scale = hp->attn_temp_scale;
        rope_q.temp_floor = hp->attn_temp_floor;
        OP(op->rope(c, m->q, nh, hd, &rope_q));
        if (own_kv) OP(op->rope(c, m->k, nkv, hd, ly->rope));
    }
    if (own_kv) OP(op->kv_store(c, kv->k[l], kv->v[l], m->k, m->v, nkv * hd, kv->type));
    const bk_attn at = {.n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .kv_type = kv->type,
                        .block_size = kv->block_size, .scale = hp->attn_scale, .softcap = hp->attn_softcap,
                        .window = ly->swa ? hp->swa_window : 0, .sinks = ly->sinks.data};
    OP(op->attention(c, m->q, kv->k[l], kv->v[l], m->att, &at));
    if (ly->attn_gate) OP(op->mul_sigmoid(c, m->att, m->rb[1], (size_t)T * nh * hd));
    OP(op->matmul(c, &ly->wo, m->att, T, m->xb));
    if (ly->bo.data) OP(op->add_bias(c, m->xb, &ly->bo, T));
    return 0;
}

/* The step's ops: embedding, the layers, the hidden states asked for, and the
 * logits of the output rows into m->logits (still in backend memory). */
static int forward_ops(model *m, model_kv *kv, const bk_batch *batch, float *hidden, llc_err *err) {
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const model_hparams *hp = &m->hp;
    const int T = batch->n_tokens, dim = hp->dim;
    int rc;

    OP(op->embed(c, &m->tok_embd, m->x));
    if (hp->embd_scale) OP(op->scale(c, m->x, sqrtf((float)dim), (size_t)T * dim));
    if (hp->embd_mult != 0.0f) OP(op->scale(c, m->x, hp->embd_mult, (size_t)T * dim));
    if (hp->n_embd_per_layer && (rc = per_layer_inputs(m, T, err))) return rc;
    for (int l = 0; l < hp->n_layers; l++) {
        const layer *ly = &m->layers[l];
        OP(op->rmsnorm(c, m->x, &ly->attn_norm, m->xb, T, dim, hp->norm_eps));
        if (ly->mixer == MIX_ATTN) rc = attention(m, kv, ly, l, T, err);
        else { /* a recurrent layer: its part of each sequence's state */
            for (int s = 0; s < batch->n_seqs; s++) m->h_layer_state[s] = m->h_seq_state[s] + ly->state_off;
            rc = model_recurrent_mixer(m, ly, T, batch->n_seqs, m->h_layer_state, err);
        }
        if (rc) return rc;
        if (ly->post_attn_norm.data) OP(op->rmsnorm(c, m->xb, &ly->post_attn_norm, m->xb, T, dim, hp->norm_eps));
        if (hp->residual_scale != 0.0f) OP(op->scale(c, m->xb, hp->residual_scale, (size_t)T * dim));
        OP(op->add(c, m->x, m->xb, (size_t)T * dim));
        /* feed-forward */
        OP(op->rmsnorm(c, m->x, &ly->ffn_norm, m->xb, T, dim, hp->norm_eps));
        float *ffn_out = m->xb;
        if (hp->n_expert) {
            if ((rc = moe_ffn(m, ly, T, err))) return rc;
            ffn_out = m->moe_out;
        } else if ((rc = gated_ffn(m, &ly->gate, &ly->up, &ly->down, &ly->b_gate, &ly->b_up, &ly->b_down, m->xb,
                                   T, m->xb, err))) {
            return rc;
        }
        if (ly->post_ffn_norm.data) OP(op->rmsnorm(c, ffn_out, &ly->post_ffn_norm, ffn_out, T, dim, hp->norm_eps));
        if (hp->residual_scale != 0.0f) OP(op->scale(c, ffn_out, hp->residual_scale, (size_t)T * dim));
        OP(op->add(c, m->x, ffn_out, (size_t)T * dim));
        if (hp->n_embd_per_layer && (rc = per_layer_embedding(m, ly, l, T, err))) return rc;
        if (ly->out_scale != 1.0f) OP(op->scale(c, m->x, ly->out_scale, (size_t)T * dim));
    }
    if (batch->n_hidden > 0) { /* embeddings: the final norm of the rows asked for (xb is free now) */
        OP(op->gather_rows(c, m->x, dim, batch->hidden_rows, batch->n_hidden, m->xb));
        OP(op->rmsnorm(c, m->xb, &m->out_norm, m->xb, batch->n_hidden, dim, hp->norm_eps));
        OP(op->to_host(c, hidden, m->xb, (size_t)batch->n_hidden * dim * sizeof(float)));
    }
    if (batch->n_out == 0) return 0;
    OP(op->gather_out_rows(c, m->x, dim, m->xo));
    OP(op->rmsnorm(c, m->xo, &m->out_norm, m->xo, batch->n_out, dim, hp->norm_eps));
    OP(op->matmul(c, &m->output, m->xo, batch->n_out, m->logits));
    if (m->b_output.data) OP(op->add_bias(c, m->logits, &m->b_output, batch->n_out));
    return 0;
}

/* One step's ops, up to the logits in backend memory (m->logits, n_out rows). */
static int forward_step(model *m, model_kv *kv, const bk_batch *batch, float *hidden, llc_err *err) {
    if (kv->m != m) return llc_fail(err, LLC_ERR_RANGE, "KV cache belongs to another model");
    if (batch->n_hidden > 0 && !hidden) return llc_fail(err, LLC_ERR_RANGE, "no buffer for the hidden states");
    int rc = check_batch(m, kv, batch, err);
    if (!rc) rc = ensure_activations(m, batch->n_tokens, batch->n_out, err);
    if (rc) return rc;
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const model_hparams *hp = &m->hp;
    if ((rc = op->begin(c, batch, err))) return rc;
    if (m->state_n && (rc = prepare_states(m, kv, batch, err))) return rc;
    /* A step whose ops all stay in backend memory can be recorded and replayed
     * (mixture-of-experts routing, per-layer embedding rows and hidden states go
     * between host and backend mid-step). */
    int graph = BK_GRAPH_NONE;
    if (op->graph_begin && !hp->n_expert && !hp->n_embd_per_layer && !hp->n_recurrent && batch->n_hidden == 0 &&
        batch->n_out > 0)
        graph = op->graph_begin(c, step_key(m, kv, batch));
    if (graph != BK_GRAPH_REPLAYED) {
        rc = forward_ops(m, kv, batch, hidden, err);
        if (graph == BK_GRAPH_RECORDING) {
            int grc = op->graph_end(c);
            if (!rc && grc) rc = llc_fail(err, grc, "backend op graph_end failed");
        }
    }
    return rc;
}

int model_forward_hidden(model *m, model_kv *kv, const bk_batch *batch, float *logits, float *hidden,
                         llc_err *err) {
    int rc = forward_step(m, kv, batch, hidden, err);
    if (rc || batch->n_out == 0) return rc;
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    const model_hparams *hp = &m->hp;
    const size_t n_logits = (size_t)batch->n_out * hp->n_vocab;
    OP(op->to_host(c, logits, m->logits, n_logits * sizeof(float)));
    if (hp->logit_scale > 0) /* granite: logits / logit_scale */
        for (size_t i = 0; i < n_logits; i++) logits[i] /= hp->logit_scale;
    if (hp->final_softcap > 0) /* on the host: the logits are here anyway */
        for (size_t i = 0; i < n_logits; i++)
            logits[i] = hp->final_softcap * tanhf(logits[i] / hp->final_softcap);
    return 0;
}

bool model_can_forward_top(const model *m) {
    /* (granite's scale and gemma's softcap are applied on the host, after the
     * copy: a rounding there can make two entries equal that were not, so the
     * order of the backend's list would not be the final one) */
    return m->be->ops->top_k && !(m->hp.logit_scale > 0) && !(m->hp.final_softcap > 0);
}

int model_forward_top(model *m, model_kv *kv, const bk_batch *batch, int k, int32_t *ids, float *vals,
                      float *hidden, llc_err *err) {
    if (!model_can_forward_top(m) || k < 1 || k > TOPK_MAX)
        return llc_fail(err, LLC_ERR_UNSUPPORTED, "this model and backend give whole rows of logits only");
    int rc = forward_step(m, kv, batch, hidden, err);
    if (rc || batch->n_out == 0) return rc;
    const backend_ops *op = m->be->ops;
    OP(op->top_k(m->be->ctx, m->logits, batch->n_out, m->hp.n_vocab, k, ids, vals));
    return 0;
}
