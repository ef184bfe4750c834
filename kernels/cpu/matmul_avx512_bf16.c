/* matmul_avx512_bf16.c — BF16 weights at the AVX-512 level on CPUs with AVX512_BF16
 * (mm_avx512_bf16): vdpbf16ps products of the weights, read in place, with the
 * activations rounded to bf16, accumulated in f32.
 *
 * Numerics. Every level rounds the activations to bf16 (round to nearest even) for
 * BF16 weights, as ggml does (its BF16 vec_dot_type): the products w·x are then exact
 * in f32, and only the order of the f32 sums differs between levels. Here one output
 * has one zmm accumulator; lane j takes, per 32 elements, the pair (2j, 2j+1) in one
 * vdpbf16ps, in increasing K; a tail below 32 is a masked step with zeros past n_in;
 * the 16 lanes are then summed by _mm512_reduce_add_ps. That order depends on n_in
 * alone, so a row inside a batch equals the row alone bit for bit.
 *
 * Two ways in, one arithmetic:
 *  - few rows (dot_rows: decode, T < BATCH_MIN_T): the f32 activations are rounded as
 *    they are loaded (vcvtne2ps2bf16), 6 weight rows × up to 4 activation rows;
 *  - batches (the planner's GEMM path): the activation rows are rounded once into
 *    a packed buffer of 4-row panels (rows of n_in rounded up to 32, zero-padded,
 *    each step's 64 bytes of the 4 rows side by side; packed in groups of PACK_ROWS
 *    rows on all threads), then 6 × 4 register tiles (24 accumulators; 6 weight rows
 *    × 4 activation rows, the activations held: 4 loads per 24 vdpbf16ps) pass over
 *    blocks of activation rows (X_BLOCK_BYTES, in L2) while a tile's weight rows sit
 *    in L1; K longer than K_SPAN_MAX goes in equal spans, each x tile's accumulators
 *    carried unsummed from span to span, so the weight rows of a span stay in L1
 *    (n_in 5632: 3 spans of 1888). A full tile's 24 sums are made by shuffles across
 *    accumulators that repeat _mm512_reduce_add_ps's additions exactly (sums16).
 *    The prefetch walk is matmul_avx512_tiles.h's, shared with matmul_avx512_f16.c.
 *    Where the time went and what each step bought: docs/PERFORMANCE.md, "BF16
 *    prompts at AVX-512: panels, spans, summed across" (2026-11-29).
 * Compiled for AVX-512 + AVX512_BF16 by a target pragma; only called after cpuid
 * says so (mm_avx512_bf16). */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")

#include <immintrin.h>

#include "kernels/cpu/matmul_avx512_bf16.h"
#include "kernels/cpu/matmul_avx512_tiles.h"

#define MM_AI static inline __attribute__((always_inline))

enum {
    BATCH_MIN_T = 8,       /* from this batch size on, the packed batch path */
    TILE_W = 6,            /* weight rows per tile */
    TILE_X_FEW = 4,        /* activation rows per tile, rounded as loaded */
    TILE_X = 4,            /* activation rows per tile, packed */
    PACK_ROWS = 16,        /* activation rows per packing group */
    K_SPAN_MAX = 2048,     /* elements of K per span, at most (measured: 1024 was slower) */
    SPAN_X_TILES = 32,     /* x tiles per block, at most, when K takes several spans */
    X_BLOCK_BYTES = 1 << 19, /* packed activation rows per block: half a 1 MiB L2
                              * (256 KiB before: 64 rows at n_in 2048, ~8% slower) */
};

static int64_t k_padded(int64_t n) { return (n + 31) & ~(int64_t)31; }

/* ---- the one arithmetic ------------------------------------------------------------ */

/* 32 activations from f32 x[k..], rounded to bf16; lanes at or past `left` are 0 */
MM_AI __m512bh x_round32(const float *x, int64_t left) {
    if (left >= 32) return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
    const __m512 lo = _mm512_maskz_loadu_ps(left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1), x);
    const __m512 hi = left > 16 ? _mm512_maskz_loadu_ps((__mmask16)((1u << (left - 16)) - 1), x + 16)
                                : _mm512_setzero_ps();
    return _mm512_cvtne2ps_pbh(hi, lo);
}

/* 32 weights from p; lanes at or past `left` are 0 */
MM_AI __m512bh w_load32(const uint8_t *p, int64_t left) {
    if (left >= 32) return (__m512bh)_mm512_loadu_si512(p);
    return (__m512bh)_mm512_maskz_loadu_epi16((__mmask32)((1ull << left) - 1), p);
}

/* The packed activations are panels of TILE_X rows: for each step of 32 elements,
 * the panel's rows' 64 bytes one after the other, so a tile reads one contiguous
 * stream (TILE_X rows apart, the rows would be TILE_X streams, 4 KiB apart at
 * n_in = 2048, all in one L1 set with the weight rows; measured in a synthetic
 * 6 × 4 loop at n_in = 2048, 96 weight rows × 128 activation rows: ~77% → ~92% of
 * the vdpbf16ps peak). Rows t.. of a panel start at xp + t·kpad (t a multiple of
 * TILE_X); a last panel of fewer rows leaves the others' places unwritten, unread. */
MM_AI size_t panel_at(int64_t k, int c) { return (size_t)k * TILE_X + (size_t)c * 32; }

MM_AI __m512bh panel_load(const uint16_t *panel, int64_t k, int c) {
    return (__m512bh)_mm512_loadu_si512(panel + panel_at(k, c));
}

/* One step of 32 elements for an R × C tile; the C activation vectors come from
 * LOADX(c), loaded first and held, then each weight vector is loaded once and used
 * for every activation row (R·C accumulators + C + 1 registers). */
#define TILE_STEP(R, C, left, LOADX)                                                       \
    do {                                                                                   \
        __m512bh xv_[TILE_X];                                                              \
        _Pragma("GCC unroll 4") for (int c_ = 0; c_ < (C); c_++) xv_[c_] = LOADX(c_);      \
        _Pragma("GCC unroll 6") for (int r_ = 0; r_ < (R); r_++) {                          \
            const __m512bh wv_ = w_load32(w[r_] + 2 * k, left);                            \
            _Pragma("GCC unroll 4") for (int c_ = 0; c_ < (C); c_++)                       \
                acc[r_][c_] = _mm512_dpbf16_ps(acc[r_][c_], wv_, xv_[c_]);                \
        }                                                                                  \
    } while (0)

/* ---- the lanes' sums, several accumulators at once --------------------------------
 * _mm512_reduce_add_ps(v) adds v's halves (lanes i and i+8), then the quarters of
 * that (i, i+4), then i and i+2, then 0 and 1. The steps below make exactly those
 * additions for many accumulators at once, each step pairing two vectors' halves by
 * a shuffle, so every sum is the same float as _mm512_reduce_add_ps's, for fewer
 * shuffles and adds (16 sums: 15 adds + 30 shuffles instead of 64 + 64). */

/* [a's i + (i+8) | b's i + (i+8)], i < 8 */
MM_AI __m512 halves_add(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
}

/* from two vectors of [p | q] (8 each): 128-bit lanes p's i + (i+4), q's, r's, s's */
MM_AI __m512 quarters_add(__m512 pq, __m512 rs) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(pq, rs, 0x88), _mm512_shuffle_f32x4(pq, rs, 0xdd));
}

/* per 128-bit lane of 4: [a's 0+2, a's 1+3, b's 0+2, b's 1+3] */
MM_AI __m512 pairs_add(__m512 a, __m512 b) {
    return _mm512_add_ps((__m512)_mm512_unpacklo_pd((__m512d)a, (__m512d)b),
                         (__m512)_mm512_unpackhi_pd((__m512d)a, (__m512d)b));
}

/* per 128-bit lane: [a's 0+1, a's 2+3, b's 0+1, b's 2+3] */
MM_AI __m512 last_add(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd));
}

/* The sums of v[0..15]: the sum of v[4j + l] in lane l's place j (lane l: 128 bits) */
MM_AI __m512 sums16(const __m512 *v) {
    const __m512 u0 = quarters_add(halves_add(v[0], v[1]), halves_add(v[2], v[3]));
    const __m512 u1 = quarters_add(halves_add(v[4], v[5]), halves_add(v[6], v[7]));
    const __m512 u2 = quarters_add(halves_add(v[8], v[9]), halves_add(v[10], v[11]));
    const __m512 u3 = quarters_add(halves_add(v[12], v[13]), halves_add(v[14], v[15]));
    return last_add(pairs_add(u0, u1), pairs_add(u2, u3));
}

/* The sums of v[0..7]: those of v[l] and v[4 + l] in lane l's places 0 and 1 */
MM_AI __m512 sums8(const __m512 *v) {
    const __m512 u0 = quarters_add(halves_add(v[0], v[1]), halves_add(v[2], v[3]));
    const __m512 u1 = quarters_add(halves_add(v[4], v[5]), halves_add(v[6], v[7]));
    const __m512 p = pairs_add(u0, u1);
    return last_add(p, p);
}

/* A whole 6 × 4 tile's sums into y (weight row r, activation row c at y[c·ld + r]):
 * rows 0-3 of activation row c are lane c of sums16, rows 4-5 of sums8. */
MM_AI void store_sums_6x4(__m512 acc[TILE_W][TILE_X], float *y, int64_t ld) {
    const __m512 s03 = sums16(&acc[0][0]), s45 = sums8(&acc[4][0]);
    _mm_storeu_ps(y, _mm512_castps512_ps128(s03));
    _mm_storeu_ps(y + ld, _mm512_extractf32x4_ps(s03, 1));
    _mm_storeu_ps(y + 2 * ld, _mm512_extractf32x4_ps(s03, 2));
    _mm_storeu_ps(y + 3 * ld, _mm512_extractf32x4_ps(s03, 3));
    _mm_storel_pi((__m64 *)(void *)(y + 4), _mm512_castps512_ps128(s45));
    _mm_storel_pi((__m64 *)(void *)(y + ld + 4), _mm512_extractf32x4_ps(s45, 1));
    _mm_storel_pi((__m64 *)(void *)(y + 2 * ld + 4), _mm512_extractf32x4_ps(s45, 2));
    _mm_storel_pi((__m64 *)(void *)(y + 3 * ld + 4), _mm512_extractf32x4_ps(s45, 3));
}

/* A stretch of K for a tile: elements k0..k1-1 (k0 a multiple of 32; k1 too, or
 * n_in). A tile over several spans carries its R·C accumulators from one to the next
 * in `part` (as they are, not summed: the same arithmetic as one span over all K). */
typedef struct k_span {
    int64_t k0, k1;
    __m512 *part; /* TILE_W × TILE_X accumulators between spans; unused if first && last */
    int first, last;
} k_span;

/* Y for weight rows o..o+R-1 × activation rows t..t+C-1 over the span s of K: from
 * the packed bf16 panels xp (kpad apart) when `packed`, else from a->X, rounded. */
MM_AI void kern(const mm_args *a, const uint16_t *xp, int64_t kpad, const int packed, int64_t o, int64_t t,
                const int R, const int C, const k_span *s) {
    const int64_t n = a->n_in;
    const uint8_t *w[TILE_W];
    const float *xf[TILE_X];
    __m512 acc[TILE_W][TILE_X];
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {
        w[r] = a->W + (size_t)(o + r) * a->w_stride;
        _Pragma("GCC unroll 6") for (int c = 0; c < C; c++)
            acc[r][c] = s->first ? _mm512_setzero_ps() : s->part[r * TILE_X + c];
    }
    _Pragma("GCC unroll 6") for (int c = 0; c < C; c++) xf[c] = a->X + (t + c) * n;
    const uint16_t *panel = packed ? xp + t * kpad : NULL; /* t is a whole number of panels in */
    const size_t pf = mm512_pf_ahead(a, R);
#define LX(c) (packed ? panel_load(panel, k, c) : x_round32(xf[c] + k, 32))
#define LX_TAIL(c) (packed ? panel_load(panel, k, c) : x_round32(xf[c] + k, n - k))
    int64_t k = s->k0;
    for (; k + 32 <= s->k1; k += 32) {
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) _mm_prefetch((const char *)w[r] + 2 * k + pf, _MM_HINT_T1);
        TILE_STEP(R, C, 32, LX);
    }
    if (k < s->k1) TILE_STEP(R, C, s->k1 - k, LX_TAIL);
#undef LX
#undef LX_TAIL
    if (s->last && R == TILE_W && C == TILE_X) {
        store_sums_6x4(acc, a->Y + t * a->n_out + o, a->n_out);
        return;
    }
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 6") for (int c = 0; c < C; c++) {
            if (s->last) a->Y[(t + c) * a->n_out + o + r] = _mm512_reduce_add_ps(acc[r][c]);
            else s->part[r * TILE_X + c] = acc[r][c];
        }
}

/* An R-row tile against activation rows t.., `left` of them remaining: as many as
 * the tile takes (each width its own constant-shaped kernel); from a->X rounded as
 * loaded (xp NULL) or from the packed panels. */
MM_AI void kern_upto4(const mm_args *a, const uint16_t *xp, int64_t kpad, int64_t o, int64_t t, const int R,
                      int64_t left, const k_span *s) {
    const int packed = xp != NULL;
    switch (left) {
    case 1: kern(a, xp, kpad, packed, o, t, R, 1, s); break;
    case 2: kern(a, xp, kpad, packed, o, t, R, 2, s); break;
    case 3: kern(a, xp, kpad, packed, o, t, R, 3, s); break;
    default: kern(a, xp, kpad, packed, o, t, R, 4, s); break;
    }
}

/* ---- few rows: rounded as loaded ------------------------------------------------- */

void mm_avx512_bf16_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    mm512_prefetch_lead(a, o0, o1, TILE_W);
    const k_span all = {.k0 = 0, .k1 = a->n_in, .first = 1, .last = 1};
    int64_t o = o0;
    for (; o + TILE_W <= o1; o += TILE_W)
        for (int64_t t = t0; t < t1; t += TILE_X_FEW) kern_upto4(a, NULL, 0, o, t, TILE_W, t1 - t, &all);
    for (; o < o1; o++)
        for (int64_t t = t0; t < t1; t += TILE_X_FEW) kern_upto4(a, NULL, 0, o, t, 1, t1 - t, &all);
}

/* ---- batches: packed activations --------------------------------------------------- */

int mm_avx512_bf16_batch_rows(int64_t T) { return T >= BATCH_MIN_T ? TILE_W : 0; }

int64_t mm_avx512_bf16_groups(int64_t T) { return (T + PACK_ROWS - 1) / PACK_ROWS; }

void mm_avx512_bf16_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1) { mm512_group(T, g, PACK_ROWS, t0, t1); }

size_t mm_avx512_bf16_xp_bytes(int64_t n_in, int64_t T) {
    return (size_t)(k_padded(n_in) * ((T + TILE_X - 1) / TILE_X * TILE_X)) * 2;
}

void mm_avx512_bf16_pack_x(const mm_args *a, int64_t g, uint8_t *xp) {
    const int64_t n = a->n_in, kpad = k_padded(n);
    int64_t t0, t1;
    mm_avx512_bf16_group(a->T, g, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const float *x = a->X + t * n;
        uint16_t *panel = (uint16_t *)(void *)xp + (t - t % TILE_X) * kpad;
        for (int64_t k = 0; k < kpad; k += 32)
            _mm512_storeu_si512(panel + panel_at(k, (int)(t % TILE_X)), (__m512i)x_round32(x + k, n - k));
    }
}

/* Elements of K per span: the whole row up to K_SPAN_MAX, else equal spans (whole
 * steps) that keep a tile's weight rows in L1 (n_in 5632: 3 × 1888, 22 KiB). */
static int64_t span_elems(int64_t n) {
    const int64_t spans = (n + K_SPAN_MAX - 1) / K_SPAN_MAX;
    return (((n + spans - 1) / spans) + 31) & ~(int64_t)31;
}

/* One span for the tiles of activation rows t0..: each x tile its own accumulators. */
static inline k_span span_of(int64_t k0, int64_t kc, int64_t n, __m512 *part) {
    return (k_span){.k0 = k0, .k1 = k0 + kc < n ? k0 + kc : n, .part = part, .first = k0 == 0, .last = k0 + kc >= n};
}

/* R weight rows from o against activation rows t0..t1-1 (at most SPAN_X_TILES tiles
 * of them when K takes more than one span), span by span. */
MM_AI void batch_rows(const mm_args *a, const uint16_t *xp, int64_t kpad, int64_t o, int64_t t0, int64_t t1,
                      const int R, __m512 *part) {
    const int64_t n = a->n_in, kc = span_elems(n);
    for (int64_t k0 = 0; k0 < n; k0 += kc)
        for (int64_t t = t0; t < t1; t += TILE_X) {
            const k_span s = span_of(k0, kc, n, part + (t - t0) / TILE_X * (TILE_W * TILE_X));
            kern_upto4(a, xp, kpad, o, t, R, t1 - t, &s);
        }
}

static void batch_block(const mm_args *a, const uint16_t *xp, int64_t kpad, int64_t o0, int64_t o1, int64_t t0,
                        int64_t t1) {
    __m512 part[SPAN_X_TILES * TILE_W * TILE_X]; /* 48 KiB of the stack */
    int64_t o = o0;
    for (; o + TILE_W <= o1; o += TILE_W) batch_rows(a, xp, kpad, o, t0, t1, TILE_W, part);
    for (; o < o1; o++) batch_rows(a, xp, kpad, o, t0, t1, 1, part);
}

void mm_avx512_bf16_batch(const mm_args *a, int64_t o0, int64_t o1) {
    const int64_t kpad = k_padded(a->n_in);
    int64_t tb = mm512_block_rows((size_t)kpad * 2, TILE_X, X_BLOCK_BYTES);
    if (span_elems(a->n_in) < a->n_in && tb > SPAN_X_TILES * TILE_X) tb = SPAN_X_TILES * TILE_X;
    mm512_prefetch_lead(a, o0, o1, TILE_W);
    const uint16_t *xp = (const uint16_t *)(const void *)a->xp;
    for (int64_t t = 0; t < a->T; t += tb) batch_block(a, xp, kpad, o0, o1, t, t + tb < a->T ? t + tb : a->T);
}

#pragma GCC pop_options

#endif
