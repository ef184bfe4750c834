/* test_attention.c — CPU paged attention at every SIMD level against a double
 * precision reference: several sequences (prefill chunks and decode rows) with
 * scrambled block tables, grouped-query heads, head sizes with and without a
 * vector tail, sliding windows and soft-capping, caches of f32, f16 and q8_0
 * (the reference reads their values dequantized), prefills over many key tiles;
 * the result is the same for 1 and 2 threads, and every row computed alone (as a
 * decode row) gives the bits it gives in its chunk. Writing cache rows gives the
 * same bytes at every level. */
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/quant.h"
#include "tests/test.h"

static uint64_t g_rng = 12345;
static float frand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static int g_bs = 16; /* KV block size of the next setup */
static int g_window;     /* and its sliding window (0: none) */
static float g_softcap;  /* and its score soft-capping (0: none) */
static uint32_t g_type = QT_F32; /* and its cache element type */
static bool g_sinks;     /* and per-head sink logits (gpt-oss) */
static int g_start0 = 10, g_rows0 = 40; /* and its first sequence's chunk */

typedef struct setup {
    bk_attn a;
    bk_batch b;
    int32_t positions[256], seq_start[8], kv_len[8], table[8 * 16];
    float *q, *k, *v; /* k, v: the caches' values as f32 */
    float sinks[64];
    void *kc, *vc;    /* the caches in g_type */
    int max_kv;
} setup;

/* Three sequences: a 40-row prefill chunk starting at position 10 (g_rows0 rows
 * at g_start0), one decode row at position 70, and a 5-row chunk at 0. Blocks
 * are handed out shuffled. */
static void make_setup(setup *s, int n_heads, int n_kv_heads, int hd) {
    memset(s, 0, sizeof *s);
    s->a = (bk_attn){.n_heads = n_heads, .n_kv_heads = n_kv_heads, .head_dim = hd, .block_size = g_bs,
                     .scale = 1.0f / sqrtf((float)hd), .window = g_window, .softcap = g_softcap, .kv_type = g_type};
    if (g_sinks) { /* from well below the scores to well above them */
        for (int h = 0; h < n_heads && h < 64; h++) s->sinks[h] = (float)(h % 4) * 3.0f - 4.0f + frand();
        s->a.sinks = s->sinks;
    }
    int starts[3] = {g_start0, 70, 0}, rows[3] = {g_rows0, 1, 5}, T = 0;
    int n_blocks = 0, order[48];
    for (int i = 0; i < 48; i++) order[i] = i;
    for (int i = 47; i > 0; i--) {
        int j = (int)((g_rng = g_rng * 6364136223846793005ull + 1) >> 33) % (i + 1);
        int t = order[i]; order[i] = order[j]; order[j] = t;
    }
    s->b.max_blocks = 16;
    for (int q = 0; q < 3; q++) {
        s->seq_start[q] = T;
        for (int r = 0; r < rows[q]; r++) s->positions[T++] = starts[q] + r;
        s->kv_len[q] = starts[q] + rows[q];
        for (int k = 0; k * g_bs < s->kv_len[q]; k++) s->table[q * 16 + k] = order[n_blocks++];
        if (s->kv_len[q] > s->max_kv) s->max_kv = s->kv_len[q];
    }
    s->seq_start[3] = T;
    s->b.n_tokens = T;
    s->b.positions = s->positions;
    s->b.n_seqs = 3;
    s->b.seq_start = s->seq_start;
    s->b.kv_len = s->kv_len;
    s->b.block_table = s->table;
    size_t kv = (size_t)48 * g_bs * n_kv_heads * hd, qn = (size_t)T * n_heads * hd;
    s->q = malloc(qn * sizeof(float));
    s->k = malloc(kv * sizeof(float));
    s->v = malloc(kv * sizeof(float));
    for (size_t i = 0; i < qn; i++) s->q[i] = frand() * 2;
    for (size_t i = 0; i < kv; i++) s->k[i] = frand() * 2, s->v[i] = frand();
    /* the typed caches, and their values read back for the reference */
    const int kv_dim = n_kv_heads * hd;
    const size_t rb = qtype_row_bytes(g_type, kv_dim), n_rows = kv / kv_dim;
    s->kc = malloc(n_rows * rb);
    s->vc = malloc(n_rows * rb);
    for (size_t r = 0; r < n_rows; r++) {
        cpu_kv_write_row(g_type, (uint8_t *)s->kc + r * rb, s->k + r * kv_dim, kv_dim);
        cpu_kv_write_row(g_type, (uint8_t *)s->vc + r * rb, s->v + r * kv_dim, kv_dim);
        dequantize_row(g_type, (uint8_t *)s->kc + r * rb, s->k + r * kv_dim, kv_dim);
        dequantize_row(g_type, (uint8_t *)s->vc + r * rb, s->v + r * kv_dim, kv_dim);
    }
}

static void reference(const setup *s, double *out) {
    const bk_attn *a = &s->a;
    int group = a->n_heads / a->n_kv_heads, hd = a->head_dim, kv_dim = a->n_kv_heads * hd;
    double sc[256];
    for (int q = 0; q < 3; q++)
        for (int r = s->seq_start[q]; r < s->seq_start[q + 1]; r++)
            for (int h = 0; h < a->n_heads; h++) {
                int n = s->positions[r] + 1;
                int lo = a->window > 0 && n - a->window > 0 ? n - a->window : 0;
                const float *qv = s->q + ((size_t)r * a->n_heads + h) * hd;
                double mx = -1e300, sum = 0;
                for (int t = lo; t < n; t++) {
                    size_t slot = (size_t)s->table[q * 16 + t / a->block_size] * a->block_size + t % a->block_size;
                    const float *k = s->k + slot * kv_dim + (size_t)(h / group) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)qv[i] * k[i];
                    sc[t] = d * a->scale;
                    if (a->softcap > 0) sc[t] = a->softcap * tanh(sc[t] / a->softcap);
                    if (sc[t] > mx) mx = sc[t];
                }
                if (a->sinks && a->sinks[h] > mx) mx = a->sinks[h];
                for (int t = lo; t < n; t++) sum += sc[t] = exp(sc[t] - mx);
                if (a->sinks) sum += exp(a->sinks[h] - mx);
                double *o = out + ((size_t)r * a->n_heads + h) * hd;
                for (int i = 0; i < hd; i++) o[i] = 0;
                for (int t = lo; t < n; t++) {
                    size_t slot = (size_t)s->table[q * 16 + t / a->block_size] * a->block_size + t % a->block_size;
                    const float *v = s->v + slot * kv_dim + (size_t)(h / group) * hd;
                    for (int i = 0; i < hd; i++) o[i] += sc[t] / sum * v[i];
                }
            }
}

static void check_shape(int n_heads, int n_kv_heads, int hd) {
    setup s;
    make_setup(&s, n_heads, n_kv_heads, hd);
    size_t n = (size_t)s.b.n_tokens * n_heads * hd;
    double *want = malloc(n * sizeof *want);
    float *got = malloc(n * sizeof *got), *got1 = malloc(n * sizeof *got1);
    reference(&s, want);
    cpu_pool *p1, *p2;
    cpu_pool_create(1, &p1);
    cpu_pool_create(2, &p2);
    cpu_simd_level saved = cpu_matmul_level();
    for (int lvl = CPU_SIMD_SCALAR; lvl <= (int)cpu_matmul_max_level(); lvl++) {
        cpu_matmul_set_level((cpu_simd_level)lvl);
        cpu_attention_run(p2, &s.b, &s.a, s.q, s.kc, s.vc, got, s.max_kv);
        cpu_attention_run(p1, &s.b, &s.a, s.q, s.kc, s.vc, got1, s.max_kv);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs(got[i] - want[i]);
            if (d > worst) worst = d;
        }
        CHECKF(worst < 2e-5, "%s heads %d/%d dim %d level %d: max error %g", qtype_name(g_type), n_heads,
               n_kv_heads, hd, lvl, worst);
        CHECKF(!memcmp(got, got1, n * sizeof *got), "level %d: 1 and 2 threads differ", lvl);
        /* each row alone, as a decode step computes it: the same bits */
        bool same = true;
        for (int q = 0; q < 3; q++)
            for (int r = s.seq_start[q]; r < s.seq_start[q + 1]; r++) {
                bk_batch one = s.b;
                int32_t pos = s.positions[r], start[2] = {0, 1};
                one.n_tokens = 1, one.positions = &pos, one.n_seqs = 1, one.seq_start = start;
                one.kv_len = &s.kv_len[q], one.block_table = s.table + q * 16;
                const size_t row = (size_t)n_heads * hd;
                cpu_attention_run(r % 2 ? p1 : p2, &one, &s.a, s.q + r * row, s.kc, s.vc, got1, s.max_kv);
                same &= !memcmp(got + r * row, got1, row * sizeof *got);
            }
        CHECKF(same, "%s heads %d/%d dim %d level %d: a row alone differs from its chunk", qtype_name(g_type),
               n_heads, n_kv_heads, hd, lvl);
    }
    cpu_matmul_set_level(saved);
    cpu_pool_free(p1);
    cpu_pool_free(p2);
    free(want), free(got), free(got1), free(s.q), free(s.k), free(s.v), free(s.kc), free(s.vc);
}

static void test_gqa_head64(void) { check_shape(8, 2, 64); }
static void test_mha_head_with_tail(void) { check_shape(4, 4, 40); }
static void test_odd_head_size(void) { check_shape(6, 3, 13); }
/* blocks that 16-key groups straddle; heads over 64 dimensions (the AVX-512 value
 * sums go 64 at a time), with and without a tail */
static void test_block_size_5(void) {
    g_bs = 5;
    check_shape(8, 2, 64);
    check_shape(4, 2, 80);
    check_shape(2, 1, 136);
    g_bs = 16;
}

/* gemma: sliding windows (shorter than a block, straddling blocks, longer than
 * every sequence) and soft-capped scores */
static void test_window_and_softcap(void) {
    const int windows[] = {1, 7, 23, 200};
    for (size_t i = 0; i < LLC_ARRAY_LEN(windows); i++) {
        g_window = windows[i];
        g_bs = 16;
        check_shape(4, 2, 32);
        g_bs = 5;
        check_shape(8, 2, 64);
    }
    g_window = 0;
    g_softcap = 1.5f;
    check_shape(4, 2, 32);
    g_window = 9;
    check_shape(6, 3, 13);
    g_window = 0;
    g_softcap = 0;
    g_bs = 16;
}

/* gpt-oss: a sink logit per head joins the softmax's denominator (some heads'
 * sinks above every score, some below), with windows and every cache type */
static void test_sinks(void) {
    g_sinks = true;
    check_shape(8, 2, 64);
    check_shape(6, 3, 13);
    g_window = 8;
    check_shape(4, 2, 32);
    g_window = 0;
    const uint32_t types[] = {QT_F16, QT_Q8_0};
    for (size_t i = 0; i < LLC_ARRAY_LEN(types); i++) {
        g_type = types[i];
        check_shape(8, 2, 64);
    }
    g_type = QT_F32;
    g_sinks = false;
}

/* f16 and q8_0 caches: the shapes above where q8_0 applies (rows of whole blocks,
 * heads a multiple of 8 wide: 40- and 8-wide heads straddle its blocks) */
static void test_f16_and_q8_0_caches(void) {
    const uint32_t types[] = {QT_F16, QT_Q8_0};
    for (size_t i = 0; i < LLC_ARRAY_LEN(types); i++) {
        g_type = types[i];
        check_shape(8, 2, 64);
        check_shape(4, 4, 40);
        check_shape(8, 4, 8);
        if (g_type == QT_F16) check_shape(6, 3, 13);
        g_bs = 5;
        check_shape(4, 2, 80);
        g_window = 7;
        g_softcap = 1.5f;
        check_shape(4, 2, 32);
        g_window = 0;
        g_softcap = 0;
        g_bs = 16;
    }
    g_type = QT_F32;
    CHECK(cpu_kv_type_supported(QT_F16, 39, 13) && !cpu_kv_type_supported(QT_Q8_0, 48, 12) &&
          !cpu_kv_type_supported(QT_Q8_0, 40, 8) && !cpu_kv_type_supported(QT_Q4_0, 64, 64));
}

/* A 200-row prefill from position 40 over 7 key tiles of 32 and 15 scrambled
 * blocks (the running maximum rises and falls from tile to tile): every cache
 * type, with a window across tiles, with sinks, and at an MHA shape (64 rows per
 * task) and a wide GQA one. */
static void test_long_prefill(void) {
    g_start0 = 40, g_rows0 = 200;
    const uint32_t types[] = {QT_F32, QT_F16, QT_Q8_0};
    for (size_t i = 0; i < LLC_ARRAY_LEN(types); i++) {
        g_type = types[i];
        check_shape(8, 2, 64);
    }
    g_type = QT_F16;
    check_shape(2, 2, 40);
    g_window = 45;
    g_sinks = true;
    check_shape(16, 2, 32);
    g_window = 0;
    g_sinks = false;
    g_type = QT_F32;
    g_start0 = 10, g_rows0 = 40;
}

/* A written row is the same bytes at every SIMD level: f16 rounds to nearest even
 * (as f32_to_fp16, subnormals, ties and overflow included), q8_0 as quantize_row. */
static void test_write_row_same_at_every_level(void) {
    enum { N = 96 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = frand() * 4;
    x[0] = 1e-6f, x[1] = -3e-7f, x[2] = 70000.0f, x[3] = 1.0f + 1.0f / 2048, x[4] = 0; /* subnormal, overflow, tie */
    const uint32_t types[] = {QT_F32, QT_F16, QT_Q8_0};
    cpu_simd_level saved = cpu_matmul_level();
    for (size_t t = 0; t < LLC_ARRAY_LEN(types); t++) {
        uint8_t want[N * 4 + 1], got[N * 4 + 1];
        const size_t rb = qtype_row_bytes(types[t], N);
        quantize_row(types[t], x, want, N);
        for (int lvl = CPU_SIMD_SCALAR; lvl <= (int)cpu_matmul_max_level(); lvl++) {
            cpu_matmul_set_level((cpu_simd_level)lvl);
            memset(got, 0xAA, sizeof got);
            cpu_kv_write_row(types[t], got, x, N);
            CHECKF(!memcmp(got, want, rb) && got[rb] == 0xAA, "%s row at level %d", qtype_name(types[t]), lvl);
        }
    }
    cpu_matmul_set_level(saved);
}

int main(void) {
    RUN(test_gqa_head64);
    RUN(test_mha_head_with_tail);
    RUN(test_odd_head_size);
    RUN(test_block_size_5);
    RUN(test_window_and_softcap);
    RUN(test_sinks);
    RUN(test_f16_and_q8_0_caches);
    RUN(test_long_prefill);
    RUN(test_write_row_same_at_every_level);
    return t_summary();
}
