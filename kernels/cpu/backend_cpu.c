/* backend_cpu.c — the CPU backend: fills backend_ops with host-memory ops run on
 * the worker pool. Matmuls go to kernels/cpu/matmul; the other ops are here, as
 * straightforward loops split across threads by rows (or rows x heads). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/quant.h"
#include "kernels/backend.h"
#include "kernels/fault.h"
#include "kernels/topk.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/hugemem.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/recurrent.h"

typedef struct cpu_ctx {
    cpu_pool *pool;
    bk_batch batch; /* pointers stay valid for the step (the caller keeps them) */
    int max_kv_len;
    /* quantized matrices packed ahead for few-row GEMMs (freed with the backend) */
    cpu_packed_w **packs; /* each its own allocation: weights point at them */
    int n_packs, cap_packs;
    size_t packed_bytes, pack_budget;
    /* weights copied out of the file mapping (huge_alloc'd): misaligned ones
     * (general.alignment < 4), and those read in place at every step while
     * copy_budget lasts (see keep_in_huge_pages) */
    struct weight_copy { void *p; size_t n; } *copies;
    int n_copies, cap_copies;
    size_t copy_budget;
} cpu_ctx;

/* ---- memory ---- */

static void cpu_destroy(void *ctx_) {
    cpu_ctx *ctx = ctx_;
    for (int i = 0; i < ctx->n_packs; i++) {
        cpu_packed_w_free(ctx->packs[i]);
        free(ctx->packs[i]);
    }
    free(ctx->packs);
    for (int i = 0; i < ctx->n_copies; i++) huge_free(ctx->copies[i].p, ctx->copies[i].n);
    free(ctx->copies);
    cpu_pool_free(ctx->pool);
    free(ctx);
}

/* Drops the whole pages of [p, p + n) from this process's memory (a read-only
 * file mapping: they are read back from the page cache or the file if touched). */
static void drop_pages(const void *p, size_t n) {
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    const uintptr_t a = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    const uintptr_t b = ((uintptr_t)p + n) & ~((uintptr_t)page - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED); /* a hint: failure costs only memory */
}

/* Packs a quantized matrix for few-row GEMMs (batched decode, speculative checks:
 * 15-20% faster at 3-9 rows) while the packed copies stay within the budget. The
 * embedding table is left alone: it is read a row at a time. */
static void maybe_pack(cpu_ctx *ctx, const bk_tensor *t, bk_weight *w) {
    if (!ctx->pack_budget || t->n_out < 16 || !strcmp(t->name, "token_embd.weight")) return;
    size_t bytes = cpu_matmul_prepack_bytes(w->type, w->n_in, w->n_out);
    if (!bytes) return;
    if (ctx->packed_bytes + bytes > ctx->pack_budget) { /* over budget: no more packing */
        ctx->pack_budget = 0;
        return;
    }
    if (ctx->n_packs == ctx->cap_packs) {
        int cap = ctx->cap_packs ? 2 * ctx->cap_packs : 64;
        cpu_packed_w **p = realloc(ctx->packs, (size_t)cap * sizeof *p);
        if (!p) return;
        ctx->packs = p;
        ctx->cap_packs = cap;
    }
    cpu_packed_w *pk = calloc(1, sizeof *pk);
    if (!pk) return;
    if (cpu_matmul_prepack(ctx->pool, w->type, w->data, w->n_in, w->n_out, pk) || !pk->data) {
        free(pk);
        return;
    }
    ctx->packed_bytes += pk->bytes;
    ctx->packs[ctx->n_packs++] = pk;
    w->aux = pk;
    /* the packed copy serves every call: let the file's pages go, so resident
     * memory stays about the size of the weights (they come back if read) */
    if (t->droppable && cpu_matmul_packed_suffices(w->type)) drop_pages(t->data, t->n_bytes);
}

/* memcpy in 2 MB pieces split across the pool: the first touch of fresh memory (the
 * kernel zeroing each huge page) is most of a copy's time, and it runs per thread */
typedef struct copy_job { uint8_t *dst; const uint8_t *src; size_t n; } copy_job;
static void copy_work(void *arg, int ith, int nth) {
    const copy_job *j = arg;
    const size_t piece = (size_t)2 << 20;
    long lo, hi;
    cpu_split((long)((j->n + piece - 1) / piece), ith, nth, &lo, &hi);
    for (long i = lo; i < hi; i++) {
        const size_t at = (size_t)i * piece, len = j->n - at < piece ? j->n - at : piece;
        memcpy(j->dst + at, j->src + at, len);
    }
}

/* Copies t's bytes into huge_alloc'd memory kept until the backend goes; *t becomes
 * a view of the copy. LLC_ERR_NOMEM when there is no memory for it. */
static int copy_tensor(cpu_ctx *ctx, bk_tensor *t) {
    if (ctx->n_copies == ctx->cap_copies) {
        int cap = ctx->cap_copies ? 2 * ctx->cap_copies : 16;
        struct weight_copy *c = realloc(ctx->copies, (size_t)cap * sizeof *c);
        if (!c) return LLC_ERR_NOMEM;
        ctx->copies = c;
        ctx->cap_copies = cap;
    }
    void *copy = huge_alloc(t->n_bytes);
    if (!copy) return LLC_ERR_NOMEM;
    copy_job j = {copy, t->data, t->n_bytes};
    cpu_pool_run(ctx->pool, copy_work, &j);
    ctx->copies[ctx->n_copies++] = (struct weight_copy){copy, t->n_bytes};
    if (t->droppable) drop_pages(t->data, t->n_bytes); /* the copy replaces them */
    t->data = copy;
    t->droppable = false;
    return 0;
}

/* A GGUF file with general.alignment 1 or 2 may put a tensor at any byte; the
 * ops read floats and fp16 scales in place, so such a tensor is copied to
 * aligned memory. */
static int align_tensor(cpu_ctx *ctx, bk_tensor *t, llc_err *err) {
    if ((uintptr_t)t->data % 4 == 0) return 0;
    if (copy_tensor(ctx, t)) return llc_fail(err, LLC_ERR_NOMEM, "out of memory for tensor '%s'", t->name);
    return 0;
}

/* A matrix read in place at every step (not packed ahead, or not only) moves out of
 * the file mapping into huge pages: streaming a file mapping's 4 KB page-cache pages
 * cost a third of the decode speed of F16 weights at the AVX2 level and a fifth of
 * Q4_K's on one thread (measured, TinyLlama shapes, Zen 4). The file's pages are
 * dropped once copied, so resident memory stays the size of the weights. Best
 * effort, within copy_budget (half the memory available at start; LLC_MMAP=1 turns
 * it off): a weight that does not fit stays where it is. The embedding table is
 * read a few rows a step and stays. */
static void keep_in_huge_pages(cpu_ctx *ctx, bk_tensor *t, const bk_weight *w) {
    if (!t->droppable || t->n_bytes > ctx->copy_budget || !strcmp(t->name, "token_embd.weight")) return;
    if (w->aux && cpu_matmul_packed_suffices(w->type)) return; /* the packed copy serves every call */
    if (copy_tensor(ctx, t) == 0) ctx->copy_budget -= t->n_bytes;
}

static int cpu_weight_load(void *ctx_, const bk_tensor *t_in, bk_weight *out, llc_err *err) {
    cpu_ctx *ctx = ctx_;
    bk_tensor view = *t_in, *t = &view;
    const qtype_info *qi = qtype_get(t->type);
    if (!qi || !qi->supported)
        return llc_fail(err, LLC_ERR_UNSUPPORTED, "tensor '%s' has type %s, which llmchat does not support",
                        t->name, qtype_name(t->type));
    int rc = align_tensor(ctx, t, err);
    if (rc) return rc;
    out->type = t->type;
    out->n_in = t->n_in;
    out->n_out = t->n_out;
    out->data = t->data;
    out->aux = NULL;
    maybe_pack(ctx, t, out); /* quantized matrices only */
    keep_in_huge_pages(ctx, t, out);
    out->data = t->data;
    return 0;
}

static void *cpu_alloc(void *ctx, size_t bytes) {
    if (llc_fault_alloc_fails()) return NULL; /* tests: out of memory here */
    size_t size = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, size ? size : 64);
}
static void cpu_free(void *ctx, void *p) { free(p); }
static int cpu_to_host(void *ctx, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); return 0; }

/* top_k: each thread a share of the rows, read where they are (no copy) */
typedef struct {
    const float *x;
    int rows, n, k;
    int32_t *ids;
    float *vals;
} topk_job;
static void topk_work(void *arg, int ith, int nth) {
    const topk_job *j = arg;
    for (int r = ith; r < j->rows; r += nth)
        topk_row(j->x + (size_t)r * j->n, j->n, j->k, j->ids + (size_t)r * j->k, j->vals + (size_t)r * j->k);
}
static int cpu_top_k(void *ctx_, const float *x, int rows, int n, int k, int32_t *ids, float *vals) {
    cpu_ctx *ctx = ctx_;
    if (k < 1 || k > TOPK_MAX || n < 1) return LLC_ERR_RANGE;
    topk_job j = {x, rows, n, k, ids, vals};
    if (rows == 1) topk_work(&j, 0, 1);
    else cpu_pool_run(ctx->pool, topk_work, &j);
    return 0;
}
static int cpu_memset0(void *ctx, void *p, size_t bytes) { memset(p, 0, bytes); return 0; }

static int cpu_begin(void *ctx_, const bk_batch *b, llc_err *err) {
    cpu_ctx *ctx = ctx_;
    int max_kv = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        if (b->seq_start[s] > b->seq_start[s + 1] || b->kv_len[s] < 0)
            return llc_fail(err, LLC_ERR_RANGE, "malformed batch: sequence %d", s);
        if (b->kv_len[s] > max_kv) max_kv = b->kv_len[s];
    }
    if (b->n_seqs < 0 || b->seq_start[0] != 0 || b->seq_start[b->n_seqs] != b->n_tokens)
        return llc_fail(err, LLC_ERR_RANGE, "malformed batch: rows do not add up");
    ctx->batch = *b;
    ctx->max_kv_len = max_kv;
    return 0;
}

/* ---- row-parallel helpers ---- */

typedef struct rows_job {
    const cpu_ctx *ctx;
    const bk_weight *w;
    const float *x;
    float *out;
    int rows, dim;
    float eps;
    const void *extra;
} rows_job;

static void embed_job(void *arg, int ith, int nth) {
    rows_job *j = arg;
    long lo, hi;
    cpu_split(j->rows, ith, nth, &lo, &hi);
    size_t row_bytes = qtype_row_bytes(j->w->type, j->w->n_in);
    for (long r = lo; r < hi; r++) {
        int32_t tok = j->ctx->batch.tokens[r];
        dequantize_row(j->w->type, (const uint8_t *)j->w->data + (size_t)tok * row_bytes,
                       j->out + (size_t)r * j->dim, j->dim);
    }
}

static int cpu_embed(void *ctx_, const bk_weight *table, float *x) {
    cpu_ctx *ctx = ctx_;
    rows_job j = {.ctx = ctx, .w = table, .out = x, .rows = ctx->batch.n_tokens, .dim = (int)table->n_in};
    cpu_pool_run(ctx->pool, embed_job, &j);
    return 0;
}

static void rmsnorm_job(void *arg, int ith, int nth) {
    rows_job *j = arg;
    long lo, hi;
    cpu_split(j->rows, ith, nth, &lo, &hi);
    const float *w = j->w->data; /* norm weights are F32 (checked at load) */
    for (long r = lo; r < hi; r++) {
        const float *x = j->x + (size_t)r * j->dim;
        float *o = j->out + (size_t)r * j->dim;
        double ss = 0;
        for (int i = 0; i < j->dim; i++) ss += (double)x[i] * x[i];
        float scale = (float)(1.0 / sqrt(ss / j->dim + j->eps));
        for (int i = 0; i < j->dim; i++) o[i] = x[i] * scale * w[i];
    }
}

static int cpu_rmsnorm(void *ctx_, const float *x, const bk_weight *w, float *out, int rows,
                        int dim, float eps) {
    cpu_ctx *ctx = ctx_;
    rows_job j = {.ctx = ctx, .w = w, .x = x, .out = out, .rows = rows, .dim = dim, .eps = eps};
    if ((long)rows * dim < 4096) rmsnorm_job(&j, 0, 1);
    else cpu_pool_run(ctx->pool, rmsnorm_job, &j);
    return 0;
}

static int cpu_matmul_op(void *ctx_, const bk_weight *w, const float *x, int rows, float *y) {
    cpu_ctx *ctx = ctx_;
    return cpu_matmul_packed(ctx->pool, w->type, w->data, w->aux, w->n_in, w->n_out, x, rows, y);
}

_Static_assert(BK_MATMUL_MULTI_MAX <= CPU_MATMUL_MULTI_MAX, "the CPU matmul_multi takes fewer matrices");

static int cpu_matmul_multi_op(void *ctx_, const bk_weight *const *w, int n, const float *x, int rows,
                               float *const *y) {
    cpu_ctx *ctx = ctx_;
    if (n < 0 || n > CPU_MATMUL_MULTI_MAX) return LLC_ERR_RANGE;
    cpu_matmul_w mw[CPU_MATMUL_MULTI_MAX];
    for (int i = 0; i < n; i++)
        mw[i] = (cpu_matmul_w){.type = w[i]->type, .W = w[i]->data, .packed = w[i]->aux,
                               .n_in = w[i]->n_in, .n_out = w[i]->n_out};
    return cpu_matmul_multi(ctx->pool, mw, n, x, rows, y);
}

static int cpu_add_bias(void *ctx, float *y, const bk_weight *b, int rows) {
    const float *bias = b->data;
    for (int r = 0; r < rows; r++)
        for (int64_t i = 0; i < b->n_in; i++) y[(size_t)r * b->n_in + i] += bias[i];
    return 0;
}

typedef struct rope_job {
    const cpu_ctx *ctx;
    float *x;
    int n_heads, head_dim;
    const bk_rope *rp;
} rope_job;

/* theta and the scale of pair i at position pos (bk_rope in backend.h says how) */
static void rope_pair(const bk_rope *rp, float pos, int i, float *theta, float *scale) {
    float extrap = pos * powf(rp->freq_base, -2.0f * (float)i / (float)rp->n_rot);
    if (rp->freq_factors) extrap /= rp->freq_factors[i];
    const float interp = rp->freq_scale * extrap;
    *theta = interp;
    if (rp->ext_factor != 0.0f) {
        float y = ((float)i - rp->corr_lo) / fmaxf(0.001f, rp->corr_hi - rp->corr_lo);
        const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * rp->ext_factor;
        *theta = interp * (1.0f - mix) + extrap * mix;
    }
    *scale = rp->mscale != 0.0f ? rp->mscale : 1.0f;
}

static void rope_job_fn(void *arg, int ith, int nth) {
    rope_job *j = arg;
    const bk_rope *rp = j->rp;
    long lo, hi;
    cpu_split(j->ctx->batch.n_tokens, ith, nth, &lo, &hi);
    int half = rp->n_rot / 2;
    for (long r = lo; r < hi; r++) {
        const int32_t p = j->ctx->batch.positions[r];
        for (int i = 0; i < half; i++) {
            float theta, m;
            rope_pair(rp, (float)p, i, &theta, &m);
            float c = cosf(theta) * m, s = sinf(theta) * m;
            for (int h = 0; h < j->n_heads; h++) {
                float *v = j->x + ((size_t)r * j->n_heads + h) * j->head_dim;
                int a = rp->style == BK_ROPE_NEOX ? i : 2 * i;
                int b = rp->style == BK_ROPE_NEOX ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            }
        }
        if (rp->temp_scale != 0.0f) {
            const float t = (float)(log(floor(((float)p + rp->temp_offset) / (float)rp->temp_floor) + 1.0) *
                                        rp->temp_scale + 1.0);
            float *v = j->x + (size_t)r * j->n_heads * j->head_dim;
            for (size_t k = 0; k < (size_t)j->n_heads * j->head_dim; k++) v[k] *= t;
        }
    }
}

static int cpu_rope(void *ctx_, float *x, int n_heads, int head_dim, const bk_rope *rp) {
    cpu_ctx *ctx = ctx_;
    rope_job j = {ctx, x, n_heads, head_dim, rp};
    cpu_pool_run(ctx->pool, rope_job_fn, &j);
    return 0;
}

static int cpu_kv_store(void *ctx_, void *k_cache, void *v_cache, const float *k,
                         const float *v, int kv_dim, uint32_t kv_type) {
    cpu_ctx *ctx = ctx_;
    if (!cpu_kv_type_supported(kv_type, kv_dim, kv_dim)) return LLC_ERR_UNSUPPORTED;
    const size_t rb = qtype_row_bytes(kv_type, kv_dim);
    for (int r = 0; r < ctx->batch.n_tokens; r++) {
        size_t slot = (size_t)ctx->batch.slots[r];
        cpu_kv_write_row(kv_type, (uint8_t *)k_cache + slot * rb, k + (size_t)r * kv_dim, kv_dim);
        cpu_kv_write_row(kv_type, (uint8_t *)v_cache + slot * rb, v + (size_t)r * kv_dim, kv_dim);
    }
    return 0;
}

static int cpu_attention(void *ctx_, const float *q, const void *k_cache, const void *v_cache,
                          float *out, const bk_attn *a) {
    cpu_ctx *ctx = ctx_;
    if (!cpu_kv_type_supported(a->kv_type, a->n_kv_heads * a->head_dim, a->head_dim)) return LLC_ERR_UNSUPPORTED;
    cpu_attention_run(ctx->pool, &ctx->batch, a, q, k_cache, v_cache, out, ctx->max_kv_len);
    return 0;
}

static int cpu_silu_mul(void *ctx_, float *gate, const float *up, size_t n) {
    cpu_ctx *ctx = ctx_;
    cpu_silu_mul_run(ctx->pool, gate, up, n);
    return 0;
}

static int cpu_add(void *ctx_, float *x, const float *y, size_t n) {
    cpu_ctx *ctx = ctx_;
    cpu_add_run(ctx->pool, x, y, n);
    return 0;
}

static int cpu_copy_blocks(void *ctx, void *cache, const int32_t *src, const int32_t *dst, int n,
                            size_t block_bytes) {
    uint8_t *c = cache;
    for (int i = 0; i < n; i++)
        memcpy(c + (size_t)dst[i] * block_bytes, c + (size_t)src[i] * block_bytes, block_bytes);
    return 0;
}

static int cpu_gather_out_rows(void *ctx_, const float *x, int dim, float *out) {
    cpu_ctx *ctx = ctx_;
    for (int k = 0; k < ctx->batch.n_out; k++)
        memcpy(out + (size_t)k * dim, x + (size_t)ctx->batch.out_rows[k] * dim,
               (size_t)dim * sizeof(float));
    return 0;
}

static int cpu_scale(void *ctx, float *x, float s, size_t n) { cpu_scale_run(x, s, n); return 0; }

static int cpu_gelu_mul(void *ctx_, float *gate, const float *up, size_t n) {
    cpu_ctx *ctx = ctx_;
    cpu_gelu_mul_run(ctx->pool, gate, up, n);
    return 0;
}

static int cpu_swiglu_oai(void *ctx, float *gate, const float *up, size_t n, float alpha, float limit) {
    (void)ctx;
    cpu_swiglu_oai_run(gate, up, n, alpha, limit);
    return 0;
}

static int cpu_gather_rows(void *ctx, const float *x, int dim, const int32_t *rows, int n, float *out) {
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * dim, x + (size_t)rows[i] * dim, (size_t)dim * sizeof(float));
    return 0;
}

static int cpu_scatter_add_rows(void *ctx, float *x, int dim, const int32_t *rows, const float *weights,
                                 int n, const float *y) {
    for (int i = 0; i < n; i++) {
        float *xr = x + (size_t)rows[i] * dim;
        const float *yr = y + (size_t)i * dim;
        const float w = weights[i];
        for (int d = 0; d < dim; d++) xr[d] += w * yr[d];
    }
    return 0;
}

/* ---- recurrent layers ---- */

static int cpu_mul(void *ctx, float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= y[i];
    return 0;
}

static int cpu_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    memmove(dst, src, bytes);
    return 0;
}

static int cpu_conv1d_state(void *ctx_, const float *x, int channels, const bk_weight *w, const bk_weight *b,
                            float *const *states, bool silu, float *out) {
    cpu_ctx *ctx = ctx_;
    if (w->type != QT_F32 || w->n_out != channels || (b && b->data && (b->type != QT_F32 || b->n_in != channels)))
        return LLC_ERR_UNSUPPORTED;
    cpu_conv1d_state_run(ctx->pool, &ctx->batch, x, channels, w->data, (int)w->n_in, b && b->data ? b->data : NULL,
                         states, silu, out);
    return 0;
}

static int cpu_mul_sigmoid(void *ctx, float *x, const float *g, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= 1.0f / (1.0f + expf(-g[i]));
    return 0;
}

static int cpu_delta_net(void *ctx_, const float *qkv, const float *alpha, const float *beta, const bk_weight *dt_bias,
                         const bk_weight *a, float *const *states, const bk_delta *d, float *out) {
    cpu_ctx *ctx = ctx_;
    if (dt_bias->type != QT_F32 || a->type != QT_F32 || d->head_k > 256 || d->n_k_heads < 1 ||
        d->n_v_heads % d->n_k_heads)
        return LLC_ERR_UNSUPPORTED;
    cpu_delta_net_run(ctx->pool, &ctx->batch, qkv, alpha, beta, dt_bias->data, a->data, states, d, out);
    return 0;
}

static int cpu_ssm_scan(void *ctx_, const float *xbc, const float *dt, const bk_weight *dt_bias, const bk_weight *a,
                        const bk_weight *d, float *const *states, const bk_ssm *g, float *out) {
    cpu_ctx *ctx = ctx_;
    if (dt_bias->type != QT_F32 || a->type != QT_F32 || d->type != QT_F32 || g->n_groups < 1 ||
        g->n_heads % g->n_groups)
        return LLC_ERR_UNSUPPORTED;
    cpu_ssm_scan_run(ctx->pool, &ctx->batch, xbc, dt, dt_bias->data, a->data, d->data, states, g, out);
    return 0;
}

static int cpu_rmsnorm_groups(void *ctx, float *x, const bk_weight *w, int rows, int dim, int n_groups, float eps) {
    if (w->type != QT_F32 || n_groups < 1 || dim % n_groups) return LLC_ERR_UNSUPPORTED;
    const float *wd = w->data;
    const int n = dim / n_groups;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < n_groups; g++) {
            float *v = x + (size_t)r * dim + (size_t)g * n;
            float sum = 0.0f;
            for (int i = 0; i < n; i++) sum += v[i] * v[i];
            const float scale = 1.0f / sqrtf(sum / (float)n + eps);
            for (int i = 0; i < n; i++) v[i] = v[i] * scale * wd[g * n + i];
        }
    return 0;
}

static const backend_ops g_cpu_ops = {
    .destroy = cpu_destroy,
    .weight_load = cpu_weight_load,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_host = cpu_to_host,
    .top_k = cpu_top_k,
    .memset0 = cpu_memset0,
    .begin = cpu_begin,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul_op,
    .add_bias = cpu_add_bias,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .silu_mul = cpu_silu_mul,
    .add = cpu_add,
    .copy_blocks = cpu_copy_blocks,
    .gather_out_rows = cpu_gather_out_rows,
    .scale = cpu_scale,
    .gelu_mul = cpu_gelu_mul,
    .swiglu_oai = cpu_swiglu_oai,
    .gather_rows = cpu_gather_rows,
    .scatter_add_rows = cpu_scatter_add_rows,
    .matmul_multi = cpu_matmul_multi_op,
    .mul = cpu_mul,
    .copy = cpu_copy,
    .conv1d_state = cpu_conv1d_state,
    .mul_sigmoid = cpu_mul_sigmoid,
    .delta_net = cpu_delta_net,
    .ssm_scan = cpu_ssm_scan,
    .rmsnorm_groups = cpu_rmsnorm_groups,
};

int backend_cpu_create(int n_threads, backend **out, llc_err *err) {
    const backend_cpu_opts o = {.n_threads = n_threads};
    return backend_cpu_create_opts(&o, out, err);
}

int backend_cpu_create_opts(const backend_cpu_opts *o, backend **out, llc_err *err) {
    *out = NULL;
    backend *b = calloc(1, sizeof *b);
    cpu_ctx *ctx = calloc(1, sizeof *ctx);
    if (!b || !ctx || cpu_pool_create(o->n_threads, &ctx->pool) != 0) {
        free(b);
        free(ctx);
        return llc_fail(err, LLC_ERR_NOMEM, "cannot start the CPU worker threads");
    }
    /* packed copies of quantized weights: up to an eighth of the RAM */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    ctx->pack_budget = o->no_prepack ? 0 : pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 8 : 0;
    /* weights copied into huge pages: up to half the memory available now */
    const int64_t avail = llc_mem_available();
    ctx->copy_budget = o->keep_mapped || avail < 0 ? 0 : (size_t)avail / 2;
    b->name = "cpu";
    b->ops = &g_cpu_ops;
    b->ctx = ctx;
    *out = b;
    return 0;
}

void backend_free(backend *b) {
    if (!b) return;
    b->ops->destroy(b->ctx);
    free(b);
}
