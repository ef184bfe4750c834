/* test_matmul.c — cpu_matmul against the scalar reference cpu_matmul_ref, for every
 * supported weight type × every SIMD level this CPU has × batch sizes T in {1, 2, 7,
 * 33} × shapes (one block, several, an odd count; n_out not a multiple of any tile),
 * on fresh random weights (quantize_row) and activations. Also: 1 and 2 pool threads
 * give bitwise identical results, unsupported types and bad shapes are refused,
 * every output is written (Y is poisoned with NaN before each call), nothing reads
 * past the weights or activations (placed against a PROT_NONE page, as a tensor at
 * the end of an mmapped GGUF file may be), and NaN/inf activations propagate;
 * cpu_matmul_multi equals separate calls bit for bit (test_multi).
 *
 * Tolerances. The reference uses the exact activations x (for BF16 weights x rounded
 * to bf16, as every level and ggml multiply them); the kernels use them so for float
 * weights, and quantized to int8 per 32-element block for the
 * quantized types (x̂ = d_b·q, d_b = max|x| / 127 over the block, |x - x̂| ≤ d_b/2,
 * rounding error close to uniform on ±d_b/2 and independent across elements). The
 * error of one output is then Σ w_i (x_i - x̂_i), a sum of independent terms with
 * standard deviation σ = sqrt(Σ w_i² d_b(i)² / 12), and we allow 6σ (a chance below
 * 1e-8 per output of a false failure; the seeds are fixed anyway) plus 2e-5 · Σ|w_i x_i|
 * for the f32 arithmetic around the integer sums (int → float, fp16 scales, products).
 * Float weights get 2e-6 · Σ|w_i x_i|: f32 accumulation over n ≤ 5000 terms in 16 or
 * more partial sums. Both leave a margin (the worst |error| / tolerance is printed:
 * ~0.6 for the quantized types, i.e. ~4σ over ~10^5 outputs; ~0.1 for float) yet are
 * tight enough to catch one 4-element group computed wrongly. */
#include "kernels/common.h"
#include "kernels/quant.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h" /* mm_avx_vnni, for test_avx_vnni_same */
#include "kernels/cpu/pool.h"
#include "tests/test.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_unit(void) { return (float)(rnd_u32() & 0xffffff) / 16777216.0f * 2 - 1; }
/* roughly Gaussian, with occasional larger values so blocks have varied scales */
static float rnd_val(void) {
    float v = rnd_unit() + rnd_unit() + rnd_unit();
    if ((rnd_u32() & 31) == 0) v *= 4;
    return v;
}

static const uint32_t g_types[] = {QT_F32,  QT_F16,  QT_BF16, QT_Q8_0, QT_Q4_0,   QT_Q4_1,  QT_Q5_0, QT_Q5_1,
                                   QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_IQ4_NL, QT_IQ4_XS,
                                   QT_MXFP4, QT_IQ2_XXS, QT_IQ2_XS, QT_IQ2_S, QT_IQ3_XXS, QT_IQ3_S, QT_IQ1_S,
                                   QT_IQ1_M};

/* types the AVX-512 level multiplies with a blocked GEMM when T > 1 */
static int has_avx512_gemm(uint32_t type) {
    return type == QT_F32 || type == QT_F16 || type == QT_BF16 || type == QT_Q8_0 || type == QT_Q4_0 ||
           type == QT_Q4_K || type == QT_Q6_K || type == QT_Q2_K || type == QT_Q3_K ||
           /* (the AVX2 GEMM, borrowed) */
           type == QT_Q5_K || type == QT_Q4_1 || type == QT_Q5_0 || type == QT_Q5_1 || type == QT_IQ4_NL ||
           type == QT_IQ4_XS || type == QT_MXFP4;
}

/* types the AVX2 level multiplies with a blocked GEMM when T > 1 */
static int has_avx2_gemm(uint32_t type) {
    return type == QT_Q8_0 || type == QT_Q4_0 || type == QT_Q4_K || type == QT_Q5_K || type == QT_Q6_K ||
           type == QT_Q4_1 || type == QT_Q5_0 || type == QT_Q5_1 || type == QT_IQ4_NL || type == QT_IQ4_XS ||
           type == QT_MXFP4 || type == QT_Q2_K || type == QT_Q3_K;
}
/* ... from this many rows (below, the dot kernels: each row's arithmetic as alone) */
static int64_t avx2_gemm_min_rows(uint32_t type) {
    if (type == QT_IQ4_NL || type == QT_IQ4_XS || type == QT_MXFP4) return 6;
    return type == QT_Q4_K || type == QT_Q5_K || type == QT_Q6_K || type == QT_Q2_K || type == QT_Q3_K ? 8 : 4;
}

static int is_quant(uint32_t type) {
    return type != QT_F32 && type != QT_F16 && type != QT_BF16;
}

/* elements sharing one activation scale: a K-quant superblock, else a 32-block
 * (as ggml pairs K-quants with Q8_K activations) */
static int64_t act_span(uint32_t type) {
    switch (type) {
    case QT_Q2_K: case QT_Q3_K: case QT_Q4_K: case QT_Q5_K: case QT_Q6_K: case QT_IQ4_XS: return 256;
    default: return qtype_is_iq(type) ? 256 : 32;
    }
}

/* A random row of n elements of `type`: quantize_row of random values where the
 * type has a quantizer; else (the i-quants) random block bytes, which are all valid
 * (every index names a grid entry), with the block scales set to powers of two
 * around `scale`. */
static void random_row(uint32_t type, float scale, int64_t n, uint8_t *dst) {
    const qtype_info *qi = qtype_get(type);
    if (qi->quantizable) {
        float *row = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) row[i] = rnd_val() * scale;
        CHECK(quantize_row(type, row, dst, n) == 0);
        free(row);
        return;
    }
    const size_t rb = qtype_row_bytes(type, n), bb = qi->block_bytes;
    for (size_t i = 0; i < rb; i++) dst[i] = (uint8_t)rnd_u32();
    for (size_t b = 0; b < rb; b += bb) {
        /* d = 2^-(5..8) · scale: level × multiplier reaches ~62 × 31 */
        const uint16_t h = (uint16_t)(f32_to_fp16(scale) - 0x400 * (5 + rnd_u32() % 4));
        if (type == QT_IQ1_M) /* d's bits in the top nibbles of the four scale words */
            for (int k = 0; k < 4; k++) dst[b + 49 + 2 * k] = (uint8_t)((dst[b + 49 + 2 * k] & 0x0f) | ((h >> 4 * k) & 0xf) << 4);
        else
            dst[b] = (uint8_t)h, dst[b + 1] = (uint8_t)(h >> 8);
    }
}

typedef struct problem {
    uint32_t type;
    int64_t n_in, n_out, T;
    uint8_t *W;
    float *Wf; /* dequantized weights */
    float *X;
    float *ref;
    float *tol;
} problem;

static void problem_free(problem *p) {
    free(p->W);
    free(p->Wf);
    free(p->X);
    free(p->ref);
    free(p->tol);
}

static int problem_make(problem *p, uint32_t type, int64_t n_in, int64_t n_out, int64_t T) {
    memset(p, 0, sizeof *p);
    p->type = type;
    p->n_in = n_in;
    p->n_out = n_out;
    p->T = T;
    const size_t rb = qtype_row_bytes(type, n_in);
    p->W = malloc(rb * (size_t)n_out + 1);
    p->Wf = malloc(sizeof(float) * (size_t)(n_in * n_out));
    p->X = malloc(sizeof(float) * (size_t)(n_in * T));
    p->ref = malloc(sizeof(float) * (size_t)(n_out * T));
    p->tol = malloc(sizeof(float) * (size_t)(n_out * T));
    if (!p->W || !p->Wf || !p->X || !p->ref || !p->tol) return -1;
    /* weights stored at an odd address: GGUF data may be only 32-byte aligned, and
     * the kernels must not care at all */
    uint8_t *w = p->W + 1;
    const float wscale = 0.02f + 0.1f * (float)(rnd_u32() % 8);
    for (int64_t o = 0; o < n_out; o++) {
        random_row(type, wscale, n_in, w + (size_t)o * rb);
        CHECK(dequantize_row(type, w + (size_t)o * rb, p->Wf + o * n_in, n_in) == 0);
    }
    for (int64_t i = 0; i < n_in * T; i++) p->X[i] = rnd_val();
    CHECK(cpu_matmul_ref(type, w, n_in, n_out, p->X, T, p->ref) == 0);
    for (int64_t t = 0; t < T; t++) {
        const float *x = p->X + t * n_in;
        for (int64_t o = 0; o < n_out; o++) {
            const float *wr = p->Wf + o * n_in;
            double abs_sum = 0, var = 0;
            for (int64_t i = 0; i < n_in; i++) abs_sum += fabs((double)wr[i] * x[i]);
            /* rounding x to steps d: variance d²/12 per element, d from the span's max */
            const int64_t span = act_span(type);
            for (int64_t b = 0; is_quant(type) && b < n_in / span; b++) {
                float amax = 0;
                for (int64_t i = 0; i < span; i++) amax = fmaxf(amax, fabsf(x[span * b + i]));
                const double d = amax / 127.0;
                for (int64_t i = 0; i < span; i++) {
                    const double wi = wr[span * b + i];
                    var += wi * wi * d * d / 12;
                }
            }
            const double tol = is_quant(type) ? 6 * sqrt(var) + 2e-5 * abs_sum + 1e-6
                                              : 2e-6 * abs_sum + 1e-6;
            p->tol[t * n_out + o] = (float)tol;
        }
    }
    return 0;
}

static const uint8_t *problem_w(const problem *p) { return p->W + 1; }

/* worst |error| / tolerance seen per type (printed: the margin the kernels leave) */
static double g_worst[64];

/* Runs cpu_matmul on a NaN-poisoned Y and checks every element against ref. */
static void problem_check_packed(const problem *p, cpu_pool *pool, const cpu_packed_w *pk,
                                 const char *what) {
    const size_t ny = (size_t)(p->n_out * p->T);
    float *Y = malloc(sizeof(float) * ny);
    if (!Y) return;
    for (size_t i = 0; i < ny; i++) Y[i] = NAN;
    int rc = cpu_matmul_packed(pool, p->type, problem_w(p), pk, p->n_in, p->n_out, p->X, p->T, Y);
    CHECKF(rc == 0, "%s: rc %d", what, rc);
    int bad = 0;
    for (size_t i = 0; i < ny && bad < 3; i++) {
        const double err = fabs((double)Y[i] - (double)p->ref[i]);
        if (p->type < 64 && err / p->tol[i] > g_worst[p->type]) g_worst[p->type] = err / p->tol[i];
        if (!(err <= p->tol[i])) {
            bad++;
            CHECKF(0, "%s %s n_in=%lld n_out=%lld T=%lld: Y[t=%lld][o=%lld] = %.7g, ref %.7g, tol %.3g",
                   cpu_simd_name(), qtype_name(p->type), (long long)p->n_in,
                   (long long)p->n_out, (long long)p->T, (long long)(i / (size_t)p->n_out),
                   (long long)(i % (size_t)p->n_out), Y[i], p->ref[i], p->tol[i]);
        }
    }
    free(Y);
}

static void problem_check(const problem *p, cpu_pool *pool, const char *what) {
    problem_check_packed(p, pool, NULL, what);
}


static cpu_pool *g_pool1, *g_pool2;

static const cpu_simd_level g_levels[] = {CPU_SIMD_SCALAR, CPU_SIMD_AVX2, CPU_SIMD_AVX512};

/* the types a level packs ahead (cpu_matmul_prepack at that level) */
static int packs_ahead(cpu_simd_level level, uint32_t type) {
    if (level == CPU_SIMD_AVX512)
        return type == QT_Q8_0 || type == QT_Q4_0 || type == QT_Q4_K || type == QT_Q6_K || type == QT_IQ4_XS ||
               type == QT_Q2_K || type == QT_Q3_K || type == QT_IQ4_NL;
    if (level == CPU_SIMD_AVX2) return type == QT_Q8_0;
    return 0;
}

/* weights packed ahead (the CPU backend's few-row GEMM path), at each level that packs:
 * every quantized type (those a level does not pack are left unpacked and must still
 * come out right), row counts around the thresholds (the two-panel kernel's register
 * and L1 sums, 4-row subgroups, two row groups, AVX2's int8 panels up to 8 rows and
 * widened above), n_out not a multiple of the panel pair, and n_in over the K-slice so
 * the last slice is short; 1 and 2 threads agree bit for bit; another level ignores
 * the panels (each level packs its own layout) */
static void test_prepacked(void) {
    const int64_t Ts[] = {1, 2, 3, 5, 8, 9, 12, 13};
    const int64_t shapes[][2] = {{256, 67}, {2048 + 256, 37}};
    const cpu_simd_level levels[] = {CPU_SIMD_AVX2, CPU_SIMD_AVX512};
    for (size_t li = 0; li < LLC_ARRAY_LEN(levels); li++) {
        const cpu_simd_level level = levels[li];
        if (level > cpu_matmul_max_level()) continue;
        for (size_t ti = 0; ti < LLC_ARRAY_LEN(g_types); ti++) {
            const uint32_t type = g_types[ti];
            if (!is_quant(type)) continue;
            for (size_t si = 0; si < 2; si++)
                for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
                    problem p;
                    if (problem_make(&p, type, shapes[si][0], shapes[si][1], Ts[k])) continue;
                    cpu_matmul_set_level(level);
                    cpu_packed_w pk;
                    CHECK(cpu_matmul_prepack(g_pool2, type, problem_w(&p), p.n_in, p.n_out, &pk) == 0);
                    CHECKF((pk.data != NULL) == packs_ahead(level, type), "%s %s: packed %d", cpu_simd_name(),
                           qtype_name(type), pk.data != NULL);
                    problem_check_packed(&p, g_pool2, &pk, "prepacked");
                    const size_t ny = (size_t)(p.n_out * p.T);
                    float *y1 = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
                    if (y1 && y2) {
                        CHECK(cpu_matmul_packed(g_pool1, type, problem_w(&p), &pk, p.n_in, p.n_out, p.X, p.T, y1) == 0);
                        CHECK(cpu_matmul_packed(g_pool2, type, problem_w(&p), &pk, p.n_in, p.n_out, p.X, p.T, y2) == 0);
                        CHECKF(memcmp(y1, y2, ny * sizeof(float)) == 0, "%s %s T=%lld prepacked: 1 vs 2 threads differ",
                               cpu_simd_name(), qtype_name(type), (long long)p.T);
                    }
                    free(y1);
                    free(y2);
                    for (size_t lj = 0; lj <= LLC_ARRAY_LEN(levels); lj++) { /* the other levels, and scalar */
                        const cpu_simd_level other = lj < LLC_ARRAY_LEN(levels) ? levels[lj] : CPU_SIMD_SCALAR;
                        if (other == level || other > cpu_matmul_max_level()) continue;
                        cpu_matmul_set_level(other);
                        problem_check_packed(&p, g_pool2, &pk, "packed at another level");
                    }
                    cpu_matmul_set_level(cpu_matmul_max_level());
                    cpu_packed_w_free(&pk);
                    problem_free(&p);
                }
        }
    }
}

/* IQ4_NL packed ahead at the AVX-512 level computes what it does unpacked, bit for
 * bit, at every T: the dot kernel's lanes below MM_AVX512_NL_GEMM_MIN_T rows
 * (nl_rows_exact), the GEMM from there on. Shapes: an odd number of 32-blocks (the
 * dot kernel's last block alone), n_in over the GEMM's 2048-element K-slice (a panel's
 * slices end to end) with a short last slice, n_out not a multiple of the 16-row panel
 * nor of the pair; 1 and 2 threads. Non-finite activations (a NaN or inf span) too. */
static void test_iq4_nl_packed_same(void) {
    if (cpu_matmul_max_level() < CPU_SIMD_AVX512) return;
    const int64_t shapes[][2] = {{32, 5}, {96, 16}, {224, 37}, {2048, 32}, {2048 + 96, 67}, {3 * 2048 + 32, 19}};
    const int64_t Ts[] = {1, 2, 3, 4, 5, 13};
    cpu_matmul_set_level(CPU_SIMD_AVX512);
    for (size_t si = 0; si < LLC_ARRAY_LEN(shapes); si++)
        for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
            const int64_t n_in = shapes[si][0], n_out = shapes[si][1], T = Ts[k];
            problem p;
            if (problem_make(&p, QT_IQ4_NL, n_in, n_out, T)) {
                CHECK(0);
                continue;
            }
            if (si == 2 && T > 1) { /* a NaN span in row 0, an inf one in row 1 */
                p.X[40] = NAN;
                p.X[n_in + 100] = INFINITY;
            }
            const size_t ny = (size_t)(n_out * T);
            float *yu = malloc(ny * sizeof(float)), *yp = malloc(ny * sizeof(float));
            cpu_packed_w pk = {0};
            CHECK(cpu_matmul_prepack(g_pool2, QT_IQ4_NL, problem_w(&p), n_in, n_out, &pk) == 0);
            CHECK(pk.data != NULL);
            for (int np = 1; yu && yp && np <= 2; np++) {
                cpu_pool *pool = np == 1 ? g_pool1 : g_pool2;
                CHECK(cpu_matmul(pool, QT_IQ4_NL, problem_w(&p), n_in, n_out, p.X, T, yu) == 0);
                CHECK(cpu_matmul_packed(pool, QT_IQ4_NL, problem_w(&p), &pk, n_in, n_out, p.X, T, yp) == 0);
                for (size_t i = 0; i < ny; i++)
                    if (memcmp(&yu[i], &yp[i], 4)) {
                        CHECKF(0, "IQ4_NL n_in=%lld n_out=%lld T=%lld threads=%d: Y[%zu] packed %.9g vs unpacked %.9g",
                               (long long)n_in, (long long)n_out, (long long)T, np, i, yp[i], yu[i]);
                        break;
                    }
            }
            cpu_packed_w_free(&pk);
            free(yu);
            free(yp);
            problem_free(&p);
        }
    cpu_matmul_set_level(cpu_matmul_max_level());
}

/* every type × level × T × shape, against the reference */
static void test_against_reference(void) {
    const int64_t Ts[] = {1, 2, 7, 33};
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(g_types); ti++) {
        const uint32_t type = g_types[ti];
        const int64_t blk = qtype_get(type)->block_elems;
        /* n_in: one block, several, an odd number; for float types too (16-wide
         * vectors leave remainders), with a 256-multiple base */
        int64_t n_ins[3];
        if (blk == 1) {
            n_ins[0] = 7;
            n_ins[1] = 256;
            n_ins[2] = 1000;
        } else if (blk == 32) {
            n_ins[0] = 32;
            n_ins[1] = 256;
            n_ins[2] = 32 * 13;
        } else {
            n_ins[0] = 256;
            n_ins[1] = 512;
            n_ins[2] = 256 * 5;
        }
        const int64_t n_outs[] = {1, 5, 67};
        for (int si = 0; si < 3; si++) {
            for (int oi = 0; oi < 3; oi++) {
                /* the largest shapes only with the odd n_out, to keep ASan time sane */
                if (si == 2 && oi != 2) continue;
                for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
                    problem p;
                    if (problem_make(&p, type, n_ins[si], n_outs[oi], Ts[k]) == 0) {
                        for (size_t li = 0; li < LLC_ARRAY_LEN(g_levels); li++) {
                            if (g_levels[li] > cpu_matmul_max_level()) continue;
                            cpu_matmul_set_level(g_levels[li]);
                            problem_check(&p, g_pool2, "2 threads");
                        }
                        cpu_matmul_set_level(cpu_matmul_max_level());
                    }
                    problem_free(&p);
                }
            }
        }
    }
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(g_types); ti++)
        printf("     %-5s worst |error| / tolerance: %.3f\n", qtype_name(g_types[ti]), g_worst[g_types[ti]]);
}

/* Activations the int8 quantization keeps exactly: integers in -127..127 with ±127
 * in every 32-block, so every span's scale is 1 (fp16-exact) and q = x. Each level's
 * result is then the reference up to f32 rounding (1e-5 of Σ|w·x|), a far tighter
 * check than the quantization tolerance above: a kernel that mis-decodes a single
 * group of weights, or scales a block wrongly, is off by orders of magnitude more.
 * Every quantized type, T = 1, 3 and 9, 1 and 2 threads. */
static void test_exact_activations(void) {
    const int64_t n_in = 512, n_out = 37, Ts[] = {1, 3, 9};
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(g_types); ti++) {
        const uint32_t type = g_types[ti];
        if (!is_quant(type)) continue;
        for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
            const int64_t T = Ts[k];
            problem p;
            if (problem_make(&p, type, n_in, n_out, T) == 0) {
                for (int64_t i = 0; i < n_in * T; i++)
                    p.X[i] = i % 32 == (i / 32) % 32 ? ((i / 64) & 1 ? -127.0f : 127.0f)
                                                     : (float)((int)(rnd_u32() % 255) - 127);
                float *Y = malloc(sizeof(float) * (size_t)(n_out * T));
                for (int64_t t = 0; t < T; t++)
                    for (int64_t o = 0; o < n_out; o++) {
                        double s = 0, a = 0;
                        for (int64_t i = 0; i < n_in; i++) {
                            s += (double)p.Wf[o * n_in + i] * p.X[t * n_in + i];
                            a += fabs((double)p.Wf[o * n_in + i] * p.X[t * n_in + i]);
                        }
                        p.ref[t * n_out + o] = (float)s;
                        p.tol[t * n_out + o] = (float)(1e-5 * a + 1e-30);
                    }
                for (size_t li = 0; Y && li < LLC_ARRAY_LEN(g_levels); li++) {
                    if (g_levels[li] > cpu_matmul_max_level()) continue;
                    cpu_matmul_set_level(g_levels[li]);
                    for (int pi = 0; pi < 2; pi++) {
                        CHECK(cpu_matmul(pi ? g_pool2 : g_pool1, type, problem_w(&p), n_in, n_out, p.X, T, Y) == 0);
                        int bad = 0;
                        for (int64_t i = 0; i < n_out * T && bad < 3; i++)
                            if (!(fabs((double)Y[i] - p.ref[i]) <= p.tol[i])) {
                                bad++;
                                CHECKF(0, "%s %s T=%lld: Y[%lld] = %.9g, exact %.9g (tol %.3g)", cpu_simd_name(),
                                       qtype_name(type), (long long)T, (long long)i, Y[i], p.ref[i], p.tol[i]);
                            }
                    }
                }
                cpu_matmul_set_level(cpu_matmul_max_level());
                free(Y);
            }
            problem_free(&p);
        }
    }
}

/* Larger shapes that exercise the blocked GEMM's tiling: many panels, several
 * chunks of K, and T above one row group. */
static void test_large(void) {
    const struct { uint32_t type; int64_t n_in, n_out, T; } cases[] = {
        {QT_Q8_0, 2048, 100, 40}, {QT_Q4_K, 2304, 70, 29}, {QT_Q6_K, 1536, 50, 13},
        {QT_F16, 1100, 90, 26},   {QT_Q4_0, 1120, 33, 3},  {QT_F32, 600, 40, 64},
        {QT_BF16, 520, 35, 15},   {QT_Q8_0, 2080, 40, 100}, {QT_F16, 1040, 50, 100},
        {QT_Q6_K, 2560, 20, 50},  {QT_Q4_0, 4096 + 32, 17, 9}, {QT_Q5_K, 2304, 45, 19},
        {QT_Q4_1, 2080, 35, 13},  {QT_Q5_0, 2112, 30, 9},  {QT_Q5_1, 1024, 40, 50},
        {QT_IQ4_NL, 2080, 40, 21}, {QT_IQ4_XS, 2560, 33, 17}, {QT_MXFP4, 2080, 20, 7},
        {QT_Q2_K, 2304, 37, 15},  {QT_Q3_K, 2560, 35, 13},
    };
    for (size_t c = 0; c < LLC_ARRAY_LEN(cases); c++) {
        problem p;
        if (problem_make(&p, cases[c].type, cases[c].n_in, cases[c].n_out, cases[c].T) == 0) {
            for (size_t li = 0; li < LLC_ARRAY_LEN(g_levels); li++) {
                if (g_levels[li] > cpu_matmul_max_level()) continue;
                cpu_matmul_set_level(g_levels[li]);
                problem_check(&p, g_pool2, "large");
            }
            cpu_matmul_set_level(cpu_matmul_max_level());
        }
        problem_free(&p);
    }
}

/* One shape of test_iq_gemm_exact, at every level, one thread and two. */
static void iq_gemm_exact_case(uint32_t type, int64_t n_in, int64_t n_out, int64_t T) {
    problem p;
    float *Yb = malloc(sizeof(float) * (size_t)(n_out * T));
    float *Y1 = malloc(sizeof(float) * (size_t)n_out);
    if (!Yb || !Y1 || problem_make(&p, type, n_in, n_out, T)) {
        CHECK(0);
        free(Yb), free(Y1);
        return;
    }
    for (size_t li = 1; li < LLC_ARRAY_LEN(g_levels); li++) {
        if (g_levels[li] > cpu_matmul_max_level()) continue;
        cpu_matmul_set_level(g_levels[li]);
        problem_check(&p, g_pool2, "iq gemm");
        for (int np = 1; np <= 2; np++) {
            cpu_pool *pool = np == 1 ? g_pool1 : g_pool2;
            CHECK(cpu_matmul(pool, type, problem_w(&p), n_in, n_out, p.X, T, Yb) == 0);
            int bad = 0;
            for (int64_t t = 0; t < T && !bad; t++) {
                CHECK(cpu_matmul(pool, type, problem_w(&p), n_in, n_out, p.X + t * n_in, 1, Y1) == 0);
                for (int64_t o = 0; o < n_out && !bad; o++)
                    if (memcmp(&Yb[t * n_out + o], &Y1[o], 4)) {
                        bad = 1;
                        CHECKF(0, "%s %s n_in=%lld n_out=%lld T=%lld threads=%d: row %lld o=%lld "
                               "batched %.9g vs single %.9g", cpu_simd_name(), qtype_name(type), (long long)n_in,
                               (long long)n_out, (long long)T, np, (long long)t, (long long)o, Yb[t * n_out + o],
                               Y1[o]);
                    }
            }
        }
    }
    cpu_matmul_set_level(cpu_matmul_max_level());
    problem_free(&p);
    free(Yb);
    free(Y1);
}

/* The i-quants' GEMM (AVX2, AVX-VNNI, AVX-512: T >= 4) builds the dot kernels' exact
 * integer lanes and does their float steps in the same order, so every row of a batch
 * equals the row alone (the dot kernel) bit for bit. Shapes around its tiles: odd and
 * even superblock counts (the superblock pairs and the two float accumulators), n_out
 * below and not a multiple of the weight-row tile, every remainder of the
 * activation-row tile (odd ones: the AVX-512 tile's row pairs) and several full tiles,
 * one thread and two; each against the reference too. Any wrong decoded level or
 * multiplier (the vector decoder against iq_unpack's) shows as a batched row that
 * differs from the dot kernel's. */
static void test_iq_gemm_exact(void) {
    static const uint32_t types[] = {QT_IQ2_XXS, QT_IQ2_XS, QT_IQ2_S, QT_IQ3_XXS, QT_IQ3_S, QT_IQ1_S, QT_IQ1_M};
    /* (n_out 133: one thread's chunks of 36 rows cross the 32-row sub-chunks; T 19: the T blocks) */
    const int64_t n_ins[] = {256, 512, 768}, n_outs[] = {1, 7, 37, 133}, Ts[] = {4, 5, 6, 7, 9, 19};
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(types); ti++) {
        for (size_t ii = 0; ii < LLC_ARRAY_LEN(n_ins); ii++)
            for (size_t oi = 0; oi < LLC_ARRAY_LEN(n_outs); oi++)
                for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++)
                    iq_gemm_exact_case(types[ti], n_ins[ii], n_outs[oi], Ts[k]);
        /* long rows (n_in 8192: 32 superblocks, ~20 KB unpacked): fewer rows per sub-chunk */
        iq_gemm_exact_case(types[ti], 8192, 133, 9);
    }
}

/* A row computed inside a batch (T > 1: the GEMM path where a level has one) and the
 * same row computed alone (T = 1: the one-row path) must agree to float rounding:
 * both use the same int8-quantized activations, so only the order of the f32 sums
 * around the exact integer block sums may differ. Tolerance: 1e-5 of the row's max |y|
 * plus a tiny absolute epsilon — far below the quantization error the reference test
 * allows, so a scale, min or offset handled differently by one path shows up. Where
 * one kernel serves both the results must be identical bit for bit: one dot kernel
 * (the scalar level, and the types without a GEMM at the AVX2 or AVX-512 level), the
 * i-quants' GEMM (it builds their dot kernel's exact lanes: see test_iq_gemm_exact), or
 * a GEMM over weights packed ahead (AVX-512: Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q6_K, IQ4_XS;
 * AVX2: Q8_0; not IQ4_NL, whose panels keep its unpacked arithmetic at each T):
 * every row count reads the panels, as the CPU backend's calls do. */
static void test_batch_vs_single(void) {
    const int64_t Ts[] = {3, 13, 61};
    const int64_t n_ins_32[] = {64, 128, 256, 512}, n_ins_256[] = {256, 512};
    const int64_t n_outs[] = {64, 128, 160, 512};
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(g_types); ti++) {
        const uint32_t type = g_types[ti];
        const int64_t blk = qtype_get(type)->block_elems;
        const int64_t *n_ins = blk == 256 ? n_ins_256 : n_ins_32;
        const size_t n_n_ins = blk == 256 ? LLC_ARRAY_LEN(n_ins_256) : LLC_ARRAY_LEN(n_ins_32);
        for (size_t ii = 0; ii < n_n_ins; ii++)
            for (size_t oi = 0; oi < LLC_ARRAY_LEN(n_outs); oi++)
                for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
                    const int64_t n_in = n_ins[ii], n_out = n_outs[oi], T = Ts[k];
                    problem p;
                    float *Yb = malloc(sizeof(float) * (size_t)(n_out * T));
                    float *Y1 = malloc(sizeof(float) * (size_t)n_out);
                    if (Yb && Y1 && problem_make(&p, type, n_in, n_out, T) == 0) {
                        /* each level unpacked, then with its own packed weights */
                        for (size_t v = 0; v < 2 * LLC_ARRAY_LEN(g_levels); v++) {
                            const size_t li = v / 2;
                            const int packed = (int)(v % 2);
                            if (g_levels[li] > cpu_matmul_max_level()) continue;
                            if (packed && !packs_ahead(g_levels[li], type)) continue;
                            cpu_matmul_set_level(g_levels[li]);
                            cpu_packed_w pk = {0};
                            if (packed) CHECK(cpu_matmul_prepack(g_pool2, type, problem_w(&p), n_in, n_out, &pk) == 0);
                            const cpu_packed_w *use = packed ? &pk : NULL;
                            CHECK(cpu_matmul_packed(g_pool2, type, problem_w(&p), use, n_in, n_out, p.X, T, Yb) == 0);
                            int bad = 0;
                            for (int64_t t = 0; t < T && !bad; t++) {
                                CHECK(cpu_matmul_packed(g_pool2, type, problem_w(&p), use, n_in, n_out,
                                                        p.X + t * n_in, 1, Y1) == 0);
                                double amax = 0;
                                for (int64_t o = 0; o < n_out; o++) amax = fmax(amax, fabs(Y1[o]));
                                /* scalar (and NEON) compute every pair the same way at
                                 * any T: bit for bit; so do AVX2 and AVX-512 for the types
                                 * and row counts without a GEMM at that level (the dot
                                 * kernels, AVX2's Q4_K/Q5_K two rows at a time among
                                 * them) and with packed weights (the GEMM at every T);
                                 * an unpacked GEMM may round differently from its
                                 * one-row path */
                                const int gemm = (g_levels[li] == CPU_SIMD_AVX2 && has_avx2_gemm(type) &&
                                                  T >= avx2_gemm_min_rows(type)) ||
                                                 (g_levels[li] == CPU_SIMD_AVX512 && has_avx512_gemm(type));
                                /* (IQ4_NL's panels give what the unpacked calls do:
                                 * test_iq4_nl_packed_same) */
                                const int exact = !gemm || (packed && type != QT_IQ4_NL);
                                const double tol = exact ? 0 : 1e-5 * amax + 1e-7;
                                for (int64_t o = 0; o < n_out && !bad; o++) {
                                    const double d = fabs((double)Yb[t * n_out + o] - (double)Y1[o]);
                                    if (!(d <= tol) || (exact && memcmp(&Yb[t * n_out + o], &Y1[o], 4))) {
                                        bad = 1;
                                        CHECKF(0, "%s %s%s n_in=%lld n_out=%lld T=%lld: row %lld o=%lld "
                                               "batched %.7g vs single %.7g (diff %.3g, row max %.3g)",
                                               cpu_simd_name(), qtype_name(type), packed ? " packed" : "", (long long)n_in,
                                               (long long)n_out, (long long)T, (long long)t,
                                               (long long)o, Yb[t * n_out + o], Y1[o], d, amax);
                                    }
                                }
                            }
                            cpu_packed_w_free(&pk);
                        }
                        cpu_matmul_set_level(cpu_matmul_max_level());
                        problem_free(&p);
                    } else if (Yb && Y1) {
                        problem_free(&p);
                    }
                    free(Yb);
                    free(Y1);
                }
    }
}

/* Float weights (matmul_avx2_float.c): the row loop computes every output in one
 * order at any T — in blocks of 65536 activation floats — so a row inside a batch
 * equals the row alone bit for bit, and 1 and 2 threads agree, at the AVX2 level and
 * at the AVX-512 level (which borrows the loop for F32, and for BF16 without
 * AVX512_BF16). On shapes with
 * every remainder: n_in not a multiple of 8 (a tail of single products), n_in below
 * 8 (all tail), n_out not a multiple of the 3-row tiles, T not a multiple of the
 * 4-row tiles, over several blocks of activation rows (1100 × 70: 56 + 14; 520 × 131:
 * 124 + 7; 5632 × 31: 8 + 8 + 8 + 7). The same holds, and each output is checked
 * against the reference, for the AVX-512 level's own kernels: F16's 6 × 4 tiles
 * (matmul_avx512_f16.c: a masked tail of every length 1..15 — 1043 ends in 3, 15 is
 * all tail —, chunks ending in 1..5 weight rows, T not a multiple of 4) and BF16's
 * vdpbf16ps 4 × 6 tiles. */
static void test_float_row_loop_exact(void) {
    const uint32_t types[] = {QT_F32, QT_F16, QT_BF16};
    const struct { int64_t n_in, n_out, T; } shapes[] = {
        {1100, 50, 70}, {520, 31, 131}, {1100, 50, 8}, {300, 29, 5}, {5, 7, 9}, {264, 4, 2}, {5632, 7, 31},
        {1043, 27, 13}, {15, 16, 6}, {2048, 33, 9},
    };
    const cpu_simd_level levels[] = {CPU_SIMD_AVX2, CPU_SIMD_AVX512};
    for (size_t li = 0; li < LLC_ARRAY_LEN(levels); li++) {
        if (cpu_matmul_max_level() < levels[li]) continue;
        cpu_matmul_set_level(levels[li]);
        for (size_t ti = 0; ti < LLC_ARRAY_LEN(types); ti++)
            for (size_t si = 0; si < LLC_ARRAY_LEN(shapes); si++) {
                const int64_t n_in = shapes[si].n_in, n_out = shapes[si].n_out, T = shapes[si].T;
                problem p;
                float *Yb = malloc(sizeof(float) * (size_t)(n_out * T)), *Y1 = malloc(sizeof(float) * (size_t)(n_out * T));
                if (Yb && Y1 && problem_make(&p, types[ti], n_in, n_out, T) == 0) {
                    problem_check(&p, g_pool2, "float row loop");
                    CHECK(cpu_matmul(g_pool2, types[ti], problem_w(&p), n_in, n_out, p.X, T, Yb) == 0);
                    for (int64_t t = 0; t < T; t++)
                        CHECK(cpu_matmul(g_pool1, types[ti], problem_w(&p), n_in, n_out, p.X + t * n_in, 1,
                                         Y1 + t * n_out) == 0);
                    CHECKF(memcmp(Yb, Y1, sizeof(float) * (size_t)(n_out * T)) == 0,
                           "%s %s n_in=%lld n_out=%lld T=%lld: batched (2 threads) != one row at a time (1 thread)",
                           cpu_simd_name(), qtype_name(types[ti]), (long long)n_in, (long long)n_out, (long long)T);
                }
                if (Yb && Y1) problem_free(&p);
                free(Yb);
                free(Y1);
            }
    }
    cpu_matmul_set_level(cpu_matmul_max_level());
}

/* each output is computed by exactly one thread in a fixed order: 1 and 2 threads
 * (and no pool at all) agree bit for bit, at every SIMD level */
static void test_threads_bitwise(void) {
    const int64_t Ts[] = {1, 5, 40};
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(g_types); ti++) {
        for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
            const uint32_t type = g_types[ti];
            const int64_t n_in = 768, n_out = 131, T = Ts[k];
            problem p;
            if (problem_make(&p, type, n_in, n_out, T) != 0) {
                problem_free(&p);
                continue;
            }
            const size_t ny = (size_t)(n_out * T);
            float *y1 = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
            float *y0 = malloc(ny * sizeof(float));
            /* every level: each has its own GEMMs and chunking */
            for (size_t li = 0; y1 && y2 && y0 && li < LLC_ARRAY_LEN(g_levels); li++) {
                if (g_levels[li] > cpu_matmul_max_level()) continue;
                cpu_matmul_set_level(g_levels[li]);
                for (size_t i = 0; i < ny; i++) y0[i] = y1[i] = y2[i] = NAN;
                CHECK(cpu_matmul(g_pool1, type, problem_w(&p), n_in, n_out, p.X, T, y1) == 0);
                CHECK(cpu_matmul(g_pool2, type, problem_w(&p), n_in, n_out, p.X, T, y2) == 0);
                CHECK(cpu_matmul(NULL, type, problem_w(&p), n_in, n_out, p.X, T, y0) == 0);
                CHECKF(memcmp(y1, y2, ny * sizeof(float)) == 0, "%s %s T=%lld: 1 vs 2 threads differ",
                       cpu_simd_name(), qtype_name(type), (long long)T);
                CHECKF(memcmp(y1, y0, ny * sizeof(float)) == 0, "%s %s T=%lld: pool vs none differ",
                       cpu_simd_name(), qtype_name(type), (long long)T);
            }
            cpu_matmul_set_level(cpu_matmul_max_level());
            free(y0);
            free(y1);
            free(y2);
            problem_free(&p);
        }
    }
}

/* The AVX2 level's GEMM with AVX-VNNI (vpdpbusd; IQ4_NL, IQ4_XS and MXFP4 then keep
 * their nibbles and add level + 128 from -128·Σq) gives the same bits as without it
 * (maddubs; the level types widened to int16): the integer block sums are exact and
 * the float operations around them the same. T = 9 and 40 (the GEMM, one group and
 * several), n_in above one K-slice; T = 1 and 3 the dot kernels, where the types of
 * matmul_avx2.c's vnni_dot_type take vpdpbusd too. Skipped where the CPU has no
 * AVX-VNNI. */
static void test_avx_vnni_same(void) {
    if (cpu_matmul_max_level() < CPU_SIMD_AVX2 || !mm_avx_vnni) {
        printf("     (no AVX-VNNI: skipped)\n");
        return;
    }
    const uint32_t types[] = {QT_IQ4_NL, QT_IQ4_XS, QT_MXFP4, QT_Q8_0, QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1,
                              QT_Q4_K,   QT_Q6_K,   QT_Q3_K,  QT_Q2_K};
    /* (1, 3: the dot kernels; vnni_dot_type's types take vpdpbusd there) */
    const int64_t Ts[] = {1, 3, 9, 40};
    cpu_matmul_set_level(CPU_SIMD_AVX2);
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(types); ti++)
        for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
            const uint32_t type = types[ti];
            const int64_t n_in = 2560, n_out = 43, T = Ts[k];
            problem p;
            const size_t ny = (size_t)(n_out * T);
            float *yv = malloc(ny * sizeof(float)), *yn = malloc(ny * sizeof(float));
            if (problem_make(&p, type, n_in, n_out, T) == 0 && yv && yn) {
                CHECK(cpu_matmul(g_pool2, type, problem_w(&p), n_in, n_out, p.X, T, yv) == 0);
                mm_avx_vnni = 0;
                CHECK(cpu_matmul(g_pool2, type, problem_w(&p), n_in, n_out, p.X, T, yn) == 0);
                mm_avx_vnni = 1;
                CHECKF(memcmp(yv, yn, ny * sizeof(float)) == 0, "avx2 %s T=%lld: AVX-VNNI and maddubs differ",
                       qtype_name(type), (long long)T);
            }
            free(yv);
            free(yn);
            problem_free(&p);
        }
    cpu_matmul_set_level(cpu_matmul_max_level());
}

/* IQ4_NL at the AVX2 level below its GEMM's rows: weight rows four at a time
 * (iq4_nl_rows_pairs) give each row's bits as the one-row kernel does. n_out = 7 on one
 * thread: rows 0-3 go through the four-row kernel, rows 4-6 (copies of rows 0-2)
 * alone, so Y[4 + i] must equal Y[i]; with and without AVX-VNNI (level + 128 less
 * 128·Σq, or the sign trick). Shapes: one block, an odd count (the last block alone),
 * more than one slice of activations (5632: 88 pairs). */
static void test_iq4_nl_rows4_same(void) {
    if (cpu_matmul_max_level() < CPU_SIMD_AVX2) return;
    const int64_t n_ins[] = {32, 96, 2080, 5632}, Ts[] = {1, 2, 5};
    const int vnni = mm_avx_vnni;
    cpu_matmul_set_level(CPU_SIMD_AVX2);
    for (int v = vnni; v >= 0; v--) {
        mm_avx_vnni = v;
        for (size_t ii = 0; ii < LLC_ARRAY_LEN(n_ins); ii++)
            for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
                const int64_t n_in = n_ins[ii], n_out = 7, T = Ts[k];
                const size_t rb = qtype_row_bytes(QT_IQ4_NL, n_in);
                problem p;
                const int made = problem_make(&p, QT_IQ4_NL, n_in, n_out, T) == 0;
                float *y = malloc((size_t)(n_out * T) * sizeof(float));
                CHECK(made && y);
                if (made && y) {
                    memcpy(p.W + 1 + 4 * rb, p.W + 1, 3 * rb);
                    CHECK(cpu_matmul(g_pool1, QT_IQ4_NL, problem_w(&p), n_in, n_out, p.X, T, y) == 0);
                    for (int64_t t = 0; t < T; t++)
                        for (int i = 0; i < 3; i++)
                            CHECKF(memcmp(&y[t * n_out + i], &y[t * n_out + 4 + i], 4) == 0,
                                   "IQ4_NL vnni=%d n_in=%lld T=%lld row %d: four at a time %.9g, alone %.9g", v,
                                   (long long)n_in, (long long)T, i, y[t * n_out + i], y[t * n_out + 4 + i]);
                }
                problem_free(&p);
                free(y);
            }
    }
    mm_avx_vnni = vnni;
    cpu_matmul_set_level(cpu_matmul_max_level());
}

static void test_errors(void) {
    float X[64] = {0}, Y[4] = {0};
    uint8_t W[1024] = {0};
    /* types we do not compute with, and ids that do not exist */
    CHECK(cpu_matmul(g_pool2, QT_Q8_1, W, 32, 1, X, 1, Y) == LLC_ERR_UNSUPPORTED);
    CHECK(cpu_matmul(g_pool2, QT_TQ1_0, W, 256, 1, X, 1, Y) == LLC_ERR_UNSUPPORTED);
    CHECK(cpu_matmul(g_pool2, QT_Q8_K, W, 256, 1, X, 1, Y) == LLC_ERR_UNSUPPORTED);
    CHECK(cpu_matmul(g_pool2, QT_I8, W, 32, 1, X, 1, Y) == LLC_ERR_UNSUPPORTED);
    CHECK(cpu_matmul(g_pool2, 4, W, 32, 1, X, 1, Y) == LLC_ERR_UNSUPPORTED);
    CHECK(cpu_matmul(g_pool2, 9999, W, 32, 1, X, 1, Y) == LLC_ERR_UNSUPPORTED);
    CHECK(cpu_matmul_ref(QT_Q8_1, W, 32, 1, X, 1, Y) == LLC_ERR_UNSUPPORTED);
    /* n_in not a multiple of the block */
    CHECK(cpu_matmul(g_pool2, QT_Q8_0, W, 48, 1, X, 1, Y) == LLC_ERR_RANGE);
    CHECK(cpu_matmul(g_pool2, QT_Q4_K, W, 32, 1, X, 1, Y) == LLC_ERR_RANGE);
    CHECK(cpu_matmul(g_pool2, QT_F32, W, 0, 1, X, 1, Y) == LLC_ERR_RANGE);
    /* empty shapes are fine and touch nothing */
    Y[0] = 42;
    CHECK(cpu_matmul(g_pool2, QT_F32, W, 16, 0, X, 1, Y) == 0);
    CHECK(cpu_matmul(g_pool2, QT_F32, W, 16, 1, X, 0, Y) == 0);
    CHECK(Y[0] == 42);
}

/* non-finite activations propagate instead of turning into garbage or UB */
static void test_nonfinite(void) {
    const uint32_t types[] = {QT_Q8_0, QT_Q4_K, QT_F16};
    for (size_t li = 0; li < LLC_ARRAY_LEN(g_levels); li++) {
        if (g_levels[li] > cpu_matmul_max_level()) continue;
        cpu_matmul_set_level(g_levels[li]);
        for (size_t k = 0; k < LLC_ARRAY_LEN(types); k++) {
            problem p;
            if (problem_make(&p, types[k], 256, 3, 2) == 0) {
                p.X[5] = NAN;           /* row 0 */
                p.X[256 + 40] = INFINITY; /* row 1 */
                float Y[6];
                CHECK(cpu_matmul(g_pool2, p.type, problem_w(&p), 256, 3, p.X, 2, Y) == 0);
                for (int i = 0; i < 6; i++)
                    CHECKF(!isfinite(Y[i]), "%s %s: Y[%d] = %g", cpu_simd_name(),
                           qtype_name(p.type), i, Y[i]);
            }
            problem_free(&p);
        }
    }
    cpu_matmul_set_level(cpu_matmul_max_level());
}

/* Copies `bytes` to the end of a fresh mapping whose next page is PROT_NONE: an
 * over-read past the data (a GGUF tensor may end exactly at the end of the mapped
 * file) faults instead of going unnoticed. */
typedef struct guarded {
    uint8_t *map;
    size_t map_bytes;
    void *data;
} guarded;

static int guarded_make(guarded *g, const void *src, size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t data_pages = (bytes + page - 1) / page;
    g->map_bytes = (data_pages + 1) * page;
    g->map = mmap(NULL, g->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->map == MAP_FAILED) return -1;
    if (mprotect(g->map + data_pages * page, page, PROT_NONE) != 0) return -1;
    g->data = g->map + data_pages * page - bytes;
    memcpy(g->data, src, bytes);
    return 0;
}

static void guarded_free(guarded *g) {
    if (g->map && g->map != MAP_FAILED) munmap(g->map, g->map_bytes);
}

static void test_guard_pages(void) {
    const int64_t Ts[] = {1, 5, 20};
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(g_types); ti++) {
        const uint32_t type = g_types[ti];
        const int64_t blk = qtype_get(type)->block_elems;
        const int64_t n_in = blk == 1 ? 1003 : blk == 32 ? 32 * 11 : 256 * 3, n_out = 37;
        for (size_t k = 0; k < LLC_ARRAY_LEN(Ts); k++) {
            const int64_t T = Ts[k];
            problem p;
            guarded gw = {0}, gx = {0};
            if (problem_make(&p, type, n_in, n_out, T) == 0 &&
                guarded_make(&gw, problem_w(&p), qtype_row_bytes(type, n_in) * (size_t)n_out) == 0 &&
                guarded_make(&gx, p.X, sizeof(float) * (size_t)(n_in * T)) == 0) {
                float *Y = malloc(sizeof(float) * (size_t)(n_out * T));
                for (size_t li = 0; Y && li < LLC_ARRAY_LEN(g_levels); li++) {
                    if (g_levels[li] > cpu_matmul_max_level()) continue;
                    cpu_matmul_set_level(g_levels[li]);
                    CHECK(cpu_matmul(g_pool2, type, gw.data, n_in, n_out, gx.data, T, Y) == 0);
                    for (int64_t i = 0; i < n_out * T; i++)
                        if (!(fabs((double)Y[i] - p.ref[i]) <= p.tol[i])) {
                            CHECKF(0, "%s %s T=%lld: Y[%lld] = %g, ref %g", cpu_simd_name(),
                                   qtype_name(type), (long long)T, (long long)i, Y[i], p.ref[i]);
                            break;
                        }
                }
                cpu_matmul_set_level(cpu_matmul_max_level());
                free(Y);
            }
            guarded_free(&gw);
            guarded_free(&gx);
            problem_free(&p);
        }
    }
}

static void test_levels(void) {
    const cpu_simd_level max = cpu_matmul_max_level();
    printf("     (SIMD levels available: up to %s)\n",
           (cpu_matmul_set_level(max), cpu_simd_name()));
    CHECK(cpu_matmul_set_level(CPU_SIMD_SCALAR) == CPU_SIMD_SCALAR);
    CHECK(strcmp(cpu_simd_name(), "scalar") == 0);
    CHECK(cpu_matmul_set_level(CPU_SIMD_AVX512) == max);
    CHECK(cpu_matmul_level() == max);
}

/* cpu_matmul_multi: several matrices against the same activations give, bit for
 * bit, what separate cpu_matmul_packed calls give, for mixes of types (one type
 * thrice, Q4_K_M's Q4_K + Q6_K, types whose quantized activations are the same
 * bytes, float types, float and quantized together, panels packed ahead for some
 * matrices only, an empty matrix), T = 1, 3 and 64, every level, with no pool,
 * one thread and two; every output is written (Y is poisoned first). */
typedef struct multi_mix {
    uint32_t types[4];
    int n;
    int pack_mask; /* matrices packed ahead (where the level packs) */
} multi_mix;

static void test_multi(void) {
    static const multi_mix mixes[] = {
        {{QT_Q8_0, QT_Q8_0, QT_Q8_0}, 3, 0},
        {{QT_Q8_0, QT_Q8_0, QT_Q8_0}, 3, 7},
        {{QT_Q4_K, QT_Q4_K, QT_Q6_K}, 3, 0},
        {{QT_Q4_K, QT_Q4_K, QT_Q6_K}, 3, 7},
        {{QT_Q4_0, QT_Q8_0, QT_Q4_1, QT_IQ4_NL}, 4, 1},
        {{QT_Q4_K, QT_Q5_K, QT_Q2_K, QT_Q3_K}, 4, 0},
        {{QT_F16, QT_F32, QT_BF16, QT_F16}, 4, 0},
        {{QT_F32, QT_Q8_0, QT_Q6_K, QT_Q8_0}, 4, 2},
        {{QT_Q4_K, QT_Q4_K}, 2, 1},
        {{QT_IQ4_XS, QT_Q5_0, QT_Q5_1}, 3, 0},
    };
    static const int64_t outs[4] = {67, 16, 33, 48};
    static const int64_t n_ins[2] = {256, 2048 + 256};
    static const int64_t Ts[3] = {1, 3, 64};
    cpu_pool *pools[3] = {NULL, g_pool1, g_pool2};
    for (size_t mi = 0; mi < LLC_ARRAY_LEN(mixes); mi++)
        for (int ni = 0; ni < 2; ni++) {
            const multi_mix *mx = &mixes[mi];
            const int64_t n_in = n_ins[ni], Tmax = 64;
            uint8_t *W[4];
            cpu_packed_w pk[4];
            cpu_matmul_w w[4];
            float *X = malloc(sizeof(float) * (size_t)(n_in * Tmax)), *row = malloc(sizeof(float) * (size_t)n_in);
            for (int64_t i = 0; i < n_in * Tmax; i++) X[i] = rnd_val();
            for (int k = 0; k < mx->n; k++) {
                /* the third matrix of the float mix is empty: it is skipped, the others done */
                const int64_t n_out = mi == 6 && k == 2 ? 0 : outs[k];
                const size_t rb = qtype_row_bytes(mx->types[k], n_in);
                W[k] = malloc(rb * (size_t)(n_out ? n_out : 1));
                for (int64_t o = 0; o < n_out; o++) {
                    for (int64_t i = 0; i < n_in; i++) row[i] = rnd_val() * 0.05f;
                    CHECK(quantize_row(mx->types[k], row, W[k] + (size_t)o * rb, n_in) == 0);
                }
                memset(&pk[k], 0, sizeof pk[k]);
                if (mx->pack_mask >> k & 1)
                    CHECK(cpu_matmul_prepack(g_pool2, mx->types[k], W[k], n_in, n_out, &pk[k]) == 0);
                w[k] = (cpu_matmul_w){.type = mx->types[k], .W = W[k], .packed = &pk[k], .n_in = n_in, .n_out = n_out};
            }
            for (size_t ti = 0; ti < LLC_ARRAY_LEN(Ts); ti++)
                for (size_t li = 0; li < LLC_ARRAY_LEN(g_levels); li++) {
                    if (g_levels[li] > cpu_matmul_max_level()) continue;
                    cpu_matmul_set_level(g_levels[li]);
                    const int64_t T = Ts[ti];
                    float *alone[4], *multi[4];
                    for (int k = 0; k < mx->n; k++) {
                        const size_t ny = (size_t)(w[k].n_out * T) + 1;
                        alone[k] = malloc(ny * sizeof(float));
                        multi[k] = malloc(ny * sizeof(float));
                        CHECK(cpu_matmul_packed(g_pool2, w[k].type, W[k], &pk[k], n_in, w[k].n_out, X, T, alone[k]) == 0);
                    }
                    for (size_t pi = 0; pi < LLC_ARRAY_LEN(pools); pi++) {
                        for (int k = 0; k < mx->n; k++)
                            for (int64_t i = 0; i < w[k].n_out * T; i++) multi[k][i] = NAN;
                        CHECK(cpu_matmul_multi(pools[pi], w, mx->n, X, T, multi) == 0);
                        for (int k = 0; k < mx->n; k++)
                            CHECKF(memcmp(alone[k], multi[k], sizeof(float) * (size_t)(w[k].n_out * T)) == 0,
                                   "mix %zu matrix %d (%s) n_in %lld T %lld level %s, %zu threads: multi differs from alone",
                                   mi, k, qtype_name(w[k].type), (long long)n_in, (long long)T, cpu_simd_name(), pi);
                    }
                    for (int k = 0; k < mx->n; k++) free(alone[k]), free(multi[k]);
                }
            cpu_matmul_set_level(cpu_matmul_max_level());
            for (int k = 0; k < mx->n; k++) free(W[k]), cpu_packed_w_free(&pk[k]);
            free(X);
            free(row);
        }
    /* refused before any work: differing widths, too many or too few matrices, a bad type */
    uint8_t Wb[4096] = {0};
    float Xb[512] = {0}, Yb[64], *Y[CPU_MATMUL_MULTI_MAX + 1];
    cpu_matmul_w w[CPU_MATMUL_MULTI_MAX + 1];
    for (int k = 0; k <= CPU_MATMUL_MULTI_MAX; k++) {
        w[k] = (cpu_matmul_w){.type = QT_Q8_0, .W = Wb, .n_in = 64, .n_out = 2};
        Y[k] = Yb;
    }
    CHECK(cpu_matmul_multi(g_pool2, w, CPU_MATMUL_MULTI_MAX + 1, Xb, 1, Y) == LLC_ERR_RANGE);
    CHECK(cpu_matmul_multi(g_pool2, w, -1, Xb, 1, Y) == LLC_ERR_RANGE);
    CHECK(cpu_matmul_multi(g_pool2, w, 0, Xb, 1, Y) == 0);
    w[1].n_in = 96;
    CHECK(cpu_matmul_multi(g_pool2, w, 2, Xb, 1, Y) == LLC_ERR_RANGE);
    w[1].n_in = 64;
    w[1].type = QT_Q8_1;
    CHECK(cpu_matmul_multi(g_pool2, w, 2, Xb, 1, Y) == LLC_ERR_UNSUPPORTED);
}

int main(void) {
    if (cpu_pool_create(1, &g_pool1) || cpu_pool_create(2, &g_pool2)) {
        fprintf(stderr, "pool creation failed\n");
        return 1;
    }
    RUN(test_levels);
    RUN(test_errors);
    RUN(test_against_reference);
    RUN(test_exact_activations);
    RUN(test_large);
    RUN(test_batch_vs_single);
    RUN(test_iq_gemm_exact);
    RUN(test_threads_bitwise);
    RUN(test_avx_vnni_same);
    RUN(test_iq4_nl_rows4_same);
    RUN(test_float_row_loop_exact);
    RUN(test_guard_pages);
    RUN(test_nonfinite);
    RUN(test_prepacked);
    RUN(test_iq4_nl_packed_same);
    RUN(test_multi);
    cpu_pool_free(g_pool1);
    cpu_pool_free(g_pool2);
    return t_summary();
}
