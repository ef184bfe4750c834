/* test_backend_ops.c — the CPU backend's row ops that have no SIMD variants of
 * their own (the matmul, attention and elementwise ops have theirs, tested per
 * SIMD level in test_matmul, test_attention, test_elementwise): embedding rows
 * (F32, F16), RMS norm, RoPE (both styles, partial rotation, frequency factors
 * and scaling), the KV store through the slot mapping, bias add, block copies
 * and the gathering of output rows; the recurrent ops (carried convolution,
 * gated delta rule, selective scan: a 3-sequence batch in two steps, so the
 * state carries, against a step-by-step reference); and matmul_multi against matmul on weights
 * as weight_load keeps them (bit for bit). Each runs through the backend's op table on
 * random inputs of odd shapes against a plain double-precision reference, with
 * 1 and 3 worker threads (the results must be bitwise equal), and leaves memory
 * it should not write untouched. */
#include "kernels/backend.h"
#include "kernels/quant.h"
#include "tests/test.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t g_rng = 0x2545F4914F6CDD1DULL;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)((g_rng >> 11) % n);
}
static float frand(void) { return (float)rnd(2000001) / 1000000.0f - 1.0f; } /* [-1, 1] */

static backend *g_be[2]; /* 1 and 3 threads */
#define OPS(i) g_be[i]->ops
#define CTX(i) g_be[i]->ctx

static float *frands(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* A one-sequence batch of T rows with the given positions, slots and out rows. */
typedef struct tbatch {
    bk_batch b;
    int32_t tokens[64], positions[64], slots[64], out_rows[64], seq_start[2], kv_len[1], table[1];
} tbatch;

static void mk_batch(tbatch *t, int T) {
    memset(t, 0, sizeof *t);
    t->seq_start[1] = T;
    t->kv_len[0] = T;
    t->b = (bk_batch){.n_tokens = T, .tokens = t->tokens, .positions = t->positions, .n_seqs = 1,
                      .seq_start = t->seq_start, .kv_len = t->kv_len, .block_table = t->table,
                      .max_blocks = 1, .slots = t->slots, .n_out = 0, .out_rows = t->out_rows};
}

static void begin_all(const tbatch *t) {
    llc_err err;
    for (int i = 0; i < 2; i++) CHECK(OPS(i)->begin(CTX(i), &t->b, &err) == 0);
}

static void test_rmsnorm(void) {
    static const int shapes[][2] = {{1, 1}, {1, 7}, {3, 33}, {5, 288}, {2, 4099}, {17, 513}};
    for (size_t c = 0; c < LLC_ARRAY_LEN(shapes); c++) {
        int rows = shapes[c][0], dim = shapes[c][1];
        float eps = c % 2 ? 1e-5f : 1e-6f;
        float *x = frands((size_t)rows * dim), *w = frands((size_t)dim);
        float *out[2] = {malloc((size_t)rows * dim * 4), malloc((size_t)rows * dim * 4)};
        bk_weight bw = {.type = QT_F32, .n_in = dim, .n_out = 1, .data = w};
        for (int i = 0; i < 2; i++) OPS(i)->rmsnorm(CTX(i), x, &bw, out[i], rows, dim, eps);
        double worst = 0;
        for (int r = 0; r < rows; r++) {
            double ss = 0;
            for (int k = 0; k < dim; k++) ss += (double)x[(size_t)r * dim + k] * x[(size_t)r * dim + k];
            double scale = 1.0 / sqrt(ss / dim + eps);
            for (int k = 0; k < dim; k++) {
                double want = x[(size_t)r * dim + k] * scale * w[k];
                double e = fabs(out[0][(size_t)r * dim + k] - want) / (fabs(want) + 1e-3);
                if (e > worst) worst = e;
            }
        }
        CHECKF(worst < 1e-5, "rows %d dim %d: relative error %g", rows, dim, worst);
        CHECKF(!memcmp(out[0], out[1], (size_t)rows * dim * 4), "rows %d dim %d: threads differ", rows, dim);
        /* in place (out == x) gives the same */
        float *y = malloc((size_t)rows * dim * 4);
        memcpy(y, x, (size_t)rows * dim * 4);
        OPS(1)->rmsnorm(CTX(1), y, &bw, y, rows, dim, eps);
        CHECK(!memcmp(y, out[0], (size_t)rows * dim * 4));
        free(y);
        free(x), free(w), free(out[0]), free(out[1]);
    }
}

/* The extras of a rope beyond base, scale and factors: YaRN's ramp, the
 * attention factor and the query temperature (zero: off). */
typedef struct rope_extra {
    float ext_factor, corr_lo, corr_hi, mscale, temp_scale, temp_offset;
    int temp_floor;
} rope_extra;

static void check_rope(bk_rope_style style, int T, int n_heads, int head_dim, int n_rot, float base,
                       float freq_scale, bool factors, rope_extra ex) {
    tbatch tb;
    mk_batch(&tb, T);
    for (int r = 0; r < T; r++) tb.positions[r] = (int32_t)rnd(r % 3 ? 4096 : 8);
    begin_all(&tb);
    float ff[128];
    for (int i = 0; i < n_rot / 2; i++) ff[i] = 1.0f + (float)rnd(40) / 10.0f;
    bk_rope rp = {.style = style, .n_rot = n_rot, .freq_base = base, .freq_scale = freq_scale,
                  .freq_factors = factors ? ff : NULL, .ext_factor = ex.ext_factor, .corr_lo = ex.corr_lo,
                  .corr_hi = ex.corr_hi, .mscale = ex.mscale, .temp_scale = ex.temp_scale,
                  .temp_offset = ex.temp_offset, .temp_floor = ex.temp_floor};
    size_t n = (size_t)T * n_heads * head_dim;
    float *x = frands(n);
    float *y[2] = {malloc(n * 4), malloc(n * 4)};
    for (int i = 0; i < 2; i++) {
        memcpy(y[i], x, n * 4);
        OPS(i)->rope(CTX(i), y[i], n_heads, head_dim, &rp);
    }
    double worst = 0, worst_rest = 0;
    int half = n_rot / 2;
    const double m = ex.mscale ? ex.mscale : 1.0;
    for (int r = 0; r < T; r++) {
        const double pos = tb.positions[r];
        const double t = ex.temp_scale ? 1 + ex.temp_scale * log(floor((pos + ex.temp_offset) / ex.temp_floor) + 1) : 1;
        for (int h = 0; h < n_heads; h++) {
            const float *v = x + ((size_t)r * n_heads + h) * head_dim;
            const float *got = y[0] + ((size_t)r * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                double extrap = pos * pow(base, -2.0 * i / n_rot);
                if (factors) extrap /= ff[i];
                double theta = freq_scale * extrap;
                if (ex.ext_factor) {
                    double ramp = (i - ex.corr_lo) / fmax(0.001, ex.corr_hi - ex.corr_lo);
                    double mix = (1 - fmin(1, fmax(0, ramp))) * ex.ext_factor;
                    theta = theta * (1 - mix) + extrap * mix;
                }
                int a = style == BK_ROPE_NEOX ? i : 2 * i, b = style == BK_ROPE_NEOX ? i + half : 2 * i + 1;
                double w0 = (v[a] * cos(theta) - v[b] * sin(theta)) * m * t;
                double w1 = (v[a] * sin(theta) + v[b] * cos(theta)) * m * t;
                /* the float angle carries a few ulps of pos * freq: allow for it */
                double tol = 6e-7 * (1 + fabs(theta)) * m * t;
                double e = fmax(fabs(got[a] - w0), fabs(got[b] - w1)) / tol;
                if (e > worst) worst = e;
            }
            /* past n_rot only the temperature applies */
            for (int k = n_rot; k < head_dim; k++) {
                double e = fabs(got[k] - v[k] * t) / (2e-7 * fabs(v[k] * t) + 1e-30);
                if (e > worst_rest) worst_rest = e;
            }
        }
    }
    CHECKF(worst <= 1, "style %d T %d heads %d dim %d rot %d: error %g x tolerance", style, T, n_heads,
           head_dim, n_rot, worst);
    if (getenv("LLC_TEST_VERBOSE")) printf("  rope error %.3g x tolerance\n", worst);
    CHECKF(worst_rest <= 1, "dims past n_rot %d: error %g x tolerance", n_rot, worst_rest);
    CHECK(!memcmp(y[0], y[1], n * 4));
    free(x), free(y[0]), free(y[1]);
}

static void test_rope(void) {
    const rope_extra none = {0};
    check_rope(BK_ROPE_NORMAL, 5, 3, 16, 16, 10000, 1, false, none);
    check_rope(BK_ROPE_NEOX, 7, 2, 64, 64, 1000000, 1, false, none);
    check_rope(BK_ROPE_NORMAL, 9, 4, 10, 6, 10000, 0.25f, true, none); /* partial rotation, scaling */
    check_rope(BK_ROPE_NEOX, 33, 5, 24, 12, 500000, 1, true, none);    /* llama3-style factors */
    check_rope(BK_ROPE_NEOX, 1, 1, 2, 2, 10000, 1, false, none);
    /* YaRN: the ramp between pairs 3 and 11 of 16, its attention factor */
    check_rope(BK_ROPE_NEOX, 17, 4, 32, 32, 1000000, 0.25f, false,
               (rope_extra){.ext_factor = 1, .corr_lo = 3, .corr_hi = 11, .mscale = 1.1386f});
    check_rope(BK_ROPE_NORMAL, 6, 2, 16, 16, 10000, 1.0f / 32, false,
               (rope_extra){.ext_factor = 0.5f, .corr_lo = 0, .corr_hi = 7, .mscale = 1.3466f});
    /* LongRoPE: factors, partial rotation and an attention factor */
    check_rope(BK_ROPE_NEOX, 11, 4, 16, 12, 10000, 1, true, (rope_extra){.mscale = 1.27475f});
    /* a query temperature (mistral3): every dimension, the unrotated ones too */
    check_rope(BK_ROPE_NORMAL, 13, 3, 20, 16, 10000, 1, false,
               (rope_extra){.temp_scale = 0.1f, .temp_floor = 8});
    check_rope(BK_ROPE_NEOX, 13, 3, 20, 16, 10000, 1, false,
               (rope_extra){.temp_scale = 0.1f, .temp_floor = 100, .temp_offset = 1});
}

static void test_embed(void) {
    const int vocab = 37, dim = 19, T = 23;
    float *table = frands((size_t)vocab * dim);
    uint16_t *t16 = malloc((size_t)vocab * dim * 2);
    for (int i = 0; i < vocab * dim; i++) t16[i] = f32_to_fp16(table[i]);
    tbatch tb;
    mk_batch(&tb, T);
    for (int r = 0; r < T; r++) tb.tokens[r] = (int32_t)rnd(vocab);
    tb.tokens[0] = vocab - 1;
    begin_all(&tb);
    for (int f16 = 0; f16 < 2; f16++) {
        bk_weight w = {.type = f16 ? QT_F16 : QT_F32, .n_in = dim, .n_out = vocab,
                       .data = f16 ? (const void *)t16 : table};
        float *x[2] = {malloc((size_t)T * dim * 4), malloc((size_t)T * dim * 4)};
        for (int i = 0; i < 2; i++) OPS(i)->embed(CTX(i), &w, x[i]);
        bool ok = true;
        for (int r = 0; r < T; r++)
            for (int k = 0; k < dim; k++) {
                float v = table[(size_t)tb.tokens[r] * dim + k];
                float want = f16 ? fp16_to_f32(t16[(size_t)tb.tokens[r] * dim + k]) : v;
                ok &= x[0][(size_t)r * dim + k] == want && fabsf(want - v) <= 1e-3f;
            }
        CHECKF(ok, "%s embedding rows differ", f16 ? "F16" : "F32");
        CHECK(!memcmp(x[0], x[1], (size_t)T * dim * 4));
        free(x[0]), free(x[1]);
    }
    free(table), free(t16);
}

static void test_kv_store(void) {
    const int T = 13, kv_dim = 21, n_slots = 50;
    tbatch tb;
    mk_batch(&tb, T);
    bool used[50] = {0};
    for (int r = 0; r < T; r++) {
        int s;
        do s = (int)rnd(n_slots); while (used[s]);
        used[s] = true;
        tb.slots[r] = s;
    }
    begin_all(&tb);
    float *k = frands((size_t)T * kv_dim), *v = frands((size_t)T * kv_dim);
    float *kc = malloc((size_t)n_slots * kv_dim * 4), *vc = malloc((size_t)n_slots * kv_dim * 4);
    for (int i = 0; i < n_slots * kv_dim; i++) kc[i] = vc[i] = -7.0f;
    OPS(1)->kv_store(CTX(1), kc, vc, k, v, kv_dim, QT_F32);
    bool ok = true;
    for (int r = 0; r < T; r++)
        ok &= !memcmp(kc + (size_t)tb.slots[r] * kv_dim, k + (size_t)r * kv_dim, (size_t)kv_dim * 4) &&
              !memcmp(vc + (size_t)tb.slots[r] * kv_dim, v + (size_t)r * kv_dim, (size_t)kv_dim * 4);
    CHECKF(ok, "a row is not at its slot");
    for (int s = 0; s < n_slots; s++)
        if (!used[s])
            for (int i = 0; i < kv_dim; i++) ok &= kc[(size_t)s * kv_dim + i] == -7.0f && vc[(size_t)s * kv_dim + i] == -7.0f;
    CHECKF(ok, "a slot outside the mapping was written");
    free(k), free(v), free(kc), free(vc);
}

static void test_bias_copies_gather(void) {
    /* bias */
    const int rows = 6, n = 29;
    float *y = frands((size_t)rows * n), *b = frands((size_t)n), *want = malloc((size_t)rows * n * 4);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) want[(size_t)r * n + i] = y[(size_t)r * n + i] + b[i];
    bk_weight bw = {.type = QT_F32, .n_in = n, .n_out = 1, .data = b};
    OPS(1)->add_bias(CTX(1), y, &bw, rows);
    CHECK(!memcmp(y, want, (size_t)rows * n * 4));
    free(y), free(b), free(want);

    /* block copies: independent, as the KV manager issues them */
    const int nb = 12;
    const size_t bf = 37;
    float *cache = frands(nb * bf), *orig = malloc(nb * bf * 4);
    memcpy(orig, cache, nb * bf * 4);
    const int32_t src[] = {0, 3, 3, 11}, dst[] = {5, 1, 7, 2};
    OPS(1)->copy_blocks(CTX(1), cache, src, dst, 4, bf * sizeof(float));
    bool ok = true;
    for (int blk = 0; blk < nb; blk++) {
        int from = blk;
        for (int i = 0; i < 4; i++)
            if (dst[i] == blk) from = src[i];
        ok &= !memcmp(cache + blk * bf, orig + from * bf, bf * 4);
    }
    CHECKF(ok, "block copies wrong");
    free(cache), free(orig);

    /* output rows */
    tbatch tb;
    mk_batch(&tb, 9);
    tb.b.n_out = 4;
    const int32_t rows_out[] = {8, 0, 4, 5};
    memcpy(tb.out_rows, rows_out, sizeof rows_out);
    begin_all(&tb);
    const int dim = 11;
    float *x = frands(9 * dim), *out = malloc(4 * dim * 4);
    OPS(1)->gather_out_rows(CTX(1), x, dim, out);
    ok = true;
    for (int k = 0; k < 4; k++) ok &= !memcmp(out + k * dim, x + rows_out[k] * dim, dim * 4);
    CHECKF(ok, "gathered rows wrong");
    free(x), free(out);
}

/* matmul_multi on weights as weight_load keeps them (packed ahead where the CPU
 * packs): each output equals the plain matmul's bit for bit, for Q/K/V-like and
 * gate/up-like sets of types, at 1, 3 and 9 rows, on 1 and 3 threads. */
static void test_matmul_multi(void) {
    static const struct { uint32_t type[3]; int n; int n_out[3]; } sets[] = {
        {{QT_Q8_0, QT_Q8_0, QT_Q8_0}, 3, {64, 16, 16}},
        {{QT_Q4_K, QT_Q4_K, QT_Q6_K}, 3, {48, 16, 16}},
        {{QT_F16, QT_F16}, 2, {40, 40}},
        {{QT_Q4_0, QT_Q4_1}, 2, {33, 20}},
    };
    const int n_in = 512;
    for (size_t si = 0; si < LLC_ARRAY_LEN(sets); si++) {
        const int n = sets[si].n;
        void *data[3];
        bk_weight w[2][3];
        const bk_weight *wp[2][3];
        for (int k = 0; k < n; k++) {
            const uint32_t type = sets[si].type[k];
            const int n_out = sets[si].n_out[k];
            const size_t rb = qtype_row_bytes(type, n_in);
            data[k] = malloc(rb * (size_t)n_out);
            float *row = frands((size_t)n_in);
            for (int o = 0; o < n_out; o++) {
                for (int i = 0; i < n_in; i++) row[i] = frand() * 0.1f;
                CHECK(quantize_row(type, row, (uint8_t *)data[k] + (size_t)o * rb, n_in) == 0);
            }
            free(row);
            const bk_tensor t = {.name = "blk.0.attn_q.weight", .type = type, .n_in = n_in, .n_out = n_out,
                                 .data = data[k], .n_bytes = rb * (size_t)n_out};
            llc_err err;
            for (int b = 0; b < 2; b++) {
                CHECK(OPS(b)->weight_load(CTX(b), &t, &w[b][k], &err) == 0);
                wp[b][k] = &w[b][k];
            }
        }
        static const int Ts[] = {1, 3, 9};
        for (size_t ti = 0; ti < LLC_ARRAY_LEN(Ts); ti++) {
            const int T = Ts[ti];
            float *x = frands((size_t)T * n_in);
            float *alone[3], *multi[2][3];
            for (int k = 0; k < n; k++) {
                const size_t ny = (size_t)T * sets[si].n_out[k];
                alone[k] = malloc(ny * 4);
                CHECK(OPS(0)->matmul(CTX(0), wp[0][k], x, T, alone[k]) == 0);
                for (int b = 0; b < 2; b++) {
                    multi[b][k] = malloc(ny * 4);
                    for (size_t i = 0; i < ny; i++) multi[b][k][i] = NAN;
                }
            }
            for (int b = 0; b < 2; b++) {
                CHECK(OPS(b)->matmul_multi(CTX(b), wp[b], n, x, T, multi[b]) == 0);
                for (int k = 0; k < n; k++)
                    CHECKF(!memcmp(alone[k], multi[b][k], (size_t)T * sets[si].n_out[k] * 4),
                           "set %zu matrix %d (%s) T %d, backend %d: matmul_multi differs from matmul", si, k,
                           qtype_name(sets[si].type[k]), T, b);
            }
            for (int k = 0; k < n; k++) free(alone[k]), free(multi[0][k]), free(multi[1][k]);
            free(x);
        }
        for (int k = 0; k < n; k++) free(data[k]);
    }
}

/* Weights the loader hands over in the file mapping (droppable) and that are read in
 * place at every step move into huge_alloc'd memory (2 MB aligned) with the same
 * bytes and the same products; the embedding table, weights outside a file
 * mapping, and everything under LLC_MMAP=1 stay where they are. */
static void test_weights_leave_file_mapping(void) {
    const int n_in = 256, n_out = 96;
    const size_t rb = qtype_row_bytes(QT_F16, n_in), nb = rb * (size_t)n_out;
    float *row = frands((size_t)n_in * n_out);
    uint8_t *heap = malloc(nb);
    for (int o = 0; o < n_out; o++) CHECK(quantize_row(QT_F16, row + (size_t)o * n_in, heap + (size_t)o * rb, n_in) == 0);
    char path[] = "/tmp/llc_test_weightsXXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, heap, nb) == (ssize_t)nb);
    const void *map = mmap(NULL, nb, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(map != MAP_FAILED);
    close(fd);
    unlink(path);
    bk_tensor t = {.name = "blk.0.ffn_up.weight", .type = QT_F16, .n_in = n_in, .n_out = n_out,
                   .data = map, .n_bytes = nb, .droppable = true};
    llc_err err;
    bk_weight copied, in_heap, table;
    CHECK(OPS(0)->weight_load(CTX(0), &t, &copied, &err) == 0);
    CHECKF(copied.data != map && (uintptr_t)copied.data % (2u << 20) == 0,
           "a matrix read in place stays in the file mapping (%p, mapping %p)", copied.data, map);
    CHECK(!memcmp(copied.data, heap, nb));
    bk_tensor h = t;
    h.data = heap, h.droppable = false;
    CHECK(OPS(0)->weight_load(CTX(0), &h, &in_heap, &err) == 0);
    CHECKF(in_heap.data == heap, "a weight outside any file mapping was copied");
    bk_tensor e = t;
    e.name = "token_embd.weight";
    CHECK(OPS(0)->weight_load(CTX(0), &e, &table, &err) == 0);
    CHECKF(table.data == map, "the embedding table left the file mapping");
    /* the same products from the copy as from the original */
    tbatch tb;
    mk_batch(&tb, 3);
    begin_all(&tb);
    float *x = frands((size_t)3 * n_in), y0[3 * 96], y1[3 * 96];
    CHECK(OPS(0)->matmul(CTX(0), &copied, x, 3, y0) == 0);
    CHECK(OPS(0)->matmul(CTX(0), &in_heap, x, 3, y1) == 0);
    CHECK(!memcmp(y0, y1, sizeof y0));
    /* keep_mapped (the app's LLC_MMAP=1): weights stay in the mapping */
    backend *be;
    const backend_cpu_opts o = {.n_threads = 1, .keep_mapped = true};
    CHECK(backend_cpu_create_opts(&o, &be, &err) == 0);
    bk_weight kept;
    CHECK(be->ops->weight_load(be->ctx, &t, &kept, &err) == 0);
    CHECKF(kept.data == map, "keep_mapped still copied the weights");
    backend_free(be);
    free(x), free(row), free(heap);
}

/* The recurrent ops over 3 sequences of 1, 5 and 3 rows, in two steps (rows
 * split 0/1, 2/3, 1/2) so each state carries from one call into the next,
 * against a double-precision step-by-step reference; 1 and 3 threads equal. */
static void test_recurrent_ops(void) {
    enum { NS = 3, K = 4, CH = 13, NK = 2, NV = 4, DK = 8, NH = 4, P = 6, G = 2, N = 5 };
    static const int rows1[NS] = {0, 2, 1}, rows2[NS] = {1, 3, 2};
    const int dconv = 2 * NK * DK + NV * DK, dssm = NH * P + 2 * G * N; /* delta-net / Mamba2 row widths */
    float *w = frands((size_t)CH * K), *bias = frands(CH), *dtb = frands(8), *a = frands(8), *dd = frands(8);
    for (int i = 0; i < 8; i++) a[i] = -fabsf(a[i]) - 0.1f;
    bk_weight bw = {.type = QT_F32, .n_in = K, .n_out = CH, .data = w}, bb = {.type = QT_F32, .n_in = CH, .n_out = 1, .data = bias};
    bk_weight bdt = {.type = QT_F32, .n_in = 8, .n_out = 1, .data = dtb}, ba = {.type = QT_F32, .n_in = 8, .n_out = 1, .data = a};
    bk_weight bd = {.type = QT_F32, .n_in = 8, .n_out = 1, .data = dd};
    const bk_delta dl = {.n_k_heads = NK, .n_v_heads = NV, .head_k = DK, .head_v = DK, .eps = 1e-6f};
    const bk_ssm sm = {.n_heads = NH, .head_dim = P, .n_groups = G, .d_state = N};
    /* reference states, double */
    static double rconv[NS][K - 1][CH], rdelta[NS][NV][DK][DK], rssm[NS][NH][P][N];
    memset(rconv, 0, sizeof rconv), memset(rdelta, 0, sizeof rdelta), memset(rssm, 0, sizeof rssm);
    float *st[2][3][NS];
    for (int i = 0; i < 2; i++)
        for (int s = 0; s < NS; s++) {
            st[i][0][s] = calloc((K - 1) * CH, 4), st[i][1][s] = calloc(NV * DK * DK, 4), st[i][2][s] = calloc(NH * P * N, 4);
        }
    double worst = 0;
    for (int step = 0; step < 2; step++) {
        const int *rows = step ? rows2 : rows1;
        tbatch t;
        int T = 0;
        mk_batch(&t, 1);
        static int32_t ss[NS + 1], kvl[NS];
        ss[0] = 0;
        for (int s = 0; s < NS; s++) ss[s + 1] = ss[s] + rows[s], kvl[s] = 8;
        T = ss[NS];
        t.b.n_tokens = T, t.b.n_seqs = NS, t.b.seq_start = ss, t.b.kv_len = kvl;
        begin_all(&t);
        float *x = frands((size_t)T * CH), *qkv = frands((size_t)T * dconv), *al = frands((size_t)T * NV),
              *be = frands((size_t)T * NV), *xbc = frands((size_t)T * dssm), *dt = frands((size_t)T * NH);
        float *out[2][3];
        for (int i = 0; i < 2; i++) {
            for (int o = 0; o < 3; o++) out[i][o] = malloc((size_t)(T ? T : 1) * 64 * 4);
            CHECK(OPS(i)->conv1d_state(CTX(i), x, CH, &bw, &bb, st[i][0], true, out[i][0]) == 0);
            CHECK(OPS(i)->delta_net(CTX(i), qkv, al, be, &bdt, &ba, st[i][1], &dl, out[i][1]) == 0);
            CHECK(OPS(i)->ssm_scan(CTX(i), xbc, dt, &bdt, &ba, &bd, st[i][2], &sm, out[i][2]) == 0);
        }
        for (int o = 0; o < 3; o++) CHECK(!memcmp(out[0][o], out[1][o], (size_t)T * (o == 0 ? CH : o == 1 ? NV * DK : NH * P) * 4));
        for (int s = 0; s < NS; s++)
            for (int r = ss[s]; r < ss[s + 1]; r++) {
                for (int c = 0; c < CH; c++) { /* convolution */
                    double acc = bias[c];
                    for (int j = 0; j < K - 1; j++) acc += rconv[s][j][c] * w[c * K + j];
                    acc += (double)x[r * CH + c] * w[c * K + K - 1];
                    acc = acc / (1 + exp(-acc));
                    worst = fmax(worst, fabs(acc - out[0][0][r * CH + c]));
                }
                for (int c = 0; c < CH; c++) {
                    for (int j = 0; j < K - 2; j++) rconv[s][j][c] = rconv[s][j + 1][c];
                    rconv[s][K - 2][c] = x[r * CH + c];
                }
                for (int h = 0; h < NV; h++) { /* delta rule */
                    const float *row = qkv + (size_t)r * dconv;
                    double q[DK], k[DK], nq = 0, nk = 0;
                    for (int j = 0; j < DK; j++) q[j] = row[(h % NK) * DK + j], k[j] = row[NK * DK + (h % NK) * DK + j];
                    for (int j = 0; j < DK; j++) nq += q[j] * q[j], nk += k[j] * k[j];
                    for (int j = 0; j < DK; j++) q[j] /= sqrt(nq) * sqrt((double)DK), k[j] /= sqrt(nk);
                    double sp = al[r * NV + h] + dtb[h];
                    sp = log1p(exp(sp));
                    const double decay = exp(sp * a[h]), b = 1 / (1 + exp(-be[r * NV + h]));
                    for (int i = 0; i < DK; i++) {
                        double sk = 0, o = 0;
                        for (int j = 0; j < DK; j++) rdelta[s][h][i][j] *= decay, sk += rdelta[s][h][i][j] * k[j];
                        const double d = b * (row[2 * NK * DK + h * DK + i] - sk);
                        for (int j = 0; j < DK; j++) rdelta[s][h][i][j] += d * k[j], o += rdelta[s][h][i][j] * q[j];
                        worst = fmax(worst, fabs(o - out[0][1][r * NV * DK + h * DK + i]));
                    }
                }
                for (int h = 0; h < NH; h++) { /* selective scan */
                    const float *row = xbc + (size_t)r * dssm;
                    const int g = h / (NH / G);
                    double d = log1p(exp((double)dt[r * NH + h] + dtb[h]));
                    const double dA = exp(d * a[h]);
                    for (int i = 0; i < P; i++) {
                        double y = 0;
                        for (int n = 0; n < N; n++) {
                            rssm[s][h][i][n] = rssm[s][h][i][n] * dA + row[NH * P + g * N + n] * row[h * P + i] * d;
                            y += rssm[s][h][i][n] * row[NH * P + G * N + g * N + n];
                        }
                        y += dd[h] * row[h * P + i];
                        worst = fmax(worst, fabs(y - out[0][2][r * NH * P + h * P + i]));
                    }
                }
            }
        for (int i = 0; i < 2; i++)
            for (int o = 0; o < 3; o++) free(out[i][o]);
        free(x), free(qkv), free(al), free(be), free(xbc), free(dt);
    }
    CHECKF(worst < 1e-4, "recurrent ops: worst difference from the reference %g", worst);
    for (int i = 0; i < 2; i++)
        for (int s = 0; s < NS; s++) free(st[i][0][s]), free(st[i][1][s]), free(st[i][2][s]);
    free(w), free(bias), free(dtb), free(a), free(dd);
}

int main(void) {
    llc_err err;
    if (backend_cpu_create(1, &g_be[0], &err) || backend_cpu_create(3, &g_be[1], &err)) {
        fprintf(stderr, "backend: %s\n", err.msg);
        return 1;
    }
    RUN(test_rmsnorm);
    RUN(test_rope);
    RUN(test_embed);
    RUN(test_kv_store);
    RUN(test_bias_copies_gather);
    RUN(test_matmul_multi);
    RUN(test_recurrent_ops);
    RUN(test_weights_leave_file_mapping);
    backend_free(g_be[0]);
    backend_free(g_be[1]);
    return t_summary();
}
