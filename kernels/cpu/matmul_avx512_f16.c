/* matmul_avx512_f16.c — F16 weights at the AVX-512 level (no AVX512-FP16 needed):
 * the weights read in place and widened by vcvtph2ps (exact), multiplied with the
 * f32 activations by f32 FMAs, 16 products per instruction.
 *
 * Numerics: one order per n_in, at every T. One output has one zmm accumulator;
 * lane j takes the products of the elements i ≡ j (mod 16) in increasing i, the last
 * n_in mod 16 of them in a masked step (zeros past n_in add nothing); the 16 lanes
 * are then summed by _mm512_reduce_add_ps. So a row computed inside a batch equals
 * the row alone bit for bit, and 1 and 2 threads agree. (The AVX2 level sums 8 lanes
 * and adds the tail one by one, so the two levels round differently; both are within
 * test_matmul's bound of the scalar reference.)
 *
 * One row loop for every T, the walk of matmul_avx512_bf16.c's (matmul_avx512_tiles.h):
 * 6 × 4 register tiles (6 weight rows × 4 activation rows: 24 accumulators, the 4
 * activation vectors held and one widened weight vector at a time, 29 of the 32
 * zmm) pass over blocks of activation rows that fit L2 while a tile's weight rows
 * stay near (L1/L2); the chunk's last rows take tiles of 1-5 rows. Per 16 elements a
 * tile does 6 conversions, 4 activation loads and 24 FMAs: the FMA ports set the
 * pace (vcvtph2ps issues beside them), and the activations, the operand streamed
 * from L2 for every tile, cost 4 loads per 24 FMAs. 6 × 4 beat 4 × 6 (whose 6 loads
 * per 24 come from L2) by ~15%, 5 × 5 by ~5%, 8 × 3 by ~15% (bench_matmul, 1 thread,
 * T = 128, alternated). The activations are f32 already: nothing is packed.
 * Compiled for AVX-512 by a target pragma; only called after cpuid says so. */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")

#include <immintrin.h>

#include "kernels/cpu/matmul_avx512_f16.h"
#include "kernels/cpu/matmul_avx512_tiles.h"

#define MM_AI static inline __attribute__((always_inline))

enum {
    BATCH_MIN_T = 8, /* from this batch size on, the planner's GEMM chunking */
    TILE_W = 6,      /* weight rows per tile */
    TILE_X = 4,      /* activation rows per tile */
};

/* ---- the one arithmetic ------------------------------------------------------------ */

/* 16 weights from p, widened to f32; lanes at or past `left` are 0 */
MM_AI __m512 w_load16(const uint8_t *p, int64_t left) {
    if (left >= 16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << left) - 1), p));
}

/* 16 activations from x; lanes at or past `left` are 0 */
MM_AI __m512 x_load16(const float *x, int64_t left) {
    if (left >= 16) return _mm512_loadu_ps(x);
    return _mm512_maskz_loadu_ps((__mmask16)((1u << left) - 1), x);
}

/* One step of 16 elements at k for an R × C tile: the C activation vectors loaded
 * first and held, then each weight vector widened once and used for every pair
 * (R·C accumulators + C + 1 registers). */
#define TILE_STEP(R, C, k, left)                                                           \
    do {                                                                                   \
        __m512 xv_[TILE_X];                                                                \
        _Pragma("GCC unroll 4") for (int c_ = 0; c_ < (C); c_++) xv_[c_] = x_load16(x[c_] + (k), left); \
        _Pragma("GCC unroll 6") for (int r_ = 0; r_ < (R); r_++) {                          \
            const __m512 wv_ = w_load16(w[r_] + 2 * (k), left);                            \
            _Pragma("GCC unroll 4") for (int c_ = 0; c_ < (C); c_++)                       \
                acc[r_][c_] = _mm512_fmadd_ps(wv_, xv_[c_], acc[r_][c_]);                 \
        }                                                                                  \
    } while (0)

/* Y for weight rows o..o+R-1 × activation rows t..t+C-1 over the whole of K. */
MM_AI void kern(const mm_args *a, int64_t o, int64_t t, const int R, const int C) {
    const int64_t n = a->n_in, n16 = n & ~(int64_t)15;
    const uint8_t *w[TILE_W];
    const float *x[TILE_X];
    __m512 acc[TILE_W][TILE_X];
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {
        w[r] = a->W + (size_t)(o + r) * a->w_stride;
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) x[c] = a->X + (t + c) * n;
    const size_t pf = mm512_pf_ahead(a, R);
    int64_t k = 0;
    for (; k + 32 <= n16; k += 32) { /* 64 bytes of each weight row: one prefetch */
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) _mm_prefetch((const char *)w[r] + 2 * k + pf, _MM_HINT_T1);
        TILE_STEP(R, C, k, 16);
        TILE_STEP(R, C, k + 16, 16);
    }
    if (k < n16) {
        TILE_STEP(R, C, k, 16);
        k += 16;
    }
    if (k < n) TILE_STEP(R, C, k, n - k);
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            a->Y[(t + c) * a->n_out + o + r] = _mm512_reduce_add_ps(acc[r][c]);
}

/* An R-row tile against activation rows t.., `left` of them remaining: as many as
 * the tile takes (each width its own constant-shaped kernel). */
MM_AI void kern_upto4(const mm_args *a, int64_t o, int64_t t, const int R, int64_t left) {
    switch (left) {
    case 1: kern(a, o, t, R, 1); break;
    case 2: kern(a, o, t, R, 2); break;
    case 3: kern(a, o, t, R, 3); break;
    default: kern(a, o, t, R, 4); break;
    }
}

/* weight rows o.. against activation rows t0..t1-1, `rows` of them (< TILE_W: the
 * chunk's last rows) */
static void rows_tail(const mm_args *a, int64_t o, int64_t rows, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t += TILE_X) switch (rows) {
        case 1: kern_upto4(a, o, t, 1, t1 - t); break;
        case 2: kern_upto4(a, o, t, 2, t1 - t); break;
        case 3: kern_upto4(a, o, t, 3, t1 - t); break;
        case 4: kern_upto4(a, o, t, 4, t1 - t); break;
        default: kern_upto4(a, o, t, 5, t1 - t); break;
        }
}

/* ---- the row loop ------------------------------------------------------------------ */

static void rows_block(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    int64_t o = o0;
    for (; o + TILE_W <= o1; o += TILE_W)
        for (int64_t t = t0; t < t1; t += TILE_X) kern_upto4(a, o, t, TILE_W, t1 - t);
    if (o < o1) rows_tail(a, o, o1 - o, t0, t1);
}

void mm_avx512_f16_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    const int64_t tb = mm512_block_rows((size_t)a->n_in * sizeof(float), TILE_X, MM512_X_BLOCK_BYTES);
    mm512_prefetch_lead(a, o0, o1, TILE_W);
    for (int64_t t = t0; t < t1; t += tb) rows_block(a, o0, o1, t, t + tb < t1 ? t + tb : t1);
}

int mm_avx512_f16_batch_rows(int64_t T) { return T >= BATCH_MIN_T ? TILE_W : 0; }

void mm_avx512_f16_batch(const mm_args *a, int64_t o0, int64_t o1) { mm_avx512_f16_rows(a, o0, o1, 0, a->T); }

#pragma GCC pop_options

#endif
