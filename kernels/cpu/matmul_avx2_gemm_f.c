/* matmul_avx2_gemm_f.c — the AVX2 level's kernels for float weights (F32, F16, BF16):
 * a row loop for T = 1 and small batches ("dotf") and a blocked GEMM for
 * prompt-sized batches ("gemmf"), with one arithmetic for every output.
 *
 * The order of the sums — the design decision. Every output y[t][o] = Σ_i w[o][i]·x[t][i]
 * is computed the same way by both kernels, whatever T, the chunking or the thread
 * count: with n8 = n_in rounded down to 8, lane j of one 8-float accumulator takes
 * the FMAs of the elements i ≡ j (mod 8), i < n8, in increasing i; the 8 lanes are
 * then summed in a fixed tree (hsum8f), and the last n_in - n8 products are added
 * one by one. So a row computed inside a batch equals the row computed alone bit
 * for bit (what the engine's parallel samples and speculative decoding rely on at
 * this level), and the GEMM needs no relaxation in the tests. One accumulator per
 * output is what makes that cheap: a GEMM tile holds one register per (weight row,
 * activation row) pair, and the row loop gets its independent FMA chains from
 * several weight rows at once instead of from several accumulators per row.
 *
 * Vectors run along K (as in llamafile's tinyBLAS), not along the activation rows as
 * in the AVX-512 GEMM (that order would differ from any one-row dot): a 3 × 4 tile
 * (3 weight rows × 4 activation rows) keeps 12 accumulators and per 8 elements loads
 * 3 weight and 4 activation vectors for 12 FMAs — 16 ymm registers in all.
 *
 * dotf: weight rows are read in place, converted by F16C `_mm256_cvtph_ps` (BF16: a
 * shift; both exact) as they are loaded; tiles of 4 rows × 1 (T = 1) or 3 × up to 4;
 * each row prefetches a whole number of tiles ahead (>= PF_DIST bytes), i.e. the
 * next tile's rows. It is also used for T >= GEMMF_MIN_T while all activations fit
 * in DOTF_MAX_X floats: they then stay in L2 while every weight tile passes, and
 * measured faster than the GEMM there (T = 8: 60-100 vs 40-50 GFLOP/s).
 *
 * gemmf: the activations are packed once per call into groups of GT rows, each cut
 * into K-slices of KC floats ([slice][row][KC], so a step reads one contiguous
 * stretch). A chunk of output rows is walked by steps of RB rows, then activation
 * groups, then K-slices; each step converts RB rows × one K-slice of weights to f32
 * into an L1-sized buffer (12 KB, converted once, read by every activation tile),
 * runs one call per 4-row activation tile over all its 3-row weight tiles, and
 * meanwhile prefetches the next step's weights into L2, spread over those calls. As
 * the accumulators must run on across K-slices unchanged, a tile's accumulators are
 * kept between slices in a per-thread state buffer (RB × GT × 8 floats) rather than
 * summed into Y; the last slice finishes them (hsum8f and the tail) into Y. Compiled
 * for AVX2 + FMA + F16C by a target pragma; only called after cpuid says so. */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>

#include "kernels/cpu/matmul_avx2_gemm_f.h"

#define MM_AI static inline __attribute__((always_inline))

enum {
    GT = 64,            /* activation rows per packed group */
    KC = 256,           /* K-slice (floats); also the row stride of the buffers */
    RB = 12,            /* weight rows converted per step */
    GEMMF_MIN_T = 8,    /* from this batch size on, the GEMM may be used... */
    DOTF_MAX_X = 65536, /* ...if the activations exceed this many floats (256 KB) */
    PF_DIST = 4096,     /* dotf: bytes ahead to prefetch, at least */
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

static float w_at(uint32_t type, const uint8_t *row, int64_t i) {
    if (type == QT_F16) return _cvtsh_ss(mm_rd16(row + 2 * i));
    if (type == QT_BF16) return bf16_to_f32(mm_rd16(row + 2 * i));
    float v;
    memcpy(&v, row + 4 * i, 4);
    return v;
}

/* An output's end: the lanes summed, then the products past n8 one by one. */
MM_AI float finish(uint32_t type, __m256 acc, const uint8_t *wrow, const float *x, int64_t n8, int64_t n) {
    float s = hsum8f(acc);
    for (int64_t i = n8; i < n; i++) s += w_at(type, wrow, i) * x[i];
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

/* Y for weight rows o..o+R-1 × activation rows t..t+C-1 over the whole of K. */
MM_AI void kern_direct(const uint32_t type, const mm_args *a, int64_t o, int64_t t, const int R, const int C) {
    const int64_t esz = type == QT_F32 ? 4 : 2, n = a->n_in, n8 = n & ~(int64_t)7;
    const uint8_t *w[4];
    const float *x[4];
    __m256 acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
        w[r] = a->W + (size_t)(o + r) * a->w_stride;
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) x[c] = a->X + (t + c) * n;
#define LW(r) load_w8(type, w[r] + esz * kk)
#define LX(c) _mm256_loadu_ps(x[c] + kk)
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
            a->Y[(t + c) * a->n_out + o + r] = finish(type, acc[r][c], w[r], x[c], n8, n);
}

MM_AI void dotf_rows_t(const uint32_t type, const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    /* start the stream: the kernels prefetch from a tile's rows on (see kern_direct) */
    const size_t lead = a->w_stride * 4 > PF_DIST ? a->w_stride * 4 : PF_DIST;
    if (o1 > o0)
        for (size_t l = 0; l < lead && l < (size_t)(o1 - o0) * a->w_stride; l += 64)
            _mm_prefetch((const char *)a->W + (size_t)o0 * a->w_stride + l, _MM_HINT_T1);
    if (t1 - t0 == 1) {
        int64_t o = o0;
        for (; o + 4 <= o1; o += 4) kern_direct(type, a, o, t0, 4, 1);
        for (; o < o1; o++) kern_direct(type, a, o, t0, 1, 1);
        return;
    }
    /* 3 × 4 tiles (then single rows); a tile's weight rows stay in cache while the
     * activation rows pass */
    int64_t o = o0;
    for (; o + 3 <= o1; o += 3)
        for (int64_t t = t0; t < t1; t += 4) {
            switch (t1 - t) {
            case 1: kern_direct(type, a, o, t, 3, 1); break;
            case 2: kern_direct(type, a, o, t, 3, 2); break;
            case 3: kern_direct(type, a, o, t, 3, 3); break;
            default: kern_direct(type, a, o, t, 3, 4); break;
            }
        }
    for (; o < o1; o++)
        for (int64_t t = t0; t < t1; t += 4) {
            switch (t1 - t) {
            case 1: kern_direct(type, a, o, t, 1, 1); break;
            case 2: kern_direct(type, a, o, t, 1, 2); break;
            case 3: kern_direct(type, a, o, t, 1, 3); break;
            default: kern_direct(type, a, o, t, 1, 4); break;
            }
        }
}

void mm_avx2_dotf_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    switch (a->type) {
    case QT_F16: dotf_rows_t(QT_F16, a, o0, o1, t0, t1); break;
    case QT_BF16: dotf_rows_t(QT_BF16, a, o0, o1, t0, t1); break;
    default: dotf_rows_t(QT_F32, a, o0, o1, t0, t1); break;
    }
}

/* ---- gemmf: packed activations ------------------------------------------------------- */

int mm_avx2_gemmf_rows(int64_t T) { return T >= GEMMF_MIN_T ? 3 : 0; }

int64_t mm_avx2_gemmf_groups(int64_t T) { return (T + GT - 1) / GT; }

void mm_avx2_gemmf_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1) {
    *t0 = g * GT;
    *t1 = *t0 + GT < T ? *t0 + GT : T;
}

static int64_t n_slices(int64_t n_in) { return ((n_in & ~(int64_t)7) + KC - 1) / KC; }

static size_t group_bytes(int64_t n_in) { return (size_t)n_slices(n_in) * GT * KC * 4; }

size_t mm_avx2_gemmf_xp_bytes(int64_t n_in, int64_t T) {
    return (size_t)mm_avx2_gemmf_groups(T) * group_bytes(n_in);
}

size_t mm_avx2_gemmf_scratch(int64_t n_in, int64_t rows) {
    (void)n_in;
    (void)rows;
    return ((size_t)RB * KC + (size_t)RB * GT * 8) * 4 + 64;
}

/* Group g's rows, elements [0, n8), as [slice][row][KC] (the rest of a short last
 * slice is not written, nor read). */
void mm_avx2_gemmf_pack_x(const mm_args *a, int64_t g, uint8_t *xp) {
    int64_t t0, t1;
    mm_avx2_gemmf_group(a->T, g, &t0, &t1);
    const int64_t n8 = a->n_in & ~(int64_t)7;
    float *dst = (float *)(void *)(xp + (size_t)g * group_bytes(a->n_in));
    for (int64_t s = 0; s * KC < n8; s++) {
        const int64_t k0 = s * KC, kc = n8 - k0 < KC ? n8 - k0 : KC;
        for (int64_t t = t0; t < t1; t++)
            memcpy(dst + (s * GT + (t - t0)) * KC, a->X + t * a->n_in + k0, (size_t)kc * 4);
    }
}

/* rows [r0, r0 + nr) × elements [k0, k0 + kc) of W → f32 rows KC apart */
MM_AI void convert_rows_t(const uint32_t type, const mm_args *a, int64_t r0, int64_t nr, int64_t k0, int64_t kc,
                          float *dst) {
    const int64_t esz = type == QT_F32 ? 4 : 2;
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *src = a->W + (size_t)(r0 + r) * a->w_stride + (size_t)(k0 * esz);
        float *d = dst + r * KC;
        for (int64_t k = 0; k < kc; k += 8) _mm256_store_ps(d + k, load_w8(type, src + esz * k));
    }
}

static void convert_rows(const mm_args *a, int64_t r0, int64_t nr, int64_t k0, int64_t kc, float *dst) {
    switch (a->type) {
    case QT_F16: convert_rows_t(QT_F16, a, r0, nr, k0, kc, dst); break;
    case QT_BF16: convert_rows_t(QT_BF16, a, r0, nr, k0, kc, dst); break;
    default: convert_rows_t(QT_F32, a, r0, nr, k0, kc, dst); break;
    }
}

/* The accumulators of weight rows o..o+R-1 (buffer pw, rows KC apart) × activation
 * rows t..t+C-1 (packed px, rows KC apart) run on over kc elements; st holds them
 * between slices (rows GT·8 floats apart, columns 8). On the first slice they start
 * at zero; after the last they are finished into Y. */
MM_AI void kern_gemm(const mm_args *a, const float *pw, const float *px, int64_t kc, float *st, int first,
                     int last, int64_t o, int64_t t, const int R, const int C) {
    __m256 acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            acc[r][c] = first ? _mm256_setzero_ps() : _mm256_load_ps(st + (r * GT + c) * 8);
#define LW(r) _mm256_load_ps(pw + (r) * KC + kk)
#define LX(c) _mm256_load_ps(px + (c) * KC + kk)
    for (int64_t kk = 0; kk < kc; kk += 8) TILE_STEP(R, C, LW, LX);
#undef LW
#undef LX
    if (!last) {
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
                _mm256_store_ps(st + (r * GT + c) * 8, acc[r][c]);
        return;
    }
    const int64_t n = a->n_in, n8 = n & ~(int64_t)7;
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            a->Y[(t + c) * a->n_out + o + r] =
                finish(a->type, acc[r][c], a->W + (size_t)(o + r) * a->w_stride, a->X + (t + c) * n, n8, n);
}

/* One activation tile (packed rows px, Y rows t..t+C-1, state column tl) against
 * the nr rows of the weight buffer: 3-row tiles, then the 1 or 2 rows left. One call
 * per activation tile keeps the per-call work (the calls, the switch) off the
 * 12-FMA loop. */
MM_AI void gemm_tile_t(const mm_args *a, const float *wbuf, const float *px, int64_t kc, float *state, int first,
                       int last, int64_t r0, int64_t nr, int64_t tl, int64_t t, const int C) {
    int64_t rt = 0;
    for (; rt + 3 <= nr; rt += 3)
        kern_gemm(a, wbuf + rt * KC, px, kc, state + (rt * GT + tl) * 8, first, last, r0 + rt, t, 3, C);
    if (nr - rt == 2)
        kern_gemm(a, wbuf + rt * KC, px, kc, state + (rt * GT + tl) * 8, first, last, r0 + rt, t, 2, C);
    else if (nr - rt == 1)
        kern_gemm(a, wbuf + rt * KC, px, kc, state + (rt * GT + tl) * 8, first, last, r0 + rt, t, 1, C);
}

static void gemm_tile(const mm_args *a, const float *wbuf, const float *px, int64_t kc, float *state, int first,
                      int last, int64_t r0, int64_t nr, int64_t tl, int64_t t, int C) {
    switch (C) {
    case 1: gemm_tile_t(a, wbuf, px, kc, state, first, last, r0, nr, tl, t, 1); break;
    case 2: gemm_tile_t(a, wbuf, px, kc, state, first, last, r0, nr, tl, t, 2); break;
    case 3: gemm_tile_t(a, wbuf, px, kc, state, first, last, r0, nr, tl, t, 3); break;
    default: gemm_tile_t(a, wbuf, px, kc, state, first, last, r0, nr, tl, t, 4); break;
    }
}

/* One step of the walk: weight rows [r0, r0 + nr) × elements [k0, k0 + kc). */
typedef struct fstep {
    int64_t r0, nr, k0, kc;
} fstep;

void mm_avx2_gemmf(const mm_args *a, int64_t o0, int64_t o1, int64_t n0, int64_t n1, void *scratch) {
    const int64_t n8 = a->n_in & ~(int64_t)7;
    if (n8 == 0 || a->T * a->n_in <= DOTF_MAX_X) { /* all tail, or few activations: the row loop */
        mm_avx2_dotf_rows(a, o0, o1, 0, a->T);
        return;
    }
    float *wbuf = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *state = wbuf + RB * KC;
    const int64_t T = a->T, ng = mm_avx2_gemmf_groups(T), ns = n_slices(a->n_in);
    const size_t esz = a->type == QT_F32 ? 4 : 2, gbytes = group_bytes(a->n_in);
    for (int64_t r0 = o0; r0 < o1; r0 += RB) {
        const int64_t nr = o1 - r0 < RB ? o1 - r0 : RB;
        for (int64_t g = 0; g < ng; g++) {
            int64_t t0, t1;
            mm_avx2_gemmf_group(T, g, &t0, &t1);
            const int64_t nt = t1 - t0;
            for (int64_t s = 0; s < ns; s++) {
                const int64_t k0 = s * KC, kc = n8 - k0 < KC ? n8 - k0 : KC;
                convert_rows(a, r0, nr, k0, kc, wbuf);
                /* the step after this one, whose weights are prefetched meanwhile */
                fstep nx = {0, 0, 0, 0};
                if (s + 1 < ns) nx = (fstep){r0, nr, k0 + KC, n8 - k0 - KC < KC ? n8 - k0 - KC : KC};
                else if (g + 1 < ng) nx = (fstep){r0, nr, 0, n8 < KC ? n8 : KC};
                else if (r0 + RB < o1) nx = (fstep){r0 + RB, o1 - r0 - RB < RB ? o1 - r0 - RB : RB, 0, n8 < KC ? n8 : KC};
                else if (n1 > n0) nx = (fstep){n0, n1 - n0 < RB ? n1 - n0 : RB, 0, n8 < KC ? n8 : KC};
                const int64_t lpr = ((int64_t)esz * nx.kc + 63) / 64, lines = nx.nr * lpr;
                const int64_t ncalls = (nt + 3) / 4;
                const float *pxs = (const float *)(const void *)(a->xp + (size_t)g * gbytes) + s * GT * KC;
                const int first = s == 0, last = s + 1 == ns;
                for (int64_t tc = 0, call = 0; tc < nt; tc += 4, call++) {
                    /* this call's share of the next step's lines */
                    for (int64_t l = lines * call / ncalls; l < lines * (call + 1) / ncalls; l++)
                        _mm_prefetch((const char *)a->W + (size_t)(nx.r0 + l / lpr) * a->w_stride +
                                         (size_t)nx.k0 * esz + (size_t)(l % lpr) * 64,
                                     _MM_HINT_T1);
                    gemm_tile(a, wbuf, pxs + tc * KC, kc, state, first, last, r0, nr, tc, t0 + tc,
                              nt - tc < 4 ? (int)(nt - tc) : 4);
                }
            }
        }
    }
}

#pragma GCC pop_options

#endif
