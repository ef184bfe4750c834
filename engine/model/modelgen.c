/* modelgen.c — random-weight GGUF models: hyper-parameter metadata, tokenizer
 * metadata copied from a vocabulary GGUF, and every tensor filled with scaled
 * uniform noise, quantized with the reference quantizers of engine/quant. Rows
 * are made and quantized on a CPU pool; the random stream is splitmix64, whose
 * n-th value is computed directly, so every thread count writes the same bytes. */
#include "engine/model/modelgen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "kernels/cpu/pool.h"
#include "kernels/quant.h"

typedef struct preset {
    const char *name, *arch;
    int dim, n_layers, n_heads, n_kv_heads, ffn_dim, head_dim, n_ctx;
    float rope_base;
} preset;

static const preset g_presets[] = {
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 0, 2048, 10000.0f},
    {"tiny-llama", "llama", 64, 2, 4, 2, 160, 0, 256, 10000.0f},
    {"tiny-qwen2", "qwen2", 64, 2, 4, 2, 160, 0, 256, 1000000.0f},
    {"tiny-qwen3", "qwen3", 64, 2, 4, 2, 160, 32, 256, 1000000.0f},
};

int modelgen_preset(const char *name, modelgen_params *p) {
    for (size_t i = 0; i < LLC_ARRAY_LEN(g_presets); i++) {
        const preset *s = &g_presets[i];
        if (strcmp(s->name, name)) continue;
        p->arch = s->arch;
        p->dim = s->dim;
        p->n_layers = s->n_layers;
        p->n_heads = s->n_heads;
        p->n_kv_heads = s->n_kv_heads;
        p->ffn_dim = s->ffn_dim;
        p->head_dim = s->head_dim;
        p->n_ctx = s->n_ctx;
        p->rope_base = s->rope_base;
        return 0;
    }
    return -1;
}

const char *modelgen_preset_names(void) { return "tinyllama-1.1b, tiny-llama, tiny-qwen2, tiny-qwen3"; }

/* splitmix64: small, fast, the same on every machine, and counter-based: the
 * n-th value after state s is mix(s + n * golden), so any row starts directly. */
#define SPLITMIX_GOLDEN 0x9E3779B97F4A7C15ull
static uint64_t splitmix_at(uint64_t s, uint64_t n) {
    uint64_t z = s + n * SPLITMIX_GOLDEN;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float uniform_of(uint64_t u) { /* [-1, 1) */
    return (float)((double)(u >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

typedef struct gen {
    gguf_writer *w;
    uint64_t rng;    /* the stream's state before the next tensor */
    cpu_pool *pool;
    int distinct_rows; /* > 0: rows from this one on repeat the first ones */
    void **bufs; /* tensor data, kept until the file is written */
    int n_bufs, cap_bufs;
    llc_err *err;
} gen;

/* One tensor's rows, shared out over the pool. */
typedef struct fill_job {
    uint64_t rng;
    uint32_t type;
    int64_t n_in, n_rows; /* rows to make (the rest are copies) */
    size_t row_bytes;
    float center, amp;
    uint8_t *data;
    int failed; /* a share could not allocate or quantize */
} fill_job;

static void fill_rows(void *arg, int ith, int nth) {
    fill_job *j = arg;
    long lo, hi;
    cpu_split((long)j->n_rows, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    float *row = malloc((size_t)j->n_in * sizeof *row);
    if (!row) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (long r = lo; r < hi; r++) {
        const uint64_t first = (uint64_t)r * (uint64_t)j->n_in + 1; /* values are numbered from 1 */
        for (int64_t i = 0; i < j->n_in; i++)
            row[i] = j->center + j->amp * uniform_of(splitmix_at(j->rng, first + (uint64_t)i));
        if (quantize_row(j->type, row, j->data + (size_t)r * j->row_bytes, j->n_in) != 0) {
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
            break;
        }
    }
    free(row);
}

/* Adds tensor `name` of n_out rows x n_in, values center + amp * U(-1, 1). */
static int add_tensor(gen *G, const char *name, int64_t n_in, int64_t n_out, uint32_t type,
                      float center, float amp) {
    if (!qtype_row_bytes(type, n_in))
        return llc_fail(G->err, LLC_ERR_RANGE, "%s: a row of %lld is not a whole number of %s blocks",
                        name, (long long)n_in, qtype_name(type));
    size_t row_bytes = qtype_row_bytes(type, n_in);
    uint8_t *data = malloc(row_bytes * (size_t)n_out);
    if (G->n_bufs == G->cap_bufs) {
        int cap = G->cap_bufs ? G->cap_bufs * 2 : 64;
        void **nb = realloc(G->bufs, (size_t)cap * sizeof *nb);
        if (nb) G->bufs = nb, G->cap_bufs = cap;
    }
    if (!data || G->n_bufs == G->cap_bufs) {
        free(data);
        return llc_fail(G->err, LLC_ERR_NOMEM, "out of memory generating %s", name);
    }
    G->bufs[G->n_bufs++] = data;
    fill_job j = {.rng = G->rng, .type = type, .n_in = n_in, .n_rows = n_out, .row_bytes = row_bytes,
                  .center = center, .amp = amp, .data = data};
    if (G->distinct_rows > 0 && j.n_rows > G->distinct_rows) j.n_rows = G->distinct_rows;
    cpu_pool_run(G->pool, fill_rows, &j);
    if (j.failed)
        return llc_fail(G->err, LLC_ERR_UNSUPPORTED, "cannot quantize %s to %s", name, qtype_name(type));
    for (int64_t r = j.n_rows; r < n_out; r++)
        memcpy(data + (size_t)r * row_bytes, data + (size_t)(r % j.n_rows) * row_bytes, row_bytes);
    G->rng += (uint64_t)n_out * (uint64_t)n_in * SPLITMIX_GOLDEN; /* as if every row were drawn */
    int64_t ne[2] = {n_in, n_out};
    if (gguf_w_tensor(G->w, name, n_out == 1 ? 1 : 2, ne, type, data))
        return llc_fail(G->err, LLC_ERR_NOMEM, "out of memory");
    return 0;
}

/* The mixed K-quant schemes (llama.cpp's _M files) and their base type. */
static bool is_k_mix(const char *wtype) { return !strcmp(wtype, "q4_k_m") || !strcmp(wtype, "q5_k_m"); }
static uint32_t k_mix_base(const char *wtype) { return !strcmp(wtype, "q5_k_m") ? QT_Q5_K : QT_Q4_K; }

/* Weight type of a matrix under the requested scheme. */
static uint32_t matrix_type(const modelgen_params *p, const char *role, int layer) {
    if (is_k_mix(p->wtype)) {
        /* llama.cpp's Q4_K_M / Q5_K_M: Q6_K for output, and for attn_v / ffn_down in
         * the first and last eighth of the layers and every third layer between */
        int n = p->n_layers;
        bool more_bits = layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
        if (!strcmp(role, "output")) return QT_Q6_K;
        if ((!strcmp(role, "attn_v") || !strcmp(role, "ffn_down")) && more_bits) return QT_Q6_K;
        return k_mix_base(p->wtype);
    }
    return (uint32_t)qtype_from_name(p->wtype);
}

static int write_metadata(gen *G, const modelgen_params *p, const gguf *vocab, int head_dim) {
    char key[128];
    gguf_writer *w = G->w;
#define K(suffix) (snprintf(key, sizeof key, "%s." suffix, p->arch), key)
    int rc = gguf_w_str(w, "general.architecture", p->arch);
    rc |= gguf_w_str(w, "general.name", "llmchat random-weight model");
    rc |= gguf_w_u32(w, K("context_length"), (uint32_t)p->n_ctx);
    rc |= gguf_w_u32(w, K("embedding_length"), (uint32_t)p->dim);
    rc |= gguf_w_u32(w, K("block_count"), (uint32_t)p->n_layers);
    rc |= gguf_w_u32(w, K("feed_forward_length"), (uint32_t)p->ffn_dim);
    rc |= gguf_w_u32(w, K("attention.head_count"), (uint32_t)p->n_heads);
    rc |= gguf_w_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_kv_heads);
    if (head_dim * p->n_heads != p->dim) {
        rc |= gguf_w_u32(w, K("attention.key_length"), (uint32_t)head_dim);
        rc |= gguf_w_u32(w, K("attention.value_length"), (uint32_t)head_dim);
    }
    rc |= gguf_w_u32(w, K("rope.dimension_count"), (uint32_t)head_dim);
    rc |= gguf_w_f32(w, K("rope.freq_base"), p->rope_base);
    rc |= gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f);
#undef K
    for (int64_t i = 0; i < gguf_n_kv(vocab); i++) {
        const char *k = gguf_kv_key(vocab, i);
        if (!strncmp(k, "tokenizer.", 10)) rc |= gguf_w_copy(w, vocab, k);
    }
    return rc ? llc_fail(G->err, LLC_ERR_NOMEM, "out of memory writing metadata") : 0;
}

static int write_tensors(gen *G, const modelgen_params *p, int n_vocab, int head_dim) {
    int q_dim = p->n_heads * head_dim, kv_dim = p->n_kv_heads * head_dim;
    float a_dim = 1.0f / sqrtf((float)p->dim), a_q = 1.0f / sqrtf((float)q_dim);
    float a_ffn = 1.0f / sqrtf((float)p->ffn_dim);
    bool qwen2 = !strcmp(p->arch, "qwen2"), qwen3 = !strcmp(p->arch, "qwen3");
    uint32_t emb_type = is_k_mix(p->wtype) ? k_mix_base(p->wtype) : matrix_type(p, "token_embd", 0);
    int rc = add_tensor(G, "token_embd.weight", p->dim, n_vocab, emb_type, 0, 1.0f);
    if (!rc) rc = add_tensor(G, "output_norm.weight", p->dim, 1, QT_F32, 1.0f, 0.1f);
    if (!rc && !p->tied_output)
        rc = add_tensor(G, "output.weight", p->dim, n_vocab, matrix_type(p, "output", 0), 0, a_dim);
    char n[80];
    for (int l = 0; l < p->n_layers && !rc; l++) {
#define T(suffix, nin, nout, type, c, a) \
    (snprintf(n, sizeof n, "blk.%d." suffix, l), add_tensor(G, n, (nin), (nout), (type), (c), (a)))
        rc = T("attn_norm.weight", p->dim, 1, QT_F32, 1.0f, 0.1f);
        if (!rc) rc = T("attn_q.weight", p->dim, q_dim, matrix_type(p, "attn_q", l), 0, a_dim);
        if (!rc) rc = T("attn_k.weight", p->dim, kv_dim, matrix_type(p, "attn_k", l), 0, a_dim);
        if (!rc) rc = T("attn_v.weight", p->dim, kv_dim, matrix_type(p, "attn_v", l), 0, a_dim);
        float tail = p->tail_from > 0 && l >= p->tail_from ? p->tail_scale : 1.0f;
        if (!rc) rc = T("attn_output.weight", q_dim, p->dim, matrix_type(p, "attn_o", l), 0, a_q * tail);
        if (!rc && qwen2) rc = T("attn_q.bias", q_dim, 1, QT_F32, 0, 0.1f);
        if (!rc && qwen2) rc = T("attn_k.bias", kv_dim, 1, QT_F32, 0, 0.1f);
        if (!rc && qwen2) rc = T("attn_v.bias", kv_dim, 1, QT_F32, 0, 0.1f);
        if (!rc && qwen3) rc = T("attn_q_norm.weight", head_dim, 1, QT_F32, 1.0f, 0.1f);
        if (!rc && qwen3) rc = T("attn_k_norm.weight", head_dim, 1, QT_F32, 1.0f, 0.1f);
        if (!rc) rc = T("ffn_norm.weight", p->dim, 1, QT_F32, 1.0f, 0.1f);
        if (!rc) rc = T("ffn_gate.weight", p->dim, p->ffn_dim, matrix_type(p, "ffn_gate", l), 0, a_dim);
        if (!rc) rc = T("ffn_up.weight", p->dim, p->ffn_dim, matrix_type(p, "ffn_up", l), 0, a_dim);
        if (!rc) rc = T("ffn_down.weight", p->ffn_dim, p->dim, matrix_type(p, "ffn_down", l), 0, a_ffn * tail);
#undef T
    }
    return rc;
}

int modelgen_write(const modelgen_params *p, const char *path, llc_err *err) {
    if (!p->arch || (strcmp(p->arch, "llama") && strcmp(p->arch, "qwen2") && strcmp(p->arch, "qwen3")))
        return llc_fail(err, LLC_ERR_RANGE, "architecture must be llama, qwen2 or qwen3");
    if (p->dim < 1 || p->n_layers < 1 || p->n_heads < 1 || p->n_kv_heads < 1 || p->ffn_dim < 1 ||
        p->n_heads % p->n_kv_heads || (!p->head_dim && p->dim % p->n_heads))
        return llc_fail(err, LLC_ERR_RANGE, "inconsistent model shape");
    if (!p->wtype || (!is_k_mix(p->wtype) && qtype_from_name(p->wtype) < 0))
        return llc_fail(err, LLC_ERR_RANGE, "unknown weight type '%s'", p->wtype ? p->wtype : "");
    if (!p->vocab_path) return llc_fail(err, LLC_ERR_RANGE, "a vocabulary GGUF is required");
    int head_dim = p->head_dim ? p->head_dim : p->dim / p->n_heads;

    gguf *vocab = NULL;
    int rc = gguf_open(p->vocab_path, &vocab, err);
    if (rc) return rc;
    gguf_array toks;
    rc = gguf_get_arr(vocab, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, err);
    gen G = {.rng = p->seed ? p->seed : 1, .err = err, .distinct_rows = p->distinct_rows};
    if (!rc && cpu_pool_create(p->threads, &G.pool)) rc = llc_fail(err, LLC_ERR_NOMEM, "cannot start threads");
    if (!rc && gguf_writer_create(&G.w)) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) rc = write_metadata(&G, p, vocab, head_dim);
    if (!rc) rc = write_tensors(&G, p, (int)toks.n, head_dim);
    if (!rc) rc = gguf_writer_write(G.w, path, err);
    for (int i = 0; i < G.n_bufs; i++) free(G.bufs[i]);
    free(G.bufs);
    gguf_writer_free(G.w);
    if (G.pool) cpu_pool_free(G.pool);
    gguf_free(vocab);
    return rc;
}
