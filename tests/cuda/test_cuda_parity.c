/* test_cuda_parity.c — the CUDA backend against the CPU backend (whose ops are
 * themselves checked against scalar references): every op on fresh random
 * inputs, outputs poisoned with NaN first so unwritten elements show, matmul for
 * every weight type at 1, 5 and 40 rows (fused GEMV and tensor-core paths), and
 * whole-model logits on stories260K. Needs a GPU: `make test-cuda`. */
#include "engine/gguf.h"
#include "engine/model.h"
#include "kernels/quant.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "tests/test.h"

static backend *g_cpu, *g_gpu;
static uint64_t g_rng = 77;

static float frand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

/* Device buffer of n floats on the GPU, filled from host (or NaN-poisoned so
 * unwritten elements show). There is no to_device op: it goes up as an F32
 * "tensor" through weight_load, and is freed with the backend's free. */
static float *gpu_floats(const float *host, size_t n) {
    float *tmp = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) tmp[i] = host ? host[i] : NAN;
    bk_tensor t = {.name = "buf", .type = QT_F32, .n_in = (int64_t)n, .n_out = 1,
                   .n_bytes = n * sizeof(float), .data = tmp};
    bk_weight w = {0};
    CHECK(g_gpu->ops->weight_load(g_gpu->ctx, &t, &w, NULL) == 0);
    free(tmp);
    return (float *)w.data;
}

static void to_host(const float *d, float *h, size_t n) { g_gpu->ops->to_host(g_gpu->ctx, h, d, n * sizeof(float)); }

static double max_rel(const float *got, const float *want, size_t n) {
    double worst = 0, scale = 1e-6;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        worst = fmax(worst, fabs(got[i] - want[i]) / scale);
    }
    return worst;
}

/* A batch of 3 sequences (prefill chunk, decode row, short chunk), shuffled blocks. */
typedef struct step {
    int32_t tokens[64], pos[64], seq_start[4], kv_len[3], table[3 * 8], slots[64], out_rows[3];
    bk_batch b;
} step;

static void make_step(step *s, int vocab) {
    int starts[3] = {10, 40, 0}, rows[3] = {30, 1, 5}, T = 0, blk = 0;
    int order[24];
    for (int i = 0; i < 24; i++) order[i] = (i * 7) % 24;
    for (int q = 0; q < 3; q++) {
        s->seq_start[q] = T;
        s->kv_len[q] = starts[q] + rows[q];
        for (int k = 0; k * 16 < s->kv_len[q]; k++) s->table[q * 8 + k] = order[blk++];
        for (int r = 0; r < rows[q]; r++, T++) {
            s->tokens[T] = (int32_t)((T * 37 + 11) % vocab);
            s->pos[T] = starts[q] + r;
            s->slots[T] = s->table[q * 8 + s->pos[T] / 16] * 16 + s->pos[T] % 16;
        }
        s->out_rows[q] = T - 1;
    }
    s->seq_start[3] = T;
    s->b = (bk_batch){.n_tokens = T, .tokens = s->tokens, .positions = s->pos, .n_seqs = 3,
                      .seq_start = s->seq_start, .kv_len = s->kv_len, .block_table = s->table,
                      .max_blocks = 8, .slots = s->slots, .n_out = 3, .out_rows = s->out_rows};
}

static void test_matmul_every_type(void) {
    const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_K, QT_Q6_K};
    const int rows_list[] = {1, 5, 40};
    const int64_t n_in = 512, n_out = 200;
    step st;
    make_step(&st, 100);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        size_t rb = qtype_row_bytes(types[ti], n_in);
        uint8_t *wdata = malloc(rb * n_out);
        float *row = malloc(n_in * sizeof(float));
        for (int64_t o = 0; o < n_out; o++) {
            for (int64_t i = 0; i < n_in; i++) row[i] = frand();
            quantize_row(types[ti], row, wdata + o * rb, n_in);
        }
        bk_tensor t = {.name = "w", .type = types[ti], .n_in = n_in, .n_out = n_out,
                       .n_bytes = rb * n_out, .data = wdata};
        bk_weight wc, wg;
        CHECK(g_cpu->ops->weight_load(g_cpu->ctx, &t, &wc, NULL) == 0);
        CHECK(g_gpu->ops->weight_load(g_gpu->ctx, &t, &wg, NULL) == 0);
        for (size_t ri = 0; ri < 3; ri++) {
            int rows = rows_list[ri];
            float *x = malloc((size_t)rows * n_in * sizeof(float));
            for (int64_t i = 0; i < rows * n_in; i++) x[i] = frand();
            float *want = malloc((size_t)rows * n_out * sizeof(float)), *got = malloc((size_t)rows * n_out * sizeof(float));
            g_cpu->ops->begin(g_cpu->ctx, &st.b, NULL);
            g_cpu->ops->matmul(g_cpu->ctx, &wc, x, rows, want);
            float *dx = gpu_floats(x, (size_t)rows * n_in), *dy = gpu_floats(NULL, (size_t)rows * n_out);
            llc_err err;
            CHECKF(g_gpu->ops->begin(g_gpu->ctx, &st.b, &err) == 0, "%s", err.msg);
            g_gpu->ops->matmul(g_gpu->ctx, &wg, dx, rows, dy);
            to_host(dy, got, (size_t)rows * n_out);
            double e = max_rel(got, want, (size_t)rows * n_out);
            double tol = types[ti] == QT_F32 && rows <= 8 ? 1e-5 : 2e-2; /* F16 activations on tensor cores */
            CHECKF(e < tol, "%s, %d rows: max relative error %g", qtype_name(types[ti]), rows, e);
            g_gpu->ops->free(g_gpu->ctx, dx);
            g_gpu->ops->free(g_gpu->ctx, dy);
            free(x), free(want), free(got);
        }
        g_gpu->ops->free(g_gpu->ctx, (void *)wg.data);
        free(wdata);
        free(row);
    }
}

static void test_attention_and_small_ops(void) {
    step st;
    make_step(&st, 100);
    const int T = st.b.n_tokens, n_heads = 8, n_kv = 2, hd = 64, kv_dim = n_kv * hd, q_dim = n_heads * hd;
    const size_t cache = (size_t)24 * 16 * kv_dim;
    float *q = malloc((size_t)T * q_dim * 4), *k = malloc((size_t)T * kv_dim * 4), *v = malloc((size_t)T * kv_dim * 4);
    float *kc = malloc(cache * 4), *vc = malloc(cache * 4);
    for (int i = 0; i < T * q_dim; i++) q[i] = frand();
    for (int i = 0; i < T * kv_dim; i++) k[i] = frand(), v[i] = frand();
    for (size_t i = 0; i < cache; i++) kc[i] = frand(), vc[i] = frand();
    float *dq = gpu_floats(q, (size_t)T * q_dim), *dk = gpu_floats(k, (size_t)T * kv_dim), *dv = gpu_floats(v, (size_t)T * kv_dim);
    float *dkc = gpu_floats(kc, cache), *dvc = gpu_floats(vc, cache), *dout = gpu_floats(NULL, (size_t)T * q_dim);
    llc_err err;
    CHECK(g_cpu->ops->begin(g_cpu->ctx, &st.b, &err) == 0);
    CHECKF(g_gpu->ops->begin(g_gpu->ctx, &st.b, &err) == 0, "%s", err.msg);
    /* rope (llama style, with frequency factors), kv_store, attention */
    float factors[32];
    for (int i = 0; i < 32; i++) factors[i] = 1.0f + 0.1f * (float)i;
    bk_rope rp = {BK_ROPE_NORMAL, hd, 10000.0f, 1.0f, factors};
    g_cpu->ops->rope(g_cpu->ctx, q, n_heads, hd, &rp);
    g_gpu->ops->rope(g_gpu->ctx, dq, n_heads, hd, &rp);
    rp.style = BK_ROPE_NEOX;
    rp.freq_factors = NULL;
    g_cpu->ops->rope(g_cpu->ctx, k, n_kv, hd, &rp);
    g_gpu->ops->rope(g_gpu->ctx, dk, n_kv, hd, &rp);
    float *got = malloc((size_t)T * q_dim * 4);
    to_host(dq, got, (size_t)T * q_dim);
    CHECKF(max_rel(got, q, (size_t)T * q_dim) < 1e-5, "rope (normal): %g", max_rel(got, q, (size_t)T * q_dim));
    to_host(dk, got, (size_t)T * kv_dim);
    CHECKF(max_rel(got, k, (size_t)T * kv_dim) < 1e-5, "rope (neox): %g", max_rel(got, k, (size_t)T * kv_dim));
    g_cpu->ops->kv_store(g_cpu->ctx, kc, vc, k, v, kv_dim);
    g_gpu->ops->kv_store(g_gpu->ctx, dkc, dvc, dk, dv, kv_dim);
    bk_attn at = {n_heads, n_kv, hd, 16, 0.125f};
    float *want = malloc((size_t)T * q_dim * 4);
    g_cpu->ops->attention(g_cpu->ctx, q, kc, vc, want, &at);
    g_gpu->ops->attention(g_gpu->ctx, dq, dkc, dvc, dout, &at);
    to_host(dout, got, (size_t)T * q_dim);
    CHECKF(max_rel(got, want, (size_t)T * q_dim) < 1e-4, "attention: %g", max_rel(got, want, (size_t)T * q_dim));
    /* copy_blocks, then silu_mul, add, gather */
    int32_t src[2] = {3, 5}, dst[2] = {20, 21};
    g_cpu->ops->copy_blocks(g_cpu->ctx, kc, src, dst, 2, (size_t)16 * kv_dim);
    g_gpu->ops->copy_blocks(g_gpu->ctx, dkc, src, dst, 2, (size_t)16 * kv_dim);
    float *gk = malloc(cache * 4);
    to_host(dkc, gk, cache);
    CHECK(max_rel(gk, kc, cache) == 0);
    g_cpu->ops->silu_mul(g_cpu->ctx, q, want, (size_t)T * q_dim);
    g_gpu->ops->silu_mul(g_gpu->ctx, dq, dout, (size_t)T * q_dim);
    g_cpu->ops->add(g_cpu->ctx, q, want, (size_t)T * q_dim);
    g_gpu->ops->add(g_gpu->ctx, dq, dout, (size_t)T * q_dim);
    to_host(dq, got, (size_t)T * q_dim);
    CHECKF(max_rel(got, q, (size_t)T * q_dim) < 1e-4, "silu_mul + add: %g", max_rel(got, q, (size_t)T * q_dim));
    float gathered[3 * 512], gw[3 * 512];
    float *dg = gpu_floats(NULL, 3 * (size_t)q_dim);
    g_cpu->ops->gather_out_rows(g_cpu->ctx, q, q_dim, gw);
    g_gpu->ops->gather_out_rows(g_gpu->ctx, dq, q_dim, dg);
    to_host(dg, gathered, 3 * (size_t)q_dim);
    CHECK(max_rel(gathered, gw, 3 * (size_t)q_dim) < 1e-4);
    float *bufs[] = {dq, dk, dv, dkc, dvc, dout, dg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_gpu->ops->free(g_gpu->ctx, bufs[i]);
    free(q), free(k), free(v), free(kc), free(vc), free(got), free(want), free(gk);
}

/* stories260K: one varlen step on both backends, logits compared. */
static void test_model_logits(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", t_shared());
    gguf *g;
    llc_err err;
    model *mc = NULL, *mg = NULL;
    model_kv *kc = NULL, *kg = NULL;
    if (gguf_open(path, &g, &err) || model_load(g, g_cpu, &mc, &err) || model_load(g, g_gpu, &mg, &err) ||
        model_kv_create(mc, 24, 16, &kc, &err) || model_kv_create(mg, 24, 16, &kg, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        CHECK(0);
        return;
    }
    step st;
    make_step(&st, model_hparams_of(mc)->n_vocab);
    /* (positions before each sequence's rows read zeroed KV on both backends) */
    int V = model_hparams_of(mc)->n_vocab;
    float *want = malloc((size_t)3 * V * 4), *got = malloc((size_t)3 * V * 4);
    CHECK(model_forward(mc, kc, &st.b, want, &err) == 0);
    CHECKF(model_forward(mg, kg, &st.b, got, &err) == 0, "%s", err.msg);
    double e = max_rel(got, want, (size_t)3 * V);
    fprintf(stderr, "  stories260K logits: max relative error %.3g\n", e);
    CHECKF(e < 1e-3, "logits differ: %g", e);
    for (int r = 0; r < 3; r++) { /* same argmax */
        int a = 0, b = 0;
        for (int i = 1; i < V; i++) {
            if (want[r * V + i] > want[r * V + a]) a = i;
            if (got[r * V + i] > got[r * V + b]) b = i;
        }
        CHECK(a == b);
    }
    free(want), free(got);
    model_kv_free(kc), model_kv_free(kg), model_free(mc), model_free(mg), gguf_free(g);
}

int main(void) {
    llc_err err;
    if (!backend_cuda_available() || backend_cuda_create(0, &g_gpu, &err)) {
        printf("no usable GPU: the CUDA parity tests need one\n0 passed, 1 failed\n");
        return 1;
    }
    backend_cpu_create(2, &g_cpu, &err);
    RUN(test_matmul_every_type);
    RUN(test_attention_and_small_ops);
    RUN(test_model_logits);
    backend_free(g_gpu);
    backend_free(g_cpu);
    return t_summary();
}
