/* matmul_avx2_float.c — the AVX2 level's kernels for float weights (F32, F16, BF16):
 * one row loop ("dotf") for every T, with one arithmetic for every output.
 *
 * The order of the sums — the design decision. Every output y[t][o] = Σ_i w[o][i]·x[t][i]
 * is computed the same way whatever T, the chunking or the thread count: with
 * n8 = n_in rounded down to 8, lane j of one 8-float accumulator takes the FMAs of the
 * elements i ≡ j (mod 8), i < n8, in increasing i; the 8 lanes are then summed in a
 * fixed tree (hsum8f), and the last n_in - n8 products are added one by one. So a row
 * computed inside a batch equals the row computed alone bit for bit (what the engine's
 * parallel samples and speculative decoding rely on at this level). One accumulator
 * per output is what makes that cheap: a tile holds one register per (weight row,
 * activation row) pair, and the loop gets its independent FMA chains from several
 * weight rows at once instead of from several accumulators per row.
 *
 * Vectors run along K (as in llamafile's tinyBLAS): a 3 × 4 tile (3 weight rows × 4
 * activation rows) keeps 12 accumulators and per 8 elements loads 3 weight and 4
 * activation vectors for 12 FMAs — 16 ymm registers in all; T = 1 uses 4 × 1 tiles.
 * Weight rows are read in place, converted by F16C `_mm256_cvtph_ps` (BF16: a shift;
 * both exact) as they are loaded; each row prefetches a whole number of tiles ahead
 * (>= PF_DIST bytes), i.e. the next tile's rows.
 *
 * BF16 weights: the activations are rounded to bf16 (to nearest even, NaN kept), as
 * ggml rounds them (BF16's vec_dot_type) and as every level does (the scalar one and
 * matmul_avx512_bf16.c's vdpbf16ps), so the products are exact and only the order of
 * the sums differs between levels. Few rows round as they load; batches round the
 * rows once into the packed activations (mm_avx2_dotf_pack_x, f32) and read those.
 *
 * Batches: the activation rows are taken in blocks of at most DOTF_MAX_X floats
 * (256 KB: in L2 even on the 512 KB-L2 Zen 2/3 parts) and each block passes every
 * weight tile of the chunk while that tile's rows sit in L1. This replaced a blocked
 * GEMM (weights converted to f32 into an L1 buffer, activations packed per K-slice,
 * accumulators carried between slices): on a Zen 4 at 2 threads, TinyLlama shapes,
 * the row loop over 256 KB blocks gave 105 tokens/s from matmuls at T = 128 against
 * the GEMM's 74 (F16; BF16 94 vs 74, F32 79 vs 69), and scaled 1.97x from one thread
 * to two where the GEMM scaled 1.6x. Compiled for AVX2 + FMA + F16C by a target
 * pragma; only called after cpuid says so. */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>

#include "kernels/cpu/matmul_avx2_float.h"

#define MM_AI static inline __attribute__((always_inline))

enum {
    BATCH_MIN_T = 8,    /* from this batch size on, chunks in multiples of 3 rows (mm_impl.gemm) */
    DOTF_MAX_X = 65536, /* activation floats per block of rows (256 KB) */
    PF_DIST = 4096,     /* bytes ahead to prefetch, at least */
    PACK_ROWS = 16,     /* BF16: activation rows rounded per packing group */
};

/* ---- the one arithmetic ------------------------------------------------------------ */

MM_AI float hsum8f(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 weights from p (the element's address), as f32 */
MM_AI __m256 load_w8(const uint32_t type, const uint8_t *p) {
    if (type == QT_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    if (type == QT_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_loadu_ps((const float *)(const void *)p);
}

/* 8 activations rounded to bf16 (nearest even; a NaN stays), kept as f32: what
 * f32_to_bf16 then bf16_to_f32 give */
MM_AI __m256 x_bf16_round8(__m256 x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd),
                                       _mm256_set1_epi32((int)0xffff0000u));
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static float w_at(uint32_t type, const uint8_t *row, int64_t i) {
    if (type == QT_F16) return _cvtsh_ss(mm_rd16(row + 2 * i));
    if (type == QT_BF16) return bf16_to_f32(mm_rd16(row + 2 * i));
    float v;
    memcpy(&v, row + 4 * i, 4);
    return v;
}

/* An output's end: the lanes summed, then the products past n8 one by one. */
MM_AI float finish(uint32_t type, __m256 acc, const uint8_t *wrow, const float *x, int64_t n8, int64_t n,
                   const int round) {
    float s = hsum8f(acc);
    for (int64_t i = n8; i < n; i++) s += w_at(type, wrow, i) * (round ? bf16_to_f32(f32_to_bf16(x[i])) : x[i]);
    return s;
}

/* One step of 8 elements for an R × C tile: acc[r][c] += w_r · x_c. The operands
 * used least often are loaded first, so at most min(R, C) + 1 + R·C registers live. */
#define TILE_STEP(R, C, LOADW, LOADX)                                                  \
    do {                                                                               \
        if ((R) <= (C)) {                                                              \
            __m256 wv_[4];                                                             \
            _Pragma("GCC unroll 4") for (int r_ = 0; r_ < (R); r_++) wv_[r_] = LOADW(r_); \
            _Pragma("GCC unroll 4") for (int c_ = 0; c_ < (C); c_++) {                 \
                const __m256 xv_ = LOADX(c_);                                          \
                _Pragma("GCC unroll 4") for (int r_ = 0; r_ < (R); r_++)               \
                    acc[r_][c_] = _mm256_fmadd_ps(wv_[r_], xv_, acc[r_][c_]);         \
            }                                                                          \
        } else {                                                                       \
            __m256 xv_[4];                                                             \
            _Pragma("GCC unroll 4") for (int c_ = 0; c_ < (C); c_++) xv_[c_] = LOADX(c_); \
            _Pragma("GCC unroll 4") for (int r_ = 0; r_ < (R); r_++) {                 \
                const __m256 wv_ = LOADW(r_);                                          \
                _Pragma("GCC unroll 4") for (int c_ = 0; c_ < (C); c_++)               \
                    acc[r_][c_] = _mm256_fmadd_ps(wv_, xv_[c_], acc[r_][c_]);         \
            }                                                                          \
        }                                                                              \
    } while (0)

/* ---- dotf: weights read in place ------------------------------------------------------ */

/* Y for weight rows o..o+R-1 × activation rows t..t+C-1 over the whole of K, the
 * activation rows read from X (n_in apart), rounded to bf16 as loaded if `round`. */
MM_AI void kern_direct(const uint32_t type, const mm_args *a, const float *X, const int round, int64_t o, int64_t t,
                       const int R, const int C) {
    const int64_t esz = type == QT_F32 ? 4 : 2, n = a->n_in, n8 = n & ~(int64_t)7;
    const uint8_t *w[4];
    const float *x[4];
    __m256 acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
        w[r] = a->W + (size_t)(o + r) * a->w_stride;
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) x[c] = X + (t + c) * n;
#define LW(r) load_w8(type, w[r] + esz * kk)
#define LX(c) (round ? x_bf16_round8(_mm256_loadu_ps(x[c] + kk)) : _mm256_loadu_ps(x[c] + kk))
    /* each row prefetches the same place a whole number of tiles on (R rows apart),
     * at least PF_DIST bytes ahead: PF_DIST on in a row would land in the rows this
     * tile reads already, leaving the next tile's rows unfetched */
    const size_t tile_bytes = a->w_stride * (size_t)R, pf = tile_bytes * ((PF_DIST + tile_bytes - 1) / tile_bytes);
    int64_t k = 0;
    for (; k + 32 <= n8; k += 32) {
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
            _mm_prefetch((const char *)w[r] + esz * k + pf, _MM_HINT_T1);
            if (esz == 4) _mm_prefetch((const char *)w[r] + esz * k + pf + 64, _MM_HINT_T1);
        }
        _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
            const int64_t kk = k + 8 * u;
            TILE_STEP(R, C, LW, LX);
        }
    }
    for (; k < n8; k += 8) {
        const int64_t kk = k;
        TILE_STEP(R, C, LW, LX);
    }
#undef LW
#undef LX
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            a->Y[(t + c) * a->n_out + o + r] = finish(type, acc[r][c], w[r], x[c], n8, n, round);
}

/* An R-row tile against activation rows t.. t+3, fewer where only `left` remain
 * (each width its own constant-shaped kernel). */
MM_AI void kern_rows_up_to_4(const uint32_t type, const mm_args *a, const float *X, const int round, int64_t o,
                             int64_t t, const int R, int64_t left) {
    switch (left) {
    case 1: kern_direct(type, a, X, round, o, t, R, 1); break;
    case 2: kern_direct(type, a, X, round, o, t, R, 2); break;
    case 3: kern_direct(type, a, X, round, o, t, R, 3); break;
    default: kern_direct(type, a, X, round, o, t, R, 4); break;
    }
}

MM_AI void dotf_rows_t(const uint32_t type, const mm_args *a, const float *X, const int round, int64_t o0,
                       int64_t o1, int64_t t0, int64_t t1) {
    /* start the stream: the kernels prefetch from a tile's rows on (see kern_direct) */
    const size_t lead = a->w_stride * 4 > PF_DIST ? a->w_stride * 4 : PF_DIST;
    if (o1 > o0)
        for (size_t l = 0; l < lead && l < (size_t)(o1 - o0) * a->w_stride; l += 64)
            _mm_prefetch((const char *)a->W + (size_t)o0 * a->w_stride + l, _MM_HINT_T1);
    if (t1 - t0 == 1) {
        int64_t o = o0;
        for (; o + 4 <= o1; o += 4) kern_direct(type, a, X, round, o, t0, 4, 1);
        for (; o < o1; o++) kern_direct(type, a, X, round, o, t0, 1, 1);
        return;
    }
    /* 3 × 4 tiles (then single rows); a tile's weight rows stay in cache while the
     * activation rows pass */
    int64_t o = o0;
    for (; o + 3 <= o1; o += 3)
        for (int64_t t = t0; t < t1; t += 4) kern_rows_up_to_4(type, a, X, round, o, t, 3, t1 - t);
    for (; o < o1; o++)
        for (int64_t t = t0; t < t1; t += 4) kern_rows_up_to_4(type, a, X, round, o, t, 1, t1 - t);
}

/* activation rows t0..t1-1 of X; BF16's rounded as loaded unless X holds them
 * rounded already (`rounded`) */
static void dotf_block(const mm_args *a, const float *X, int rounded, int64_t o0, int64_t o1, int64_t t0,
                       int64_t t1) {
    switch (a->type) {
    case QT_F16: dotf_rows_t(QT_F16, a, X, 0, o0, o1, t0, t1); break;
    case QT_BF16:
        if (rounded) dotf_rows_t(QT_BF16, a, X, 0, o0, o1, t0, t1);
        else dotf_rows_t(QT_BF16, a, X, 1, o0, o1, t0, t1);
        break;
    default: dotf_rows_t(QT_F32, a, X, 0, o0, o1, t0, t1); break;
    }
}

/* the activation rows in blocks of at most DOTF_MAX_X floats, each passing every
 * weight tile while the tile's rows sit in L1 */
static void dotf_blocks(const mm_args *a, const float *X, int rounded, int64_t o0, int64_t o1, int64_t t0,
                        int64_t t1) {
    int64_t tb = DOTF_MAX_X / a->n_in;
    tb = tb < 4 ? 4 : tb & ~(int64_t)3; /* whole 4-row tiles */
    for (int64_t t = t0; t < t1; t += tb) dotf_block(a, X, rounded, o0, o1, t, t + tb < t1 ? t + tb : t1);
}

void mm_avx2_dotf_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    dotf_blocks(a, a->X, 0, o0, o1, t0, t1);
}

/* ---- batches: the row loop over blocks of activation rows ------------------------- */

int mm_avx2_dotf_batch_rows(int64_t T) { return T >= BATCH_MIN_T ? 3 : 0; }

/* BF16's activations rounded once, in groups of PACK_ROWS rows; the others read X */
int64_t mm_avx2_dotf_groups(uint32_t type, int64_t T) { return type == QT_BF16 ? (T + PACK_ROWS - 1) / PACK_ROWS : 1; }

void mm_avx2_dotf_group(uint32_t type, int64_t T, int64_t g, int64_t *t0, int64_t *t1) {
    if (type != QT_BF16) {
        *t0 = 0, *t1 = T;
        return;
    }
    *t0 = g * PACK_ROWS;
    *t1 = *t0 + PACK_ROWS < T ? *t0 + PACK_ROWS : T;
}

size_t mm_avx2_dotf_xp_bytes(uint32_t type, int64_t n_in, int64_t T) {
    return type == QT_BF16 ? (size_t)(n_in * T) * sizeof(float) : 0;
}

void mm_avx2_dotf_pack_x(const mm_args *a, int64_t g, uint8_t *xp) {
    if (a->type != QT_BF16) return;
    const int64_t n = a->n_in, n8 = n & ~(int64_t)7;
    int64_t t0, t1;
    mm_avx2_dotf_group(a->type, a->T, g, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const float *x = a->X + t * n;
        float *dst = (float *)(void *)xp + t * n;
        int64_t i = 0;
        for (; i < n8; i += 8) _mm256_storeu_ps(dst + i, x_bf16_round8(_mm256_loadu_ps(x + i)));
        for (; i < n; i++) dst[i] = bf16_to_f32(f32_to_bf16(x[i]));
    }
}

void mm_avx2_dotf_batch(const mm_args *a, int64_t o0, int64_t o1) {
    if (a->type == QT_BF16 && a->xp) dotf_blocks(a, (const float *)(const void *)a->xp, 1, o0, o1, 0, a->T);
    else dotf_blocks(a, a->X, 0, o0, o1, 0, a->T);
}

#pragma GCC pop_options

#endif
