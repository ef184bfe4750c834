/* model.c — loading a llama-family model from GGUF and its forward pass, written
 * once against backend.h. The pass follows llama2.c's shape: embed, then per
 * layer attention (RMSNorm, QKV, RoPE, paged KV, causal attention, output
 * projection, residual) and SwiGLU feed-forward, then final norm and logits for
 * the rows that ask for them. */
#include "engine/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"

typedef struct layer {
    bk_weight attn_norm, wq, wk, wv, wo;
    bk_weight bq, bk, bv;         /* qwen2 */
    bk_weight q_norm, k_norm;     /* qwen3: per-head RMSNorm over head_dim */
    bk_weight ffn_norm, gate, up, down;
} layer;

struct model {
    model_hparams hp;
    backend *be;
    bk_weight tok_embd, out_norm, output;
    layer *layers;
    float *rope_factors; /* host copy of rope_freqs.weight, or NULL */
    uint64_t weight_bytes;
    /* activations in backend memory, sized for cap_rows rows and cap_out outputs */
    int cap_rows, cap_out;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *xo, *logits;
};

struct model_kv {
    const model *m;
    int n_blocks, block_size;
    float **k, **v; /* [n_layers] -> [n_blocks * block_size * kv_dim] */
};

/* ---- loading ---- */

typedef struct loader {
    const gguf *g;
    model *m;
    llc_err *err;
    char key[128];
} loader;

static const char *arch_key(loader *L, const char *suffix) {
    snprintf(L->key, sizeof L->key, "%s.%s", L->m->hp.arch_name, suffix);
    return L->key;
}

static int get_int(loader *L, const char *suffix, bool required, int def, int lo, int hi, int *out) {
    int64_t v;
    int rc = gguf_get_i64(L->g, arch_key(L, suffix), &v, L->err);
    if (rc == LLC_ERR_NOTFOUND && !required) {
        *out = def;
        return 0;
    }
    if (rc) return rc;
    if (v < lo || v > hi)
        return llc_fail(L->err, LLC_ERR_RANGE, "%s = %lld is outside %d..%d", L->key, (long long)v,
                        lo, hi);
    *out = (int)v;
    return 0;
}

static int get_float(loader *L, const char *suffix, float def, float *out) {
    int rc = gguf_get_f32(L->g, arch_key(L, suffix), out, L->err);
    if (rc == LLC_ERR_NOTFOUND) {
        *out = def;
        return 0;
    }
    if (!rc && !isfinite(*out)) return llc_fail(L->err, LLC_ERR_RANGE, "%s is not finite", L->key);
    return rc;
}

/* Loads tensor `name` and checks it is [n_in] (n_out == 1) or [n_in, n_out]. */
static int get_weight(loader *L, const char *name, int64_t n_in, int64_t n_out, bool required,
                      bk_weight *out) {
    memset(out, 0, sizeof *out);
    const gguf_tensor *t = gguf_find_tensor(L->g, name);
    if (!t) {
        if (!required) return 0;
        return llc_fail(L->err, LLC_ERR_NOTFOUND, "tensor '%s' is missing", name);
    }
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return llc_fail(L->err, LLC_ERR_FORMAT,
                        "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld] "
                        "from the hyper-parameters",
                        name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)t->ne[3], (long long)n_in, (long long)n_out);
    if (n_out == 1 && t->type != QT_F32)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "tensor '%s' is %s; norms and biases must be F32",
                        name, qtype_name(t->type));
    const bk_tensor bt = {.name = t->name, .type = t->type, .n_in = t->ne[0],
                          .n_out = t->ne[1] * t->ne[2] * t->ne[3], .data = t->data,
                          .n_bytes = t->n_bytes, .droppable = t->in_file_mapping};
    int rc = L->m->be->ops->weight_load(L->m->be->ctx, &bt, out, L->err);
    if (!rc) L->m->weight_bytes += t->n_bytes;
    return rc;
}

static int load_hparams(loader *L) {
    model_hparams *hp = &L->m->hp;
    gguf_str arch;
    int rc = gguf_get_str(L->g, "general.architecture", &arch, L->err);
    if (rc) return rc;
    if (gguf_str_eq(arch, "llama")) hp->arch = ARCH_LLAMA, hp->arch_name = "llama";
    else if (gguf_str_eq(arch, "qwen2")) hp->arch = ARCH_QWEN2, hp->arch_name = "qwen2";
    else if (gguf_str_eq(arch, "qwen3")) hp->arch = ARCH_QWEN3, hp->arch_name = "qwen3";
    else
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED,
                        "architecture '%.*s' is not supported (llama, qwen2 and qwen3 are)",
                        (int)(arch.len > 40 ? 40 : arch.len), arch.ptr);
    const int BIG = 1 << 20;
    if ((rc = get_int(L, "embedding_length", true, 0, 1, BIG, &hp->dim)) ||
        (rc = get_int(L, "block_count", true, 0, 1, 4096, &hp->n_layers)) ||
        (rc = get_int(L, "feed_forward_length", true, 0, 1, BIG, &hp->ffn_dim)) ||
        (rc = get_int(L, "attention.head_count", true, 0, 1, 4096, &hp->n_heads)) ||
        (rc = get_int(L, "attention.head_count_kv", false, hp->n_heads, 1, 4096, &hp->n_kv_heads)) ||
        (rc = get_int(L, "context_length", false, 2048, 1, 1 << 24, &hp->n_ctx_train)))
        return rc;
    if (hp->n_heads % hp->n_kv_heads)
        return llc_fail(L->err, LLC_ERR_FORMAT, "%d attention heads are not a multiple of %d KV heads",
                        hp->n_heads, hp->n_kv_heads);
    int def_head_dim = hp->dim % hp->n_heads ? 0 : hp->dim / hp->n_heads;
    if ((rc = get_int(L, "attention.key_length", false, def_head_dim, 1, 4096, &hp->head_dim)))
        return rc;
    int vlen;
    if ((rc = get_int(L, "attention.value_length", false, hp->head_dim, 1, 4096, &vlen))) return rc;
    if (hp->head_dim <= 0 || vlen != hp->head_dim)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "head size cannot be derived (dim %d, %d heads)",
                        hp->dim, hp->n_heads);
    if ((rc = get_float(L, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->norm_eps))) return rc;
    if (hp->norm_eps <= 0) return llc_fail(L->err, LLC_ERR_RANGE, "RMSNorm epsilon must be positive");

    bk_rope *rp = &hp->rope;
    rp->style = hp->arch == ARCH_LLAMA ? BK_ROPE_NORMAL : BK_ROPE_NEOX;
    if ((rc = get_int(L, "rope.dimension_count", false, hp->head_dim, 2, hp->head_dim, &rp->n_rot)))
        return rc;
    if (rp->n_rot % 2) return llc_fail(L->err, LLC_ERR_FORMAT, "RoPE dimension count must be even");
    if ((rc = get_float(L, "rope.freq_base", 10000.0f, &rp->freq_base))) return rc;
    if (rp->freq_base <= 1) return llc_fail(L->err, LLC_ERR_RANGE, "RoPE base must be > 1");
    rp->freq_scale = 1.0f;
    gguf_str stype;
    if (gguf_get_str(L->g, arch_key(L, "rope.scaling.type"), &stype, NULL) == 0 &&
        !gguf_str_eq(stype, "none")) {
        if (!gguf_str_eq(stype, "linear"))
            return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "RoPE scaling '%.*s' is not supported",
                            (int)(stype.len > 20 ? 20 : stype.len), stype.ptr);
        float factor;
        if ((rc = get_float(L, "rope.scaling.factor", 1.0f, &factor))) return rc;
        if (factor < 1.0f) return llc_fail(L->err, LLC_ERR_RANGE, "RoPE scaling factor below 1");
        rp->freq_scale = 1.0f / factor;
    }
    return 0;
}

static int load_weights(loader *L) {
    model *m = L->m;
    model_hparams *hp = &m->hp;
    const gguf_tensor *emb = gguf_find_tensor(L->g, "token_embd.weight");
    if (!emb) return llc_fail(L->err, LLC_ERR_NOTFOUND, "tensor 'token_embd.weight' is missing");
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return llc_fail(L->err, LLC_ERR_FORMAT, "token_embd.weight has a bad vocabulary size");
    hp->n_vocab = (int)emb->ne[1];
    int rc;
    int q_dim = hp->n_heads * hp->head_dim, kv_dim = hp->n_kv_heads * hp->head_dim;
    if ((rc = get_weight(L, "token_embd.weight", hp->dim, hp->n_vocab, true, &m->tok_embd)) ||
        (rc = get_weight(L, "output_norm.weight", hp->dim, 1, true, &m->out_norm)) ||
        (rc = get_weight(L, "output.weight", hp->dim, hp->n_vocab, false, &m->output)))
        return rc;
    hp->tied_output = m->output.data == NULL;
    if (hp->tied_output) m->output = m->tok_embd;

    const gguf_tensor *rf = gguf_find_tensor(L->g, "rope_freqs.weight");
    if (rf) {
        if (rf->type != QT_F32 || gguf_tensor_n_elems(rf) != hp->rope.n_rot / 2)
            return llc_fail(L->err, LLC_ERR_FORMAT, "rope_freqs.weight must be F32 [%d]",
                            hp->rope.n_rot / 2);
        m->rope_factors = malloc((size_t)rf->n_bytes);
        if (!m->rope_factors) return llc_fail(L->err, LLC_ERR_NOMEM, "out of memory");
        memcpy(m->rope_factors, rf->data, (size_t)rf->n_bytes);
        hp->rope.freq_factors = m->rope_factors;
    }

    m->layers = calloc((size_t)hp->n_layers, sizeof *m->layers);
    if (!m->layers) return llc_fail(L->err, LLC_ERR_NOMEM, "out of memory");
    bool bias = hp->arch == ARCH_QWEN2, qk_norm = hp->arch == ARCH_QWEN3;
    for (int l = 0; l < hp->n_layers; l++) {
        layer *ly = &m->layers[l];
        char n[64];
#define W(field, suffix, nin, nout, req)                              \
    (snprintf(n, sizeof n, "blk.%d." suffix, l),                      \
     get_weight(L, n, (nin), (nout), (req), &ly->field))
        if ((rc = W(attn_norm, "attn_norm.weight", hp->dim, 1, true)) ||
            (rc = W(wq, "attn_q.weight", hp->dim, q_dim, true)) ||
            (rc = W(wk, "attn_k.weight", hp->dim, kv_dim, true)) ||
            (rc = W(wv, "attn_v.weight", hp->dim, kv_dim, true)) ||
            (rc = W(wo, "attn_output.weight", q_dim, hp->dim, true)) ||
            (rc = W(bq, "attn_q.bias", q_dim, 1, bias)) ||
            (rc = W(bk, "attn_k.bias", kv_dim, 1, bias)) ||
            (rc = W(bv, "attn_v.bias", kv_dim, 1, bias)) ||
            (rc = W(q_norm, "attn_q_norm.weight", hp->head_dim, 1, qk_norm)) ||
            (rc = W(k_norm, "attn_k_norm.weight", hp->head_dim, 1, qk_norm)) ||
            (rc = W(ffn_norm, "ffn_norm.weight", hp->dim, 1, true)) ||
            (rc = W(gate, "ffn_gate.weight", hp->dim, hp->ffn_dim, true)) ||
            (rc = W(up, "ffn_up.weight", hp->dim, hp->ffn_dim, true)) ||
            (rc = W(down, "ffn_down.weight", hp->ffn_dim, hp->dim, true)))
            return rc;
#undef W
    }
    return 0;
}

int model_load(const gguf *g, backend *be, model **out, llc_err *err) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    m->be = be;
    loader L = {.g = g, .m = m, .err = err};
    int rc = load_hparams(&L);
    if (!rc) rc = load_weights(&L);
    if (rc) {
        model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

static void free_activations(model *m) {
    float **bufs[] = {&m->x, &m->xb, &m->q, &m->k, &m->v, &m->att, &m->hb, &m->hb2, &m->xo, &m->logits};
    for (size_t i = 0; i < LLC_ARRAY_LEN(bufs); i++) {
        if (*bufs[i]) m->be->ops->free(m->be->ctx, *bufs[i]);
        *bufs[i] = NULL;
    }
    m->cap_rows = m->cap_out = 0;
}

void model_free(model *m) {
    if (!m) return;
    free_activations(m);
    free(m->layers);
    free(m->rope_factors);
    free(m);
}

const model_hparams *model_hparams_of(const model *m) { return &m->hp; }
uint64_t model_weight_bytes(const model *m) { return m->weight_bytes; }

/* Grows the activation buffers to hold `rows` rows and `n_out` logit rows. */
static int ensure_activations(model *m, int rows, int n_out, llc_err *err) {
    if (rows <= m->cap_rows && n_out <= m->cap_out) return 0;
    int cap_rows = rows > m->cap_rows ? rows : m->cap_rows;
    int cap_out = n_out > m->cap_out ? n_out : m->cap_out;
    free_activations(m);
    const model_hparams *hp = &m->hp;
    size_t R = (size_t)cap_rows, q_dim = (size_t)hp->n_heads * hp->head_dim,
           kv_dim = (size_t)hp->n_kv_heads * hp->head_dim;
    struct { float **p; size_t n; } plan[] = {
        {&m->x, R * hp->dim}, {&m->xb, R * (hp->dim > (int)q_dim ? (size_t)hp->dim : q_dim)},
        {&m->q, R * q_dim}, {&m->k, R * kv_dim}, {&m->v, R * kv_dim}, {&m->att, R * q_dim},
        {&m->hb, R * hp->ffn_dim}, {&m->hb2, R * hp->ffn_dim},
        {&m->xo, (size_t)cap_out * hp->dim}, {&m->logits, (size_t)cap_out * hp->n_vocab},
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(plan); i++) {
        *plan[i].p = m->be->ops->alloc(m->be->ctx, plan[i].n * sizeof(float));
        if (!*plan[i].p) {
            free_activations(m);
            return llc_fail(err, LLC_ERR_NOMEM, "out of memory for activations of %d rows", cap_rows);
        }
    }
    m->cap_rows = cap_rows;
    m->cap_out = cap_out;
    return 0;
}

/* ---- KV cache ---- */

size_t model_kv_bytes_per_token(const model *m) {
    return (size_t)m->hp.n_layers * 2 * (size_t)m->hp.n_kv_heads * m->hp.head_dim * sizeof(float);
}

int model_kv_create(const model *m, int n_blocks, int block_size, model_kv **out, llc_err *err) {
    *out = NULL;
    if (n_blocks < 1 || block_size < 1 || (int64_t)n_blocks * block_size > INT32_MAX)
        return llc_fail(err, LLC_ERR_RANGE, "bad KV cache geometry %d x %d", n_blocks, block_size);
    model_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    kv->m = m;
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->k = calloc((size_t)m->hp.n_layers, sizeof *kv->k);
    kv->v = calloc((size_t)m->hp.n_layers, sizeof *kv->v);
    size_t bytes = (size_t)n_blocks * block_size * m->hp.n_kv_heads * m->hp.head_dim * sizeof(float);
    bool ok = kv->k && kv->v;
    for (int l = 0; ok && l < m->hp.n_layers; l++) {
        kv->k[l] = m->be->ops->alloc(m->be->ctx, bytes);
        kv->v[l] = m->be->ops->alloc(m->be->ctx, bytes);
        ok = kv->k[l] && kv->v[l];
        if (ok) {
            m->be->ops->memset0(m->be->ctx, kv->k[l], bytes);
            m->be->ops->memset0(m->be->ctx, kv->v[l], bytes);
        }
    }
    if (!ok) {
        model_kv_free(kv);
        return llc_fail(err, LLC_ERR_NOMEM, "KV cache of %.1f MiB does not fit in memory",
                        (double)bytes * 2 * m->hp.n_layers / (1024.0 * 1024.0));
    }
    *out = kv;
    return 0;
}

void model_kv_free(model_kv *kv) {
    if (!kv) return;
    const backend *be = kv->m->be;
    for (int l = 0; l < kv->m->hp.n_layers; l++) {
        if (kv->k && kv->k[l]) be->ops->free(be->ctx, kv->k[l]);
        if (kv->v && kv->v[l]) be->ops->free(be->ctx, kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv);
}

int model_kv_copy_blocks(model_kv *kv, const int32_t *src, const int32_t *dst, int n, llc_err *err) {
    for (int i = 0; i < n; i++)
        if (src[i] < 0 || src[i] >= kv->n_blocks || dst[i] < 0 || dst[i] >= kv->n_blocks)
            return llc_fail(err, LLC_ERR_RANGE, "block copy %d -> %d outside the cache", src[i], dst[i]);
    if (n == 0) return 0;
    const model *m = kv->m;
    size_t block_floats = (size_t)kv->block_size * m->hp.n_kv_heads * m->hp.head_dim;
    for (int l = 0; l < m->hp.n_layers; l++) {
        m->be->ops->copy_blocks(m->be->ctx, kv->k[l], src, dst, n, block_floats);
        m->be->ops->copy_blocks(m->be->ctx, kv->v[l], src, dst, n, block_floats);
    }
    return 0;
}

int model_kv_block_size(const model_kv *kv) { return kv->block_size; }
int model_kv_n_blocks(const model_kv *kv) { return kv->n_blocks; }

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
    return 0;
}

int model_forward(model *m, model_kv *kv, const bk_batch *batch, float *logits, llc_err *err) {
    if (kv->m != m) return llc_fail(err, LLC_ERR_RANGE, "KV cache belongs to another model");
    int rc = check_batch(m, kv, batch, err);
    if (!rc) rc = ensure_activations(m, batch->n_tokens, batch->n_out, err);
    if (rc) return rc;
    const backend_ops *op = m->be->ops;
    void *c = m->be->ctx;
    if ((rc = op->begin(c, batch, err))) return rc;

    const model_hparams *hp = &m->hp;
    const int T = batch->n_tokens, dim = hp->dim;
    const int kv_dim = hp->n_kv_heads * hp->head_dim;
    const bk_attn attn = {.n_heads = hp->n_heads, .n_kv_heads = hp->n_kv_heads,
                          .head_dim = hp->head_dim, .block_size = kv->block_size,
                          .scale = 1.0f / sqrtf((float)hp->head_dim)};

    op->embed(c, &m->tok_embd, m->x);
    for (int l = 0; l < hp->n_layers; l++) {
        const layer *ly = &m->layers[l];
        /* attention */
        op->rmsnorm(c, m->x, &ly->attn_norm, m->xb, T, dim, hp->norm_eps);
        op->matmul(c, &ly->wq, m->xb, T, m->q);
        op->matmul(c, &ly->wk, m->xb, T, m->k);
        op->matmul(c, &ly->wv, m->xb, T, m->v);
        if (ly->bq.data) {
            op->add_bias(c, m->q, &ly->bq, T);
            op->add_bias(c, m->k, &ly->bk, T);
            op->add_bias(c, m->v, &ly->bv, T);
        }
        if (ly->q_norm.data) {
            op->rmsnorm(c, m->q, &ly->q_norm, m->q, T * hp->n_heads, hp->head_dim, hp->norm_eps);
            op->rmsnorm(c, m->k, &ly->k_norm, m->k, T * hp->n_kv_heads, hp->head_dim, hp->norm_eps);
        }
        op->rope(c, m->q, hp->n_heads, hp->head_dim, &hp->rope);
        op->rope(c, m->k, hp->n_kv_heads, hp->head_dim, &hp->rope);
        op->kv_store(c, kv->k[l], kv->v[l], m->k, m->v, kv_dim);
        op->attention(c, m->q, kv->k[l], kv->v[l], m->att, &attn);
        op->matmul(c, &ly->wo, m->att, T, m->xb);
        op->add(c, m->x, m->xb, (size_t)T * dim);
        /* feed-forward */
        op->rmsnorm(c, m->x, &ly->ffn_norm, m->xb, T, dim, hp->norm_eps);
        op->matmul(c, &ly->gate, m->xb, T, m->hb);
        op->matmul(c, &ly->up, m->xb, T, m->hb2);
        op->silu_mul(c, m->hb, m->hb2, (size_t)T * hp->ffn_dim);
        op->matmul(c, &ly->down, m->hb, T, m->xb);
        op->add(c, m->x, m->xb, (size_t)T * dim);
    }
    if (batch->n_out == 0) return 0;
    op->gather_out_rows(c, m->x, dim, m->xo);
    op->rmsnorm(c, m->xo, &m->out_norm, m->xo, batch->n_out, dim, hp->norm_eps);
    op->matmul(c, &m->output, m->xo, batch->n_out, m->logits);
    op->to_host(c, logits, m->logits, (size_t)batch->n_out * hp->n_vocab * sizeof(float));
    return 0;
}
