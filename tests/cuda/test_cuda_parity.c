/* test_cuda_parity.c — the CUDA backend against the CPU backend (whose ops are
 * themselves checked against scalar references): every op on fresh random
 * inputs, outputs poisoned with NaN first so unwritten elements show, matmul for
 * every weight type at 1, 5 and 40 rows (fused GEMV and tensor-core paths), and
 * whole-model logits on stories260K and the architectures of models/arch. Needs a GPU: `make test-cuda`. */
#include "engine/model/batch.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "kernels/quant.h"
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/topk.h"
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

/* Device copy of `bytes` bytes (a multiple of 4) as they are. */
static float *gpu_bytes(const void *host, size_t bytes) {
    bk_tensor t = {.name = "bytes", .type = QT_F32, .n_in = (int64_t)(bytes / 4), .n_out = 1, .n_bytes = bytes, .data = host};
    bk_weight w = {0};
    CHECK(bytes % 4 == 0 && g_gpu->ops->weight_load(g_gpu->ctx, &t, &w, NULL) == 0);
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

/* The error bound of the GPU's arithmetic for one output, as a fraction of
 * Σ|w_i·x_i| (so it holds whatever the signs and the cancellation):
 *   F32 weights (their GEMV at every row count) and the fused GEMV of every other
 *   type up to 8 rows (dequantized weights times F32 activations, F32 sums): F32 rounding over
 *   n_in terms, ~n·2^-24 at worst; 2^-14 leaves room for the order of the sums.
 *   Tensor cores: activations rounded to F16 (2^-11), quantized weights dequantized
 *   to F16 (another 2^-11), F32 sums: 2^-10 + 2^-14.
 *   BF16 weights: activations rounded to BF16 (2^-8): 2^-8 + 2^-14.
 * A kernel that reads one wrong block, scale or nibble is off by a sizeable part
 * of a whole block's products: far outside every one of these. (F16/BF16 rows not
 * a multiple of 16 wide take cuBLAS at every row count.) */
static double gpu_bound(uint32_t type, int64_t n_in, int rows) {
    const double acc = 1.0 / 16384;
    if (type == QT_F32) return acc;
    const bool gemv = rows <= 8 && !((type == QT_F16 || type == QT_BF16) && n_in % 16);
    if (gemv) return acc;
    if (type == QT_BF16) return 1.0 / 256 + acc;
    return 1.0 / 1024 + acc;
}

/* ref[t][o] = Σ w·x in double over the dequantized weights; mag[t][o] = Σ |w·x|. */
static void matmul_reference(uint32_t type, const uint8_t *W, int64_t n_in, int64_t n_out, const float *x,
                             int rows, double *ref, double *mag) {
    float *w = malloc((size_t)n_in * sizeof *w);
    const size_t rb = qtype_row_bytes(type, n_in);
    for (int64_t o = 0; o < n_out; o++) {
        dequantize_row(type, W + (size_t)o * rb, w, n_in);
        for (int t = 0; t < rows; t++) {
            double sum = 0, abs_sum = 0;
            for (int64_t i = 0; i < n_in; i++) {
                double p = (double)w[i] * (double)x[(size_t)t * n_in + i];
                sum += p, abs_sum += fabs(p);
            }
            ref[(size_t)t * n_out + o] = sum, mag[(size_t)t * n_out + o] = abs_sum;
        }
    }
    free(w);
}

/* Every output within its bound; NaN or infinity (the NaN-poisoned output buffer
 * left unwritten, an overflow) fails. Returns the number of outputs outside. */
static int outside_bound(const float *got, const double *ref, const double *mag, size_t n, double c, double *worst) {
    int bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]), lim = c * mag[i] + 1e-30;
        if (!isfinite(got[i]) || !(err <= lim)) bad++;
        if (isfinite(got[i]) && mag[i] > 0 && err / mag[i] > *worst) *worst = err / mag[i];
    }
    return bad;
}

/* Every type the backend takes, at shapes where each lane of the GEMV reads one
 * chunk or many, with row counts on both sides of the GEMV's 8 (the tensor cores
 * above). */
static void test_matmul_every_type(void) {
    const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    const int rows_list[] = {1, 2, 3, 5, 8, 9, 20, 40, 100};
    const int64_t shapes[][2] = {{512, 200}, {4096, 75}, {264, 33}}; /* n_in, n_out */
    step st;
    make_step(&st, 100);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int64_t n_in = shapes[si][0], n_out = shapes[si][1];
            if (!qtype_row_bytes(types[ti], n_in)) continue; /* (264: not whole blocks of 256 or 32) */
            size_t rb = qtype_row_bytes(types[ti], n_in);
            uint8_t *wdata = malloc(rb * n_out);
            float *row = malloc(n_in * sizeof(float));
            for (int64_t o = 0; o < n_out; o++) {
                for (int64_t i = 0; i < n_in; i++) row[i] = frand();
                quantize_row(types[ti], row, wdata + o * rb, n_in);
            }
            bk_tensor t = {.name = "w", .type = types[ti], .n_in = n_in, .n_out = n_out,
                           .n_bytes = rb * n_out, .data = wdata};
            bk_weight wg;
            CHECK(g_gpu->ops->weight_load(g_gpu->ctx, &t, &wg, NULL) == 0);
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
                const int rows = rows_list[ri];
                const size_t nx = (size_t)rows * n_in, ny = (size_t)rows * n_out;
                float *x = malloc(nx * sizeof(float)), *got = malloc(ny * sizeof(float));
                double *ref = malloc(ny * sizeof(double)), *mag = malloc(ny * sizeof(double));
                for (size_t i = 0; i < nx; i++) x[i] = frand();
                /* one huge activation: F16 (the prefill's tensor cores) would overflow without scaling */
                if (rows >= 40) x[3 * n_in + 17] = 3.0e5f;
                matmul_reference(types[ti], wdata, n_in, n_out, x, rows, ref, mag);
                /* Q8_0, Q4_0, Q4_K and Q6_K up to 32 rows: int8 activations as the CPU
                 * quantizes them, so the reference is the CPU backend's own result
                 * (the same block terms, summed in another order) */
                const uint32_t ty = types[ti];
                const bool int8 = (ty == QT_Q8_0 || ty == QT_Q4_0 || ty == QT_Q4_K || ty == QT_Q6_K) && rows <= 32;
                if (int8) {
                    bk_weight wc;
                    float *cy = malloc(ny * sizeof(float));
                    CHECK(g_cpu->ops->weight_load(g_cpu->ctx, &t, &wc, NULL) == 0);
                    CHECK(g_cpu->ops->matmul(g_cpu->ctx, &wc, x, rows, cy) == 0);
                    for (size_t i = 0; i < ny; i++) ref[i] = cy[i];
                    free(cy);
                }
                float *dx = gpu_floats(x, nx), *dy = gpu_floats(NULL, ny);
                llc_err err;
                CHECKF(g_gpu->ops->begin(g_gpu->ctx, &st.b, &err) == 0, "%s", err.msg);
                g_gpu->ops->matmul(g_gpu->ctx, &wg, dx, rows, dy);
                to_host(dy, got, ny);
                double worst;
                const double c = int8 ? 1.0 / 4096 : gpu_bound(types[ti], n_in, rows); /* (int8: order of the sums only) */
                int bad = outside_bound(got, ref, mag, ny, c, &worst);
                CHECKF(bad == 0, "%s %lldx%lld, %d rows: %d of %zu outputs outside %.3g·Σ|wx| (worst %.3g)",
                       qtype_name(types[ti]), (long long)n_out, (long long)n_in, rows, bad, ny, c, worst);
                g_gpu->ops->free(g_gpu->ctx, dx);
                g_gpu->ops->free(g_gpu->ctx, dy);
                free(x), free(got), free(ref), free(mag);
            }
            free(wdata);
            free(row);
        }
}

/* matmul_multi (Q, K and V; gate and up in one call): each output exactly what
 * matmul of its matrix alone gives, bit for bit, for K-quant sets (one
 * quantization of x and one launch at decode) and for a set with another type
 * (one matmul each), at row counts on both sides of the int8 GEMV's 32. */
static void test_matmul_multi(void) {
    static const uint32_t sets[][3] = {{QT_Q4_K, QT_Q6_K, QT_Q4_K}, {QT_Q4_K, QT_Q8_0, QT_F16}};
    static const int64_t n_outs[3] = {200, 75, 33};
    const int64_t n_in = 512;
    const int rows_list[] = {1, 2, 3, 8, 9, 20, 40};
    step st;
    make_step(&st, 100);
    CHECK(g_gpu->ops->matmul_multi != NULL);
    if (!g_gpu->ops->matmul_multi) return;
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        bk_weight wg[3];
        const bk_weight *wp[3];
        for (int i = 0; i < 3; i++) {
            const size_t rb = qtype_row_bytes(sets[si][i], n_in);
            uint8_t *wdata = malloc(rb * n_outs[i]);
            float row[512];
            for (int64_t o = 0; o < n_outs[i]; o++) {
                for (int64_t k = 0; k < n_in; k++) row[k] = frand();
                quantize_row(sets[si][i], row, wdata + o * rb, n_in);
            }
            bk_tensor t = {.name = "w", .type = sets[si][i], .n_in = n_in, .n_out = n_outs[i],
                           .n_bytes = rb * n_outs[i], .data = wdata};
            CHECK(g_gpu->ops->weight_load(g_gpu->ctx, &t, &wg[i], NULL) == 0);
            wp[i] = &wg[i];
            free(wdata);
        }
        for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
            const int rows = rows_list[ri];
            const size_t nx = (size_t)rows * n_in;
            float *x = malloc(nx * sizeof(float));
            for (size_t i = 0; i < nx; i++) x[i] = frand();
            float *dx = gpu_floats(x, nx), *dy[3], *dy1[3];
            for (int i = 0; i < 3; i++)
                dy[i] = gpu_floats(NULL, (size_t)rows * n_outs[i]), dy1[i] = gpu_floats(NULL, (size_t)rows * n_outs[i]);
            llc_err err;
            CHECKF(g_gpu->ops->begin(g_gpu->ctx, &st.b, &err) == 0, "%s", err.msg);
            CHECK(g_gpu->ops->matmul_multi(g_gpu->ctx, wp, 3, dx, rows, dy) == 0);
            for (int i = 0; i < 3; i++) CHECK(g_gpu->ops->matmul(g_gpu->ctx, wp[i], dx, rows, dy1[i]) == 0);
            for (int i = 0; i < 3; i++) {
                const size_t ny = (size_t)rows * n_outs[i];
                float *a = malloc(ny * sizeof(float)), *b = malloc(ny * sizeof(float));
                to_host(dy[i], a, ny);
                to_host(dy1[i], b, ny);
                size_t diff = 0;
                for (size_t k = 0; k < ny; k++) diff += !(a[k] == b[k]); /* (NaN: unwritten) */
                CHECKF(diff == 0, "set %zu, %s, %d rows: %zu of %zu outputs differ from matmul alone", si,
                       qtype_name(sets[si][i]), rows, diff, ny);
                free(a), free(b);
                g_gpu->ops->free(g_gpu->ctx, dy[i]);
                g_gpu->ops->free(g_gpu->ctx, dy1[i]);
            }
            g_gpu->ops->free(g_gpu->ctx, dx);
            free(x);
        }
    }
}

/* Above 32 rows a quantized weight is multiplied as an F16 copy kept on the GPU.
 * A weight freed and another loaded (most likely at the same address, with the
 * same shape) must be multiplied as itself, not as the old copy. */
static void test_f16_copy_follows_the_weight(void) {
    const int64_t n_in = 512, n_out = 96;
    const int rows = 40;
    const size_t rb = qtype_row_bytes(QT_Q4_K, n_in), nx = (size_t)rows * n_in, ny = (size_t)rows * n_out;
    step st;
    make_step(&st, 100);
    float *x = malloc(nx * sizeof(float)), *got = malloc(ny * sizeof(float)), row[512];
    double *ref = malloc(ny * sizeof(double)), *mag = malloc(ny * sizeof(double));
    uint8_t *wdata = malloc(rb * n_out);
    for (size_t i = 0; i < nx; i++) x[i] = frand();
    float *dx = gpu_floats(x, nx), *dy = gpu_floats(NULL, ny);
    for (int round = 0; round < 2; round++) {
        for (int64_t o = 0; o < n_out; o++) {
            for (int64_t k = 0; k < n_in; k++) row[k] = frand();
            quantize_row(QT_Q4_K, row, wdata + o * rb, n_in);
        }
        bk_tensor t = {.name = "w", .type = QT_Q4_K, .n_in = n_in, .n_out = n_out, .n_bytes = rb * n_out, .data = wdata};
        bk_weight wg;
        CHECK(g_gpu->ops->weight_load(g_gpu->ctx, &t, &wg, NULL) == 0);
        matmul_reference(QT_Q4_K, wdata, n_in, n_out, x, rows, ref, mag);
        llc_err err;
        CHECKF(g_gpu->ops->begin(g_gpu->ctx, &st.b, &err) == 0, "%s", err.msg);
        for (int rep = 0; rep < 2; rep++) { /* (the second call reads the copy the first made) */
            CHECK(g_gpu->ops->matmul(g_gpu->ctx, &wg, dx, rows, dy) == 0);
            to_host(dy, got, ny);
            double worst;
            const double c = gpu_bound(QT_Q4_K, n_in, rows);
            const int bad = outside_bound(got, ref, mag, ny, c, &worst);
            CHECKF(bad == 0, "weight %d, call %d: %d outputs outside %.3g·Σ|wx| (worst %.3g)", round, rep, bad, c, worst);
        }
        g_gpu->ops->free(g_gpu->ctx, (void *)wg.data);
    }
    g_gpu->ops->free(g_gpu->ctx, dx);
    g_gpu->ops->free(g_gpu->ctx, dy);
    free(x), free(got), free(ref), free(mag), free(wdata);
}

/* The embedding lookup of every type: each row exactly the CPU's dequantized row
 * (up to a fused multiply-add's rounding). */
static void test_embed_every_type(void) {
    const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    const int64_t n_in = 512, vocab = 100;
    step st;
    make_step(&st, (int)vocab);
    const int T = st.b.n_tokens;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const size_t rb = qtype_row_bytes(types[ti], n_in);
        uint8_t *table = malloc(rb * vocab);
        float *row = malloc(n_in * sizeof(float)), *want = malloc((size_t)T * n_in * 4), *got = malloc((size_t)T * n_in * 4);
        for (int64_t o = 0; o < vocab; o++) {
            for (int64_t i = 0; i < n_in; i++) row[i] = frand();
            quantize_row(types[ti], row, table + o * rb, n_in);
        }
        for (int t = 0; t < T; t++) dequantize_row(types[ti], table + (size_t)st.tokens[t] * rb, want + (size_t)t * n_in, n_in);
        bk_tensor bt = {.name = "token_embd.weight", .type = types[ti], .n_in = n_in, .n_out = vocab,
                        .n_bytes = rb * vocab, .data = table};
        bk_weight wg;
        llc_err err;
        CHECK(g_gpu->ops->weight_load(g_gpu->ctx, &bt, &wg, NULL) == 0);
        float *dx = gpu_floats(NULL, (size_t)T * n_in);
        CHECKF(g_gpu->ops->begin(g_gpu->ctx, &st.b, &err) == 0, "%s", err.msg);
        CHECK(g_gpu->ops->embed(g_gpu->ctx, &wg, dx) == 0);
        to_host(dx, got, (size_t)T * n_in);
        const double e = max_rel(got, want, (size_t)T * n_in);
        CHECKF(e < 1e-6, "embed %s: max relative error %g", qtype_name(types[ti]), e);
        g_gpu->ops->free(g_gpu->ctx, dx);
        free(table), free(row), free(want), free(got);
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
    bk_rope rp = {.style = BK_ROPE_NORMAL, .n_rot = hd, .freq_base = 10000.0f, .freq_scale = 1.0f, .freq_factors = factors};
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
    { /* YaRN's ramp and attention factor, partial rotation, a query temperature (on a copy of q) */
        bk_rope ry = {.style = BK_ROPE_NEOX, .n_rot = hd - 4, .freq_base = 1e6f, .freq_scale = 0.25f,
                      .ext_factor = 1.0f, .corr_lo = 3, .corr_hi = 11, .mscale = 1.1386f,
                      .temp_scale = 0.1f, .temp_floor = 8};
        float *q2 = malloc((size_t)T * q_dim * 4), *dq2 = gpu_floats(q, (size_t)T * q_dim);
        memcpy(q2, q, (size_t)T * q_dim * 4);
        g_cpu->ops->rope(g_cpu->ctx, q2, n_heads, hd, &ry);
        g_gpu->ops->rope(g_gpu->ctx, dq2, n_heads, hd, &ry);
        to_host(dq2, got, (size_t)T * q_dim);
        CHECKF(max_rel(got, q2, (size_t)T * q_dim) < 1e-5, "rope (yarn, temperature): %g",
               max_rel(got, q2, (size_t)T * q_dim));
        free(q2);
        g_gpu->ops->free(g_gpu->ctx, dq2);
    }
    g_cpu->ops->kv_store(g_cpu->ctx, kc, vc, k, v, kv_dim, QT_F32);
    g_gpu->ops->kv_store(g_gpu->ctx, dkc, dvc, dk, dv, kv_dim, QT_F32);
    bk_attn at = {.n_heads = n_heads, .n_kv_heads = n_kv, .head_dim = hd, .block_size = 16, .scale = 0.125f,
                  .kv_type = QT_F32};
    float *want = malloc((size_t)T * q_dim * 4);
    g_cpu->ops->attention(g_cpu->ctx, q, kc, vc, want, &at);
    g_gpu->ops->attention(g_gpu->ctx, dq, dkc, dvc, dout, &at);
    to_host(dout, got, (size_t)T * q_dim);
    CHECKF(max_rel(got, want, (size_t)T * q_dim) < 1e-4, "attention: %g", max_rel(got, want, (size_t)T * q_dim));
    bk_attn at_swa = at; /* a sliding window of 5 keys, soft-capped scores */
    at_swa.window = 5;
    at_swa.softcap = 2.0f;
    float *want_swa = malloc((size_t)T * q_dim * 4);
    g_cpu->ops->attention(g_cpu->ctx, q, kc, vc, want_swa, &at_swa);
    g_gpu->ops->attention(g_gpu->ctx, dq, dkc, dvc, dout, &at_swa);
    to_host(dout, got, (size_t)T * q_dim);
    CHECKF(max_rel(got, want_swa, (size_t)T * q_dim) < 1e-4, "windowed attention: %g",
           max_rel(got, want_swa, (size_t)T * q_dim));
    free(want_swa);
    g_gpu->ops->attention(g_gpu->ctx, dq, dkc, dvc, dout, &at); /* back to the plain result */
    /* copy_blocks on the GPU: the destination blocks become bit-identical copies of
     * the sources (as the GPU's own cache held them), every other block untouched */
    int32_t src[2] = {3, 5}, dst[2] = {20, 21};
    const size_t bf = (size_t)16 * kv_dim;
    float *before = malloc(cache * 4), *gk = malloc(cache * 4);
    to_host(dkc, before, cache);
    g_gpu->ops->copy_blocks(g_gpu->ctx, dkc, src, dst, 2, bf * sizeof(float));
    to_host(dkc, gk, cache);
    for (int i = 0; i < 2; i++)
        CHECKF(!memcmp(gk + dst[i] * bf, before + src[i] * bf, bf * 4), "block %d is not a copy of block %d", dst[i], src[i]);
    for (int blk = 0; blk < 24; blk++)
        if (blk != dst[0] && blk != dst[1])
            CHECKF(!memcmp(gk + blk * bf, before + blk * bf, bf * 4), "copy_blocks changed block %d", blk);
    free(before);
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
    /* scale, gelu_mul, gather_rows, scatter_add_rows */
    g_cpu->ops->scale(g_cpu->ctx, q, 0.75f, (size_t)T * q_dim);
    g_gpu->ops->scale(g_gpu->ctx, dq, 0.75f, (size_t)T * q_dim);
    g_cpu->ops->gelu_mul(g_cpu->ctx, q, want, (size_t)T * q_dim);
    g_gpu->ops->gelu_mul(g_gpu->ctx, dq, dout, (size_t)T * q_dim);
    to_host(dq, got, (size_t)T * q_dim);
    CHECKF(max_rel(got, q, (size_t)T * q_dim) < 1e-4, "scale + gelu_mul: %g", max_rel(got, q, (size_t)T * q_dim));
    int32_t rows[3] = {7, 0, 12};
    float weights[3] = {0.25f, -1.5f, 0.5f};
    g_cpu->ops->gather_rows(g_cpu->ctx, q, q_dim, rows, 3, gw);
    g_gpu->ops->gather_rows(g_gpu->ctx, dq, q_dim, rows, 3, dg);
    to_host(dg, gathered, 3 * (size_t)q_dim);
    CHECK(max_rel(gathered, gw, 3 * (size_t)q_dim) < 1e-6);
    g_cpu->ops->scatter_add_rows(g_cpu->ctx, want, q_dim, rows, weights, 3, gw);
    g_gpu->ops->scatter_add_rows(g_gpu->ctx, dout, q_dim, rows, weights, 3, dg);
    to_host(dout, got, (size_t)T * q_dim);
    CHECKF(max_rel(got, want, (size_t)T * q_dim) < 1e-4, "scatter_add_rows: %g", max_rel(got, want, (size_t)T * q_dim));
    float *bufs[] = {dq, dk, dv, dkc, dvc, dout, dg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_gpu->ops->free(g_gpu->ctx, bufs[i]);
    free(q), free(k), free(v), free(kc), free(vc), free(got), free(want), free(gk);
}

/* Attention over long caches (many tiles per warp, every warp busy), for the
 * head shapes the grouped kernel specialises: query heads per KV head 8, 3 and 1;
 * head sizes 128, 96 (read at run time) and 256; with and without a window. Two
 * sequences: one decoding at 700 keys, one a 4-row chunk at 300. */
static void check_long_attention(int n_heads, int n_kv, int hd, uint32_t kv_type) {
    enum { NB = 64, BS = 16 };
    int32_t tokens[5] = {1, 2, 3, 4, 5}, pos[5] = {699, 296, 297, 298, 299}, seq_start[3] = {0, 1, 5};
    int32_t kv_len[2] = {700, 300}, table[2 * NB], slots[5], out_rows[2] = {0, 4};
    for (int i = 0; i < NB; i++) table[i] = (i * 5) % NB, table[NB + i] = (i * 5 + 1) % NB; /* (shared blocks: fine to read) */
    for (int r = 0; r < 5; r++) {
        const int sq = r == 0 ? 0 : 1;
        slots[r] = table[sq * NB + pos[r] / BS] * BS + pos[r] % BS;
    }
    bk_batch b = {.n_tokens = 5, .tokens = tokens, .positions = pos, .n_seqs = 2, .seq_start = seq_start,
                  .kv_len = kv_len, .block_table = table, .max_blocks = NB, .slots = slots, .n_out = 2,
                  .out_rows = out_rows};
    const int T = 5, q_dim = n_heads * hd, kv_dim = n_kv * hd;
    const size_t slots_n = (size_t)NB * BS, rb = qtype_row_bytes(kv_type, kv_dim);
    float *q = malloc((size_t)T * q_dim * 4), *kf = malloc(slots_n * kv_dim * 4), *vf = malloc(slots_n * kv_dim * 4);
    uint8_t *kc = malloc(slots_n * rb), *vc = malloc(slots_n * rb);
    for (int i = 0; i < T * q_dim; i++) q[i] = frand();
    for (size_t i = 0; i < slots_n * kv_dim; i++) kf[i] = frand(), vf[i] = frand();
    for (size_t sl = 0; sl < slots_n; sl++) {
        quantize_row(kv_type, kf + sl * kv_dim, kc + sl * rb, kv_dim);
        quantize_row(kv_type, vf + sl * kv_dim, vc + sl * rb, kv_dim);
    }
    /* the caches go up as bytes (F32 "tensors" of the right size) */
    float *dq = gpu_floats(q, (size_t)T * q_dim);
    float *dkc = gpu_bytes(kc, slots_n * rb), *dvc = gpu_bytes(vc, slots_n * rb);
    float *dout = gpu_floats(NULL, (size_t)T * q_dim), *want = malloc((size_t)T * q_dim * 4), *got = malloc((size_t)T * q_dim * 4);
    llc_err err;
    for (int window = 0; window <= 200; window += 200) {
        bk_attn at = {.n_heads = n_heads, .n_kv_heads = n_kv, .head_dim = hd, .block_size = BS,
                      .scale = 1.0f / sqrtf((float)hd), .window = window, .softcap = window ? 30.0f : 0.0f,
                      .kv_type = kv_type};
        CHECK(g_cpu->ops->begin(g_cpu->ctx, &b, &err) == 0);
        CHECKF(g_gpu->ops->begin(g_gpu->ctx, &b, &err) == 0, "%s", err.msg);
        g_cpu->ops->attention(g_cpu->ctx, q, kc, vc, want, &at);
        CHECK(g_gpu->ops->attention(g_gpu->ctx, dq, dkc, dvc, dout, &at) == 0);
        to_host(dout, got, (size_t)T * q_dim);
        const double e = max_rel(got, want, (size_t)T * q_dim);
        CHECKF(e < 1e-4, "attention %d heads / %d KV heads of %d, %s cache, window %d: %g", n_heads, n_kv, hd,
               qtype_name(kv_type), window, e);
    }
    { /* attention sinks (gpt-oss): per-head logits, some above every score, in the denominator */
        float sinks[64];
        for (int h = 0; h < n_heads && h < 64; h++) sinks[h] = (float)(h % 4) * 3.0f - 4.0f;
        float *dsinks = gpu_floats(sinks, (size_t)n_heads);
        bk_attn at = {.n_heads = n_heads, .n_kv_heads = n_kv, .head_dim = hd, .block_size = BS,
                      .scale = 1.0f / sqrtf((float)hd), .kv_type = kv_type, .sinks = sinks};
        CHECK(g_cpu->ops->begin(g_cpu->ctx, &b, &err) == 0);
        CHECKF(g_gpu->ops->begin(g_gpu->ctx, &b, &err) == 0, "%s", err.msg);
        g_cpu->ops->attention(g_cpu->ctx, q, kc, vc, want, &at);
        at.sinks = dsinks;
        CHECK(g_gpu->ops->attention(g_gpu->ctx, dq, dkc, dvc, dout, &at) == 0);
        to_host(dout, got, (size_t)T * q_dim);
        const double e = max_rel(got, want, (size_t)T * q_dim);
        CHECKF(e < 1e-4, "attention with sinks, %d heads / %d KV heads of %d, %s cache: %g", n_heads, n_kv, hd,
               qtype_name(kv_type), e);
        g_gpu->ops->free(g_gpu->ctx, dsinks);
    }
    float *bufs[] = {dq, dkc, dvc, dout};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_gpu->ops->free(g_gpu->ctx, bufs[i]);
    free(q), free(kf), free(vf), free(kc), free(vc), free(want), free(got);
}

static void test_long_attention(void) {
    check_long_attention(16, 2, 128, QT_F16);
    check_long_attention(6, 2, 96, QT_F32);
    check_long_attention(4, 4, 256, QT_Q8_0);
    check_long_attention(8, 1, 64, QT_F16);
}

/* A model: one varlen step on both backends, logits compared, K/V stored as kv_type. */
static void check_model_logits(const char *name, uint32_t kv_type) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), name);
    gguf *g;
    llc_err err;
    model *mc = NULL, *mg = NULL;
    model_kv *kc = NULL, *kg = NULL;
    if (gguf_open(path, &g, &err) || model_load(g, g_cpu, &mc, &err) || model_load(g, g_gpu, &mg, &err) ||
        model_kv_create(mc, 24, 16, kv_type, &kc, &err) || model_kv_create(mg, 24, 16, kv_type, &kg, &err)) {
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
    fprintf(stderr, "  %s logits (%s KV): max relative error %.3g\n", name, qtype_name(kv_type), e);
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

static void test_model_logits(void) {
    static const char *const names[] = {"stories260K.gguf", "arch/gemma2.gguf", "arch/gemma3.gguf",
                                        "arch/phi3.gguf", "arch/qwen3moe.gguf", "arch/qwen2-bias.gguf",
                                        "arch/llama-rope-scale.gguf", "arch/qwen3-yarn.gguf",
                                        "arch/phi3-longrope.gguf", "arch/mistral3.gguf", "arch/smollm3.gguf",
                                        "arch/qwen2moe.gguf", "arch/gemma4.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_model_logits(names[i], QT_F32);
}

/* f16 and q8_0 caches: both backends store the same values and read them alike */
static void test_model_logits_kv_types(void) {
    static const char *const names[] = {"stories260K.gguf", "arch/gemma2.gguf", "arch/qwen3moe.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        check_model_logits(names[i], QT_F16);
        check_model_logits(names[i], QT_Q8_0);
    }
}

/* Decode steps replayed from a recorded CUDA graph give exactly the logits of the
 * same steps run op by op (LLC_CUDA_GRAPHS=0), step after step, while the tokens,
 * positions and KV lengths change under the recording. Two sequences decode
 * together after their prompts. */
static void check_recorded_steps(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), name);
    backend *plain = NULL, *rec = NULL;
    gguf *g = NULL;
    model *mp = NULL, *mr = NULL;
    model_kv *kp = NULL, *kr = NULL;
    llc_err err;
    setenv("LLC_CUDA_GRAPHS", "0", 1);
    int rc = backend_cuda_create(0, &plain, &err);
    unsetenv("LLC_CUDA_GRAPHS");
    if (!rc) rc = backend_cuda_create(0, &rec, &err);
    if (!rc) rc = gguf_open(path, &g, &err);
    if (!rc) rc = model_load(g, plain, &mp, &err);
    if (!rc) rc = model_load(g, rec, &mr, &err);
    if (!rc) rc = model_kv_create(mp, 16, 16, QT_F16, &kp, &err);
    if (!rc) rc = model_kv_create(mr, 16, 16, QT_F16, &kr, &err);
    CHECKF(rc == 0, "%s: %s", name, err.msg);
    const int V = rc ? 0 : model_hparams_of(mp)->n_vocab;
    batch *b = NULL;
    if (!rc) rc = batch_create(8, 16, &b);
    float *lp = malloc((size_t)2 * (V ? V : 1) * 4), *lr = malloc((size_t)2 * (V ? V : 1) * 4);
    int32_t blocks[2][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {15, 14, 13, 12, 11, 10, 9, 8}};
    int32_t toks[2][64];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 64; i++) toks[s][i] = (int32_t)((i * 31 + s * 7 + 3) % V);
    int identical = 0, steps = 0;
    for (int k = 0; !rc && k < 24; k++) {
        batch_clear(b);
        for (int s = 0; s < 2; s++) {
            if (k == 0) batch_add(b, toks[s], 9 + 4 * s, 0, blocks[s], 8, BATCH_OUT_LAST);
            else batch_add(b, &toks[s][8 + 4 * s + k], 1, 8 + 4 * s + k, blocks[s], 8, BATCH_OUT_LAST);
        }
        rc = model_forward(mp, kp, batch_view(b), lp, &err);
        if (!rc) rc = model_forward(mr, kr, batch_view(b), lr, &err);
        CHECKF(rc == 0, "%s step %d: %s", name, k, err.msg);
        if (rc) break;
        steps++;
        if (!memcmp(lp, lr, (size_t)2 * V * 4)) identical++;
        else fprintf(stderr, "  %s step %d: recorded logits differ (max relative %g)\n", name, k,
                     max_rel(lr, lp, (size_t)2 * V));
    }
    CHECKF(steps == 24 && identical == steps, "%s: %d of %d steps identical", name, identical, steps);
    unsigned long recorded = 0, replayed = 0;
    if (rec) backend_cuda_graph_stats(rec, &recorded, &replayed);
    fprintf(stderr, "  %s: %lu steps recorded, %lu replayed\n", name, recorded, replayed);
    CHECKF(recorded >= 1 && replayed >= 20, "%s: %lu recorded, %lu replayed", name, recorded, replayed);
    free(lp), free(lr);
    batch_free(b);
    model_kv_free(kp), model_kv_free(kr), model_free(mp), model_free(mr), gguf_free(g);
    if (plain) backend_free(plain);
    if (rec) backend_free(rec);
}

static void test_recorded_steps(void) {
    check_recorded_steps("stories260K.gguf");
    check_recorded_steps("quant/stories260K-w256-Q4_K_M.gguf");
    check_recorded_steps("quant/stories260K-w256-Q8_0.gguf");
}

/* top_k: the GPU's k best of each row == topk_row's (kernels/topk.h), entry for
 * entry, on rows made to be hard (ties across the k-th place, NaN, +-inf, -0.0
 * beside +0.0, fewer entries than k) at vocabulary sizes up to 256k. */
static void test_top_k(void) {
    static const int widths[] = {37, 1000, 32000, 151936, 262144};
    enum { ROWS = 6, K = TOPK_MAX };
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        const int n = widths[wi];
        float *x = malloc((size_t)ROWS * n * sizeof *x);
        for (int r = 0; r < ROWS; r++)
            for (int i = 0; i < n; i++) {
                const float u = (frand() + 1) / 2;
                float *v = &x[(size_t)r * n + i];
                switch (r) {
                case 0: *v = frand() * 8; break;
                case 1: *v = (float)(int)(u * 5); break; /* five values: huge ties */
                case 2: *v = u < 0.999f ? NAN : frand(); break; /* few entries that can be chosen */
                case 3: *v = u < 0.001f ? INFINITY : u < 0.4f ? -0.0f : u < 0.8f ? 0.0f : -INFINITY; break;
                case 4: *v = 3.0f; break; /* all equal: the lowest ids */
                default: *v = frand() * 30 - (i % 7 == 0 ? 0 : 10); break;
                }
            }
        float *dx = gpu_floats(x, (size_t)ROWS * n);
        int32_t ids[ROWS * K], want_ids[K];
        float vals[ROWS * K], want_vals[K];
        for (int k = 1; k <= K; k += K - 1) {
            CHECK(g_gpu->ops->top_k(g_gpu->ctx, dx, ROWS, n, k, ids, vals) == 0);
            for (int r = 0; r < ROWS; r++) {
                topk_row(x + (size_t)r * n, n, k, want_ids, want_vals);
                int bad = 0;
                for (int j = 0; j < k; j++) {
                    const int32_t gi = ids[r * k + j];
                    const float gv = vals[r * k + j];
                    const bool same = gi == want_ids[j] && (gv == want_vals[j] || (isinf(gv) && isinf(want_vals[j])));
                    if (!same && bad++ < 3)
                        fprintf(stderr, "  n %d k %d row %d entry %d: GPU %d (%g), want %d (%g)\n", n, k, r, j, gi,
                                (double)gv, want_ids[j], (double)want_vals[j]);
                }
                CHECKF(bad == 0, "n %d k %d row %d: %d entries differ", n, k, r, bad);
            }
        }
        g_gpu->ops->free(g_gpu->ctx, dx);
        free(x);
    }
}

int main(void) {
    llc_err err;
    if (!backend_cuda_available() || backend_cuda_create(0, &g_gpu, &err)) {
        printf("no usable GPU: the CUDA parity tests need one\n0 passed, 1 failed\n");
        return 1;
    }
    backend_cpu_create(2, &g_cpu, &err);
    RUN(test_matmul_every_type);
    RUN(test_matmul_multi);
    RUN(test_f16_copy_follows_the_weight);
    RUN(test_embed_every_type);
    RUN(test_attention_and_small_ops);
    RUN(test_long_attention);
    RUN(test_model_logits);
    RUN(test_model_logits_kv_types);
    RUN(test_recorded_steps);
    RUN(test_top_k);
    backend_free(g_gpu);
    backend_free(g_cpu);
    return t_summary();
}
