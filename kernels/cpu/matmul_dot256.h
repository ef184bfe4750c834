/* matmul_dot256.h — the 256-bit dot-product kernels of the x86 matmul levels:
 * activation quantization and one dot product per quantized weight type (a weight row in
 * place against one activation row), plus dot_rows_256 looping over a chunk (float
 * weights have their own row loop, matmul_avx2_float.c, at both levels).
 * A template, included by matmul_avx2.c and matmul_avx512.c under their own target
 * pragma, each first defining
 *   dot_u8s8(u, s)  Σ over 4-byte groups of u8 × s8 → 8 int32 lanes (maddubs+madd
 *                   on AVX2, vpdpbusd with AVX-512 VNNI); dot_u8s8_acc(acc, u, s)
 *                   the same added to acc;
 *   MM_DOT_Q4_K, MM_DOT_Q5_K, MM_DOT_Q6_K  the Q4_K / Q5_K / Q6_K row dot to use
 *                   (the AVX-512 file substitutes 512-bit versions).
 * Weight rows are prefetched MM_PF_DIST bytes ahead into L2, a distance chosen per
 * CPU at run time (mm_pf_dist, matmul.c): on the 2-core Xeon this was tuned on the
 * hardware prefetcher alone streamed at ~60% of a core's bandwidth and 4 KB ahead
 * beat 1-2 KB; on AMD Zen 4 the same 4 KB cut Q8_0 to half the speed of no
 * software prefetch at all. */
#ifndef LLC_CPU_MATMUL_DOT256_H
#define LLC_CPU_MATMUL_DOT256_H

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/iq_tables.h"


#ifndef MM_PF_DIST
#define MM_PF_DIST mm_pf_dist /* bytes ahead in a weight row to prefetch */
#endif
#ifndef MM_PF_HINT
#define MM_PF_HINT _MM_HINT_T1 /* into L2: more misses in flight than L1's fill buffers allow */
#endif

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum8i(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline float f16(const uint8_t *p) { return _cvtsh_ss(mm_rd16(p)); }

/* ---- activation quantization ---------------------------------------------------- */

/* (unused where the file is included for its dot kernels alone: matmul_avxvnni_dot.c) */
__attribute__((unused)) static void quantize_x_256(uint32_t type, const float *x, int64_t n, uint8_t *xq) {
    int8_t *q = (int8_t *)xq;
    float *d = (float *)(void *)(xq + n);
    int32_t *ai = (int32_t *)(void *)(xq + n + 4 * (n / 32));
    float *af = (float *)(void *)ai;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const mm_aux_kind kind = mm_aux_of(type);
    const int64_t span = mm_act_span(type);
    for (int64_t s0 = 0; s0 < n; s0 += span) {
        const int64_t len = n - s0 < span ? n - s0 : span;
        __m256 amax = _mm256_setzero_ps(), nanm = _mm256_setzero_ps();
        for (int64_t k = s0; k < s0 + len; k += 8) {
            const __m256 v = _mm256_loadu_ps(x + k);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v));
            nanm = _mm256_or_ps(nanm, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float db = _mm_cvtss_f32(m) / 127.0f;
        const float id = db > 0 ? 1.0f / db : 0.0f;
        const int nan = _mm256_movemask_ps(nanm) != 0;
        const __m256 vid = _mm256_set1_ps(id);
        for (int64_t b = s0 / MM_QB; b < (s0 + len) / MM_QB; b++) {
            const float *xb = x + b * MM_QB;
            int8_t *qb = q + b * MM_QB;
            int s0q, s1q;
            if (nan || isinf(db)) { /* non-finite span: NaN/inf·0 */
                memset(qb, 0, MM_QB);
                d[b] = nan ? NAN : db;
                s0q = s1q = 0;
            } else {
                __m256i i[4];
                for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * k), vid));
                s0q = hsum8i(_mm256_add_epi32(i[0], i[1]));
                s1q = hsum8i(_mm256_add_epi32(i[2], i[3]));
                __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]),
                                               _mm256_packs_epi32(i[2], i[3]));
                _mm256_storeu_si256((__m256i *)qb, _mm256_permutevar8x32_epi32(p, perm));
                d[b] = mm_act_scale(type, db);
            }
            mm_store_aux(kind, ai, af, b, d[b], s0q, s1q);
        }
    }
}

/* ---- quantized weights ------------------------------------------------------------ */


/* Q8_0: |w| × sign(x, w) keeps maddubs' unsigned operand in 0..128 (no saturation). */
static inline __m256 q8_0_block(const uint8_t *w, const mm_xrow *x, int64_t b, __m256 acc) {
    const __m256i qw = _mm256_loadu_si256((const __m256i *)(w + 2));
    const __m256i qx = _mm256_loadu_si256((const __m256i *)(x->q + 32 * b));
    const __m256i s = dot_u8s8(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(f16(w) * x->d[b]), acc);
}

static float dot_q8_0(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    const int64_t nb = n / QK8_0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, w += 2 * sizeof(block_q8_0)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        a0 = q8_0_block(w, x, b, a0);
        a1 = q8_0_block(w + sizeof(block_q8_0), x, b + 1, a1);
    }
    if (b < nb) a0 = q8_0_block(w, x, b, a0);
    return hsum8(_mm256_add_ps(a0, a1));
}

/* Q4_0: the nibbles u (0..15) straight into maddubs; -8·Σq from aux (= -Σq per lane). */
static inline __m256 q4_0_block(const uint8_t *w, const mm_xrow *x, int64_t b, __m256 acc) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(w + 2));
    const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
    const __m256i qx = _mm256_loadu_si256((const __m256i *)(x->q + 32 * b));
    const __m256i s = dot_u8s8_acc(_mm256_set1_epi32(x->ai[b] / 128), u, qx);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(f16(w) * x->d[b]), acc);
}

static float dot_q4_0(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    const int64_t nb = n / QK4_0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, w += 2 * sizeof(block_q4_0)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        a0 = q4_0_block(w, x, b, a0);
        a1 = q4_0_block(w + sizeof(block_q4_0), x, b + 1, a1);
    }
    if (b < nb) a0 = q4_0_block(w, x, b, a0);
    return hsum8(_mm256_add_ps(a0, a1));
}

/* ---- K-quants: one activation scale per superblock ----------------------------------
 * Against Q4_K, Q5_K and Q6_K weights the activations share one scale over each
 * 256-superblock (mm_act_span), so a superblock's products stay integer: byte
 * products with maddubs (u8 weight × s8 activation → int16 pairs), then madd with
 * the sub-block's integer scale (→ int32), summed over the superblock, converted and
 * scaled once. The bounds (per int32 lane and superblock): Q4_K 8·2·(2·15·127)·63
 * = 3.8M, Q5_K 8·2·(2·31·127)·63 = 7.9M, Q6_K 8·2·(2·63·127)·128 + its offsets
 * 2·(32·16·127)·128 = 49M, all far inside int32. */

/* The int16 scale of sub-block j (0-7) in every lane, from 8 int16 scales held in
 * both 128-bit halves. */
static inline __m256i k_scale16(__m256i sc16, int j) {
    return _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8))));
}

/* Bit j of every byte moved to bit 4 (other bits: garbage to be masked; no bit of a
 * neighbouring byte reaches bit 4). */
static inline __m256i bit_to_4(__m256i v, int j) {
    return j <= 4 ? _mm256_slli_epi16(v, 4 - j) : _mm256_srli_epi16(v, j - 4);
}

/* Q4_K / Q5_K: Σ over one superblock of u·q·sc (u the 4- or 5-bit values) in int32
 * lanes, for R activation rows (1 or 2) at once: the weights' values and scales are
 * decoded once, and each row gets the same integer operations as alone. qh is NULL
 * for Q4_K. */
static inline __attribute__((always_inline)) void q45k_superblock(const uint8_t *qs, const uint8_t *qh, const int8_t *const qx[2], const int R,
                                   __m256i sc16, __m256i si[2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i s0[2], s1[2];
    _Pragma("GCC unroll 2")
    for (int t = 0; t < R; t++) s0[t] = s1[t] = _mm256_setzero_si256();
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++) {
        const __m256i qw = _mm256_loadu_si256((const __m256i *)(qs + 32 * r));
        __m256i lo = _mm256_and_si256(qw, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qw, 4), m4);
        if (qh) { /* bit j of qh[l] is element l's fifth bit in sub-block j */
            lo = _mm256_or_si256(lo, _mm256_and_si256(bit_to_4(h, 2 * r), b4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(bit_to_4(h, 2 * r + 1), b4));
        }
        const __m256i k0 = k_scale16(sc16, 2 * r), k1 = k_scale16(sc16, 2 * r + 1);
        _Pragma("GCC unroll 2")
    for (int t = 0; t < R; t++) {
            const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(qx[t] + 64 * r)));
            const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(qx[t] + 64 * r + 32)));
            s0[t] = _mm256_add_epi32(s0[t], _mm256_madd_epi16(p0, k0));
            s1[t] = _mm256_add_epi32(s1[t], _mm256_madd_epi16(p1, k1));
        }
    }
    _Pragma("GCC unroll 2")
    for (int t = 0; t < R; t++) si[t] = _mm256_add_epi32(s0[t], s1[t]);
}

/* Q4_K / Q5_K rows: per superblock d·d_x·Σ u·q·sc minus the min term dmin·Σ m_j·(d_x·Σq_j),
 * for R activation rows (1 or 2) against one weight row, which is read once; each
 * row's floats are the same as alone. */
static inline __attribute__((always_inline)) void dot_q45_K_rows(const uint8_t *w, const mm_xrow *const x[2], const int R, int64_t n, int five,
                                  float y[2]) {
    const size_t bb = five ? sizeof(block_q5_K) : sizeof(block_q4_K);
    __m256 acc[2], macc[2];
    _Pragma("GCC unroll 2")
    for (int t = 0; t < R; t++) acc[t] = macc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, w += bb) {
        for (size_t l = 0; l < bb; l += 64) _mm_prefetch((const char *)w + MM_PF_DIST + l, MM_PF_HINT);
        const float d = f16(w), dmin = f16(w + 2);
        uint32_t sm[4];
        mm_q4k_scales_u32(w + 4, sm);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sm)));
        const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sm + 2))));
        const __m256 mnd = _mm256_mul_ps(mnf, _mm256_set1_ps(dmin));
        _Pragma("GCC unroll 2")
        for (int t = 0; t < R; t++) macc[t] = _mm256_fmadd_ps(mnd, _mm256_loadu_ps(x[t]->af + 8 * i), macc[t]);
        const int8_t *qx[2] = {x[0]->q + 256 * i, x[R - 1]->q + 256 * i};
        __m256i si[2];
        if (five) q45k_superblock(w + 48, w + 16, qx, R, sc16, si);
        else q45k_superblock(w + 16, NULL, qx, R, sc16, si);
        _Pragma("GCC unroll 2")
        for (int t = 0; t < R; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si[t]), _mm256_set1_ps(d * x[t]->d[8 * i]), acc[t]);
    }
    _Pragma("GCC unroll 2")
    for (int t = 0; t < R; t++) y[t] = hsum8(acc[t]) - hsum8(macc[t]);
}

static inline float dot_q45_K(const uint8_t *w, const mm_xrow *x, int64_t n, int five) {
    const mm_xrow *xs[2] = {x, x};
    float y[2];
    dot_q45_K_rows(w, xs, 1, n, five, y);
    return y[0];
}

#ifndef MM_DOT_Q4_K
#define MM_DOT_Q4_K dot_q4_K
static float dot_q4_K(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_q45_K(w, x, n, 0); }
#endif

#ifndef MM_DOT_Q6_K
#define MM_DOT_Q6_K dot_q6_K
#define MM_DOT256_Q6_K_ROWS /* dot_q6_K_rows below (the pairing in dot_rows_paired_256) */
/* Q6_K: u = 6-bit quant (0..63) into maddubs, madd with the 16-group's int8 scale;
 * the -32 offsets (aux per group) times the scales join the same integer sum. For R
 * activation rows (1 or 2) against one weight row: the 6-bit values are unpacked
 * once, each row gets the same operations as alone. */
static inline __attribute__((always_inline)) void dot_q6_K_rows(const uint8_t *w, const mm_xrow *const x[2],
                                                                const int R, int64_t n, float y[2]) {
    __m256 acc[2];
    _Pragma("GCC unroll 2")
    for (int t = 0; t < R; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q6_K)) {
        for (int l = 0; l < 4; l++) _mm_prefetch((const char *)w + MM_PF_DIST + 64 * l, MM_PF_HINT);
        const float d = f16(w + 208);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(w + 192));
        const __m256i sclo = _mm256_cvtepi8_epi32(sc8), schi = _mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8));
        __m256i si[2];
        _Pragma("GCC unroll 2")
        for (int t = 0; t < R; t++) {
            const int32_t *aux = x[t]->ai + 16 * i;
            si[t] = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)aux), sclo),
                                     _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(aux + 8)), schi));
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8); /* groups 0-7 | 8-15 */
        _Pragma("GCC unroll 2")
        for (int h = 0; h < 2; h++) {
            /* this half's 8 group scales in both 128-bit halves */
            const __m256i sch = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x00);
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h));
            const __m256i qa = _mm256_loadu_si256((const __m256i *)(w + 64 * h));
            const __m256i qb = _mm256_loadu_si256((const __m256i *)(w + 64 * h + 32));
            __m256i u[4];
            u[0] = _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            u[1] = _mm256_or_si256(_mm256_and_si256(qb, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), _mm256_and_si256(qh, m30));
            u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
            _Pragma("GCC unroll 4")
            for (int c = 0; c < 4; c++) {
                /* int16 lanes 0-7: group 2c of this half, lanes 8-15: group 2c+1 */
                const __m256i sel = _mm256_setr_m128i(_mm_set1_epi16((short)((4 * c) | ((4 * c + 1) << 8))),
                                                      _mm_set1_epi16((short)((4 * c + 2) | ((4 * c + 3) << 8))));
                const __m256i k = _mm256_shuffle_epi8(sch, sel);
                _Pragma("GCC unroll 2")
                for (int t = 0; t < R; t++) {
                    const int8_t *qx = x[t]->q + 256 * i;
                    const __m256i p =
                        _mm256_maddubs_epi16(u[c], _mm256_loadu_si256((const __m256i *)(qx + 128 * h + 32 * c)));
                    si[t] = _mm256_add_epi32(si[t], _mm256_madd_epi16(p, k));
                }
            }
        }
        _Pragma("GCC unroll 2")
        for (int t = 0; t < R; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si[t]), _mm256_set1_ps(d * x[t]->d[8 * i]), acc[t]);
    }
    _Pragma("GCC unroll 2")
    for (int t = 0; t < R; t++) y[t] = hsum8(acc[t]);
}

static float dot_q6_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    const mm_xrow *xs[2] = {x, x};
    float y[2];
    dot_q6_K_rows(w, xs, 1, n, y);
    return y[0];
}

#endif

/* ---- the other quantized types ------------------------------------------------------- */

/* 32 bits → 32 bytes, 0xff where the bit is set (byte i ↔ bit i). */
static inline __m256i bits_to_bytes(const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, 4);
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* 16 bytes of nibbles → 32 bytes: low nibbles (elements 0-15), then high (16-31). */
static inline __m256i nibbles32(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
}

/* Q4_1 / Q5_1 (with_min) and Q5_0: u (0..31) into the byte products; Q5_0's -16·Σq
 * from aux (ai/64 per lane, 8 lanes); the min terms m·(d_x·Σq) summed apart. */
static inline __m256 q45_block(const uint8_t *w, const mm_xrow *x, int64_t b, __m256 acc, int five,
                               int with_min, float *ms) {
    const int qs_off = (with_min ? 4 : 2) + (five ? 4 : 0);
    __m256i u = nibbles32(w + qs_off);
    if (five)
        u = _mm256_or_si256(u, _mm256_and_si256(bits_to_bytes(w + qs_off - 4), _mm256_set1_epi8(0x10)));
    const __m256i qx = _mm256_loadu_si256((const __m256i *)(x->q + 32 * b));
    const __m256i s = with_min ? dot_u8s8(u, qx) : dot_u8s8_acc(_mm256_set1_epi32(x->ai[b] / 64), u, qx);
    if (with_min) *ms += f16(w + 2) * x->af[b];
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(f16(w) * x->d[b]), acc);
}

static inline float dot_q45(const uint8_t *w, const mm_xrow *x, int64_t n, int five, int with_min) {
    const size_t bb = with_min ? (five ? sizeof(block_q5_1) : sizeof(block_q4_1)) : sizeof(block_q5_0);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    float m0 = 0, m1 = 0;
    const int64_t nb = n / 32;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, w += 2 * bb) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        a0 = q45_block(w, x, b, a0, five, with_min, &m0);
        a1 = q45_block(w + bb, x, b + 1, a1, five, with_min, &m1);
    }
    if (b < nb) a0 = q45_block(w, x, b, a0, five, with_min, &m0);
    return hsum8(_mm256_add_ps(a0, a1)) + (m0 + m1);
}

static float dot_q4_1(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_q45(w, x, n, 0, 1); }
static float dot_q5_0(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_q45(w, x, n, 1, 0); }
static float dot_q5_1(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_q45(w, x, n, 1, 1); }

/* IQ4_NL / IQ4_XS: the nibbles index the signed levels (a byte shuffle); |level| ×
 * sign(x, level) keeps the unsigned operand ≤ 127, so maddubs cannot saturate. */
static inline __m256i iq4_levels(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)iq4nl_values));
}
static inline __m256i mxfp4_levels(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)mxfp4_values));
}
static inline __m256i iq4_dot32(const uint8_t *qs, const int8_t *qx, __m256i lv) {
    const __m256i v = _mm256_shuffle_epi8(lv, nibbles32(qs));
    const __m256i q = _mm256_loadu_si256((const __m256i *)qx);
    return dot_u8s8(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
}

static float dot_iq4_nl(const uint8_t *w, const mm_xrow *x, int64_t n) {
    const __m256i lv = iq4_levels();
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    const int64_t nb = n / QK4_NL;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, w += 2 * sizeof(block_iq4_nl)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iq4_dot32(w + 2, x->q + 32 * b, lv)),
                             _mm256_set1_ps(f16(w) * x->d[b]), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iq4_dot32(w + 20, x->q + 32 * b + 32, lv)),
                             _mm256_set1_ps(f16(w + 18) * x->d[b + 1]), a1);
    }
    if (b < nb)
        a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iq4_dot32(w + 2, x->q + 32 * b, lv)),
                             _mm256_set1_ps(f16(w) * x->d[b]), a0);
    return hsum8(_mm256_add_ps(a0, a1));
}

#if defined(MM_DOT256_Q6_K_ROWS) && defined(MM_DOT256_U8_FULL) /* (AVX2 + AVX-VNNI: dot_rows_quant_256) */
/* IQ4_NL for decode, four weight rows (`stride` bytes apart) against one activation
 * row, giving each row dot_iq4_nl's bits: its blocks go by pairs b, b + 1 — a ymm of
 * a row holds the pair's 16 + 16 nibble bytes (low nibbles: elements 0-15 of b, then
 * of b + 1; high: 16-31), the activations laid out the same way — so a row's two
 * integer vectors hold dot_iq4_nl's exact lanes 0-3 and 4-7 of b | b + 1, and its
 * two accumulators lanes 0-3 and 4-7 of a0 | a1: every lane gets the same fma of the
 * same numbers, and a0, a1 are put back together for the same hsum8. The activation
 * pair is loaded once for the four rows, their eight scales converted and multiplied
 * by the activation scales in one go. dot_u8s8 is vpdpbusd here (MM_DOT256_U8_FULL,
 * matmul_avxvnni_dot.c: no saturation), so a lane sum is (level + 128)·q less 128·Σq;
 * with maddubs' sign trick four rows measured 0.9× of one, so that level keeps
 * dot_iq4_nl. */
typedef struct iq4_nl_xpair {
    __m256i lo, hi;         /* activation bytes 0-15 of b | of b + 1, and 16-31 */
    __m256i c_lo, c_hi; /* -128·Σq per lane of lo and hi (where the sums start) */
} iq4_nl_xpair;
typedef struct iq4_nl_acc {
    __m256 lo4, hi4; /* lanes 0-3 of dot_iq4_nl's a0 | of its a1, and lanes 4-7 */
} iq4_nl_acc;

static inline iq4_nl_xpair iq4_nl_x_of(__m256i lo, __m256i hi) {
    const __m256i k128 = _mm256_set1_epi8((char)0x80);
    const __m256i z = _mm256_setzero_si256();
    return (iq4_nl_xpair){lo, hi, _mm256_sub_epi32(z, dot_u8s8(k128, lo)), _mm256_sub_epi32(z, dot_u8s8(k128, hi))};
}
/* blocks b, b + 1 of the activations (only b where !two: zeros beside it) */
static inline iq4_nl_xpair iq4_nl_x_at(const int8_t *q, int two) {
    if (!two)
        return iq4_nl_x_of(_mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)q)),
                           _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(q + 16))));
    return iq4_nl_x_of(_mm256_loadu2_m128i((const __m128i *)(q + 32), (const __m128i *)q),
                       _mm256_loadu2_m128i((const __m128i *)(q + 48), (const __m128i *)(q + 16)));
}
/* the nibble bytes of a row's blocks b, b + 1 (only b where !two) */
static inline __m256i iq4_nl_nib_at(const uint8_t *wb, int two) {
    if (!two) return _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
    return _mm256_loadu2_m128i((const __m128i *)(wb + 2 + sizeof(block_iq4_nl)), (const __m128i *)(wb + 2));
}
/* the table the nibbles index: level + 128 (the top bit flipped) */
static inline __m256i iq4_nl_rows_table(void) { return _mm256_xor_si256(iq4_levels(), _mm256_set1_epi8((char)0x80)); }
static inline __m256i iq4_nl_lanes(__m256i v, __m256i q, __m256i neg_c128q) {
    return dot_u8s8_acc(neg_c128q, v, q); /* (one vpdpbusd: the sums start at -128·Σq) */
}
/* one row's pair: nib its nibble bytes, s its scales (b ×4 | b + 1 ×4) */
static inline __attribute__((always_inline)) iq4_nl_acc iq4_nl_row_pair(__m256i nib, const iq4_nl_xpair *x,
                                                                        __m256i lv, __m256 s, iq4_nl_acc acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i lo = _mm256_shuffle_epi8(lv, _mm256_and_si256(nib, m4));
    const __m256i hi = _mm256_shuffle_epi8(lv, _mm256_and_si256(_mm256_srli_epi16(nib, 4), m4));
    acc.lo4 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iq4_nl_lanes(lo, x->lo, x->c_lo)), s, acc.lo4);
    acc.hi4 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iq4_nl_lanes(hi, x->hi, x->c_hi)), s, acc.hi4);
    return acc;
}
/* the last block alone: into the low halves (dot_iq4_nl's a0), the high ones kept */
static inline __attribute__((always_inline)) iq4_nl_acc iq4_nl_row_last(__m256i nib, const iq4_nl_xpair *x,
                                                                        __m256i lv, __m256 s, iq4_nl_acc acc) {
    const iq4_nl_acc t = iq4_nl_row_pair(nib, x, lv, s, acc);
    return (iq4_nl_acc){_mm256_blend_ps(t.lo4, acc.lo4, 0xf0), _mm256_blend_ps(t.hi4, acc.hi4, 0xf0)};
}
static inline float iq4_nl_acc_sum(iq4_nl_acc acc) {
    const __m256 a0 = _mm256_permute2f128_ps(acc.lo4, acc.hi4, 0x20);
    const __m256 a1 = _mm256_permute2f128_ps(acc.lo4, acc.hi4, 0x31);
    return hsum8(_mm256_add_ps(a0, a1));
}
/* f16(w)·d_x of the four rows at blocks b, b + 1 (b only where !two):
 * [r0 r1 r2 r3 of b | of b + 1] */
static inline __attribute__((always_inline)) __m256 iq4_nl_scales4(const uint8_t *wb, size_t stride, int two, const float *dx) {
    const uint8_t *w1 = wb + sizeof(block_iq4_nl);
    __m128i h = _mm_cvtsi32_si128(mm_rd16(wb));
    h = _mm_insert_epi16(h, mm_rd16(wb + stride), 1);
    h = _mm_insert_epi16(h, mm_rd16(wb + 2 * stride), 2);
    h = _mm_insert_epi16(h, mm_rd16(wb + 3 * stride), 3);
    if (two) {
        h = _mm_insert_epi16(h, mm_rd16(w1), 4);
        h = _mm_insert_epi16(h, mm_rd16(w1 + stride), 5);
        h = _mm_insert_epi16(h, mm_rd16(w1 + 2 * stride), 6);
        h = _mm_insert_epi16(h, mm_rd16(w1 + 3 * stride), 7);
    }
    const __m256 d = _mm256_cvtph_ps(h);
    return _mm256_mul_ps(d, _mm256_set_m128(_mm_set1_ps(dx[two]), _mm_set1_ps(dx[0])));
}
/* row r's scales out of iq4_nl_scales4's */
#define IQ4_NL_S0(S) _mm256_permute_ps(S, 0x00)
#define IQ4_NL_S1(S) _mm256_permute_ps(S, 0x55)
#define IQ4_NL_S2(S) _mm256_permute_ps(S, 0xaa)
#define IQ4_NL_S3(S) _mm256_permute_ps(S, 0xff)

enum { IQ4_NL_SLICE_PAIRS = 32 }; /* activation pairs laid out at a time (4 KB) */

/* the activations of pairs p0 .. p0 + np - 1 laid out for iq4_nl_row_pair, once per
 * slice for all the rows (read from memory there: the 8 accumulators, the table and
 * the scales fill the registers) */
static void iq4_nl_x_slice(const mm_xrow *x, int64_t p0, int64_t np, iq4_nl_xpair *xs) {
    for (int64_t i = 0; i < np; i++) xs[i] = iq4_nl_x_at(x->q + 64 * (p0 + i), 1);
}
/* Four rows over np block pairs from wb (row 0's first block of the slice).
 * The same columns of the rows 8 below are prefetched: the four rows are four
 * interleaved streams, which the hardware prefetcher of the Zen VM this was measured
 * on does not follow (from memory the kernel ran at 0.6× the one-row kernel without
 * it, 1.1–1.3× with it) */
static inline __attribute__((always_inline)) void iq4_nl_rows_pairs(const uint8_t *wb, size_t stride,
                                                                    const iq4_nl_xpair *xs, const float *dx,
                                                                    int64_t np, iq4_nl_acc acc[4]) {
    const size_t ahead = 8 * stride;
    const __m256i lv = iq4_nl_rows_table();
    iq4_nl_acc a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3]; /* (named: in registers) */
    for (int64_t i = 0; i < np; i++, wb += 2 * sizeof(block_iq4_nl), dx += 2) {
        const __m256 S = iq4_nl_scales4(wb, stride, 1, dx);
        _mm_prefetch((const char *)wb + ahead, _MM_HINT_T0);
        _mm_prefetch((const char *)wb + stride + ahead, _MM_HINT_T0);
        _mm_prefetch((const char *)wb + 2 * stride + ahead, _MM_HINT_T0);
        _mm_prefetch((const char *)wb + 3 * stride + ahead, _MM_HINT_T0);
        a0 = iq4_nl_row_pair(iq4_nl_nib_at(wb, 1), xs + i, lv, IQ4_NL_S0(S), a0);
        a1 = iq4_nl_row_pair(iq4_nl_nib_at(wb + stride, 1), xs + i, lv, IQ4_NL_S1(S), a1);
        a2 = iq4_nl_row_pair(iq4_nl_nib_at(wb + 2 * stride, 1), xs + i, lv, IQ4_NL_S2(S), a2);
        a3 = iq4_nl_row_pair(iq4_nl_nib_at(wb + 3 * stride, 1), xs + i, lv, IQ4_NL_S3(S), a3);
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}
/* four rows' last block b (wb: row 0's) alone, when their count is odd */
static void iq4_nl_rows4_last(const uint8_t *wb, size_t stride, const mm_xrow *x, int64_t b, iq4_nl_acc acc[4]) {
    const __m256i lv = iq4_nl_rows_table();
    const iq4_nl_xpair xp = iq4_nl_x_at(x->q + 32 * b, 0);
    const __m256 S = iq4_nl_scales4(wb, stride, 0, x->d + b);
    acc[0] = iq4_nl_row_last(iq4_nl_nib_at(wb, 0), &xp, lv, IQ4_NL_S0(S), acc[0]);
    acc[1] = iq4_nl_row_last(iq4_nl_nib_at(wb + stride, 0), &xp, lv, IQ4_NL_S1(S), acc[1]);
    acc[2] = iq4_nl_row_last(iq4_nl_nib_at(wb + 2 * stride, 0), &xp, lv, IQ4_NL_S2(S), acc[2]);
    acc[3] = iq4_nl_row_last(iq4_nl_nib_at(wb + 3 * stride, 0), &xp, lv, IQ4_NL_S3(S), acc[3]);
}
#undef IQ4_NL_S0
#undef IQ4_NL_S1
#undef IQ4_NL_S2
#undef IQ4_NL_S3
#endif

/* IQ4_XS: a superblock's eight 32-blocks share d and the activation scale (a 256-span,
 * mm_act_span), so their integer sums are folded exactly before one float step (as
 * ggml does): block j's maddubs pairs (|level| against sign(x, level), |pair| <=
 * 2·127² < 32768) go through a madd with ls_j - 32 instead of ones, and the blocks add
 * in int32 (|lane| <= 8·32·4·127² < 2^24). No dot_u8s8: the same instructions, and
 * bits, at every level and with or without VNNI. One convert and fma per superblock
 * instead of per block, and no per-block float scale: 1.27× at T = 1 (AVX2, weights
 * in the cache: 47 → 60 GFLOP/s, bench_matmul -m 12). */
static inline __m256i iq4_xs_superblock(const uint8_t *w, const int8_t *qx, __m256i lv) {
    __m256i s = _mm256_setzero_si256();
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) {
        const int ls = iq4_xs_scale6(w, j) - 32;
        const __m256i v = _mm256_shuffle_epi8(lv, nibbles32(w + 8 + 16 * j));
        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(qx + 32 * j));
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16((short)ls)));
    }
    return s;
}

static inline __m256 iq4_xs_fold(const uint8_t *w, const mm_xrow *x, int64_t i, __m256i lv, __m256 acc) {
    const __m256i s = iq4_xs_superblock(w, x->q + 256 * i, lv);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(f16(w) * x->d[8 * i]), acc);
}

static float dot_iq4_xs(const uint8_t *w, const mm_xrow *x, int64_t n) {
    const __m256i lv = iq4_levels();
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    const int64_t nsb = n / QK_K;
    int64_t i = 0;
    for (; i + 2 <= nsb; i += 2, w += 2 * sizeof(block_iq4_xs)) {
        for (size_t l = 0; l < 2 * sizeof(block_iq4_xs); l += 64)
            _mm_prefetch((const char *)w + MM_PF_DIST + l, MM_PF_HINT);
        a0 = iq4_xs_fold(w, x, i, lv, a0);
        a1 = iq4_xs_fold(w + sizeof(block_iq4_xs), x, i + 1, lv, a1);
    }
    if (i < nsb) a0 = iq4_xs_fold(w, x, i, lv, a0);
    return hsum8(_mm256_add_ps(a0, a1));
}

/* MXFP4: IQ4_NL's kernel with the E2M1 levels and the E8M0 half scale (|level| <= 12). */
static inline __m256 mxfp4_block(const uint8_t *w, const mm_xrow *x, int64_t b, __m256i lv, __m256 acc) {
    const __m256i s = iq4_dot32(w + 1, x->q + 32 * b, lv);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(e8m0_half_to_f32(w[0]) * x->d[b]), acc);
}

static float dot_mxfp4(const uint8_t *w, const mm_xrow *x, int64_t n) {
    const __m256i lv = mxfp4_levels();
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    const int64_t nb = n / QK_MXFP4;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, w += 2 * sizeof(block_mxfp4)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        a0 = mxfp4_block(w, x, b, lv, a0);
        a1 = mxfp4_block(w + sizeof(block_mxfp4), x, b + 1, lv, a1);
    }
    if (b < nb) a0 = mxfp4_block(w, x, b, lv, a0);
    return hsum8(_mm256_add_ps(a0, a1));
}

/* ---- the i-quants ---------------------------------------------------------------------
 * Per 32-element sub-block: the 8-byte groups' grid entries gathered into one vector
 * (unsigned levels: IQ2 8..43, IQ3 1..62), the signs applied to the activations
 * instead (_mm256_sign_epi8 by ±1 bytes, or xor/sub by a byte mask), maddubs into
 * int16 pairs (≤ 2·62·127, no saturation), and madd with the sub-block's multiplier
 * 2s+1 (per 16 elements: the vector's 128-bit halves) into int32 lanes. A
 * superblock's lanes stay integer (< 2^26, as the scalar level) and are scaled once:
 * d·d_x/div. IQ1_S / IQ1_M: signed levels 8·grid ± 1, by |L| × sign(q, L). */

/* madd of int16 pair products with multiplier m0 on elements 0-15, m1 on 16-31 */
static inline __m256i iq_scale(__m256i p16, int m0, int m1) {
    return _mm256_madd_epi16(p16, _mm256_setr_m128i(_mm_set1_epi16((short)m0), _mm_set1_epi16((short)m1)));
}
/* q negated where the byte mask m is 0xff */
static inline __m256i iq_negate(__m256i q, __m256i m) { return _mm256_sub_epi8(_mm256_xor_si256(q, m), m); }
static inline __m256i iq_load32(const int8_t *qx) { return _mm256_loadu_si256((const __m256i *)qx); }
static inline uint32_t iq_rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
/* four ±1 sign patterns from 7-bit indices at bits 0, 7, 14, 21 of a */
static inline __m256i iq_signs7(uint32_t a) {
    return _mm256_set_epi64x((long long)iq_signs_pm1[(a >> 21) & 127], (long long)iq_signs_pm1[(a >> 14) & 127],
                             (long long)iq_signs_pm1[(a >> 7) & 127], (long long)iq_signs_pm1[a & 127]);
}
static inline __m256i iq_grid64(const uint64_t *grid, int i0, int i1, int i2, int i3) {
    return _mm256_set_epi64x((long long)grid[i3], (long long)grid[i2], (long long)grid[i1], (long long)grid[i0]);
}
/* 8 four-byte grid entries; h: bit j is bit 8 of index j (IQ3_S; 0 for IQ3_XXS).
 * Spelled out: a loop over an index array let gcc turn the loads into a slow
 * vector gather (IQ3_S decode at a third of IQ3_XXS's speed, half of that at
 * AVX-512). */
static inline __m256i iq_grid32(const uint32_t *grid, const uint8_t *q, unsigned h) {
    return _mm256_set_epi32((int)grid[q[7] | (h << 1 & 256)], (int)grid[q[6] | (h << 2 & 256)],
                            (int)grid[q[5] | (h << 3 & 256)], (int)grid[q[4] | (h << 4 & 256)],
                            (int)grid[q[3] | (h << 5 & 256)], (int)grid[q[2] | (h << 6 & 256)],
                            (int)grid[q[1] | (h << 7 & 256)], (int)grid[q[0] | (h << 8 & 256)]);
}

/* IQ2_XXS sub-block: word 0 the 4 grid bytes, word 1 the signs and the scale */
static inline __m256i iq2xxs_sub(const uint8_t *p, const int8_t *qx) {
    const uint32_t a0 = iq_rd32(p), a1 = iq_rd32(p + 4);
    const __m256i g = iq_grid64(iq2xxs_grid, a0 & 255, (a0 >> 8) & 255, (a0 >> 16) & 255, a0 >> 24);
    const int m = 2 * (int)(a1 >> 28) + 1;
    return iq_scale(_mm256_maddubs_epi16(g, _mm256_sign_epi8(iq_load32(qx), iq_signs7(a1))), m, m);
}

/* IQ2_XS sub-block: four 16-bit words (9-bit index | 7-bit signs << 9), a scale byte */
static inline __m256i iq2xs_sub(const uint8_t *p, uint8_t sc, const int8_t *qx) {
    uint16_t q[4];
    memcpy(q, p, 8);
    const __m256i g = iq_grid64(iq2xs_grid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
    const __m256i s = _mm256_set_epi64x((long long)iq_signs_pm1[q[3] >> 9], (long long)iq_signs_pm1[q[2] >> 9],
                                        (long long)iq_signs_pm1[q[1] >> 9], (long long)iq_signs_pm1[q[0] >> 9]);
    return iq_scale(_mm256_maddubs_epi16(g, _mm256_sign_epi8(iq_load32(qx), s)), 2 * (sc & 15) + 1, 2 * (sc >> 4) + 1);
}

/* IQ2_S sub-block: 4 index bytes, 2 high bits each in qh, 4 sign bytes, a scale byte */
static inline __m256i iq2s_sub(const uint8_t *qs, const uint8_t *sg, unsigned qh, uint8_t sc, const int8_t *qx) {
    const __m256i g = iq_grid64(iq2s_grid, qs[0] | (qh & 3) << 8, qs[1] | (qh >> 2 & 3) << 8,
                                qs[2] | (qh >> 4 & 3) << 8, qs[3] | (qh >> 6 & 3) << 8);
    const __m256i q = iq_negate(iq_load32(qx), bits_to_bytes(sg));
    return iq_scale(_mm256_maddubs_epi16(g, q), 2 * (sc & 15) + 1, 2 * (sc >> 4) + 1);
}

/* IQ3_XXS sub-block: 8 index bytes (4 elements each), a signs-and-scale word */
static inline __m256i iq3xxs_sub(const uint8_t *qs, uint32_t a, const int8_t *qx) {
    const int m = 2 * (int)(a >> 28) + 1;
    return iq_scale(_mm256_maddubs_epi16(iq_grid32(iq3xxs_grid, qs, 0), _mm256_sign_epi8(iq_load32(qx), iq_signs7(a))), m, m);
}

/* IQ3_S sub-block: 8 index bytes, bit k of qh the ninth bit of index k, 4 sign bytes */
static inline __m256i iq3s_sub(const uint8_t *qs, unsigned qh, const uint8_t *sg, int m, const int8_t *qx) {
    const __m256i q = iq_negate(iq_load32(qx), bits_to_bytes(sg));
    return iq_scale(_mm256_maddubs_epi16(iq_grid32(iq3s_grid, qs, qh), q), m, m);
}

/* IQ1: Σ (8·g + δ)·q over 32 elements, g the int8 grid bytes (-1, 0, 1), δ = ±1 per
 * group of 8 (the bytes of delta), in int16 pairs */
static inline __m256i iq1_pairs(__m256i g, __m256i delta, const int8_t *qx) {
    const __m256i L = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
    return _mm256_maddubs_epi16(_mm256_abs_epi8(L), _mm256_sign_epi8(iq_load32(qx), L));
}

/* IQ1_S sub-block: 4 index bytes, a 16-bit word of high index bits, scale and delta sign */
static inline __m256i iq1s_sub(const uint8_t *qs, unsigned h, const int8_t *qx) {
    const __m256i g = iq_grid64(iq1s_grid, qs[0] | (h & 7) << 8, qs[1] | (h >> 3 & 7) << 8,
                                qs[2] | (h >> 6 & 7) << 8, qs[3] | (h >> 9 & 7) << 8);
    const int m = 2 * (int)(h >> 12 & 7) + 1;
    return iq_scale(iq1_pairs(g, _mm256_set1_epi8(h & 0x8000 ? -1 : 1), qx), m, m);
}

/* IQ1_M sub-block: 4 index bytes, two qh bytes (a nibble per group: 3 index bits and
 * the delta sign), the two 3-bit multipliers m0, m1 */
static inline __m256i iq1m_sub(const uint8_t *qs, const uint8_t *qh, int m0, int m1, const int8_t *qx) {
    const int n0 = qh[0] & 15, n1 = qh[0] >> 4, n2 = qh[1] & 15, n3 = qh[1] >> 4;
    const __m256i g = iq_grid64(iq1s_grid, qs[0] | (n0 & 7) << 8, qs[1] | (n1 & 7) << 8, qs[2] | (n2 & 7) << 8,
                                qs[3] | (n3 & 7) << 8);
    const long long neg = -1, pos = 0x0101010101010101ll;
    const __m256i delta = _mm256_set_epi64x(n3 & 8 ? neg : pos, n2 & 8 ? neg : pos, n1 & 8 ? neg : pos, n0 & 8 ? neg : pos);
    return iq_scale(iq1_pairs(g, delta, qx), m0, m1);
}

/* The int32 lanes of one superblock of type t at w against activations qx. */
static inline __attribute__((always_inline)) __m256i iq_superblock(uint32_t t, const uint8_t *w, const int8_t *qx) {
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    _Pragma("GCC unroll 4")
    for (int ib = 0; ib < 8; ib += 2) {
        __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
        const int8_t *q0 = qx + 32 * ib, *q1 = q0 + 32;
        switch (t) {
        case QT_IQ2_XXS: a = iq2xxs_sub(w + 2 + 8 * ib, q0), b = iq2xxs_sub(w + 10 + 8 * ib, q1); break;
        case QT_IQ2_XS: a = iq2xs_sub(w + 2 + 8 * ib, w[66 + ib], q0), b = iq2xs_sub(w + 10 + 8 * ib, w[67 + ib], q1); break;
        case QT_IQ2_S:
            a = iq2s_sub(w + 2 + 4 * ib, w + 34 + 4 * ib, w[66 + ib], w[74 + ib], q0);
            b = iq2s_sub(w + 6 + 4 * ib, w + 38 + 4 * ib, w[67 + ib], w[75 + ib], q1);
            break;
        case QT_IQ3_XXS:
            a = iq3xxs_sub(w + 2 + 8 * ib, iq_rd32(w + 66 + 4 * ib), q0);
            b = iq3xxs_sub(w + 10 + 8 * ib, iq_rd32(w + 70 + 4 * ib), q1);
            break;
        case QT_IQ3_S: {
            const int sc = w[106 + ib / 2];
            a = iq3s_sub(w + 2 + 8 * ib, w[66 + ib], w + 74 + 4 * ib, 2 * (sc & 15) + 1, q0);
            b = iq3s_sub(w + 10 + 8 * ib, w[67 + ib], w + 78 + 4 * ib, 2 * (sc >> 4) + 1, q1);
            break;
        }
        case QT_IQ1_S:
            a = iq1s_sub(w + 2 + 4 * ib, mm_rd16(w + 34 + 2 * ib), q0);
            b = iq1s_sub(w + 6 + 4 * ib, mm_rd16(w + 36 + 2 * ib), q1);
            break;
        case QT_IQ1_M: {
            const unsigned sw = mm_rd16(w + 48 + ib); /* word ib/2: sub-block ib bits 0-5, ib+1 bits 6-11 */
            a = iq1m_sub(w + 4 * ib, w + 32 + 2 * ib, 2 * (sw & 7) + 1, 2 * (sw >> 3 & 7) + 1, q0);
            b = iq1m_sub(w + 4 + 4 * ib, w + 34 + 2 * ib, 2 * (sw >> 6 & 7) + 1, 2 * (sw >> 9 & 7) + 1, q1);
            break;
        }
        default: break;
        }
        s0 = _mm256_add_epi32(s0, a);
        s1 = _mm256_add_epi32(s1, b);
    }
    return _mm256_add_epi32(s0, s1);
}

/* d·d_x/div per superblock; t a constant in each caller, so the switch above folds */
static inline __attribute__((always_inline)) float dot_iq_t(uint32_t t, size_t bb, float inv_div, const uint8_t *w,
                                                            const mm_xrow *x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, w += bb) {
        for (size_t l = 0; l < bb; l += 64) _mm_prefetch((const char *)w + MM_PF_DIST + l, MM_PF_HINT);
        const float d = t == QT_IQ1_M ? _cvtsh_ss((unsigned short)((mm_rd16(w + 48) >> 12) | (mm_rd16(w + 50) >> 8 & 0xf0) |
                                                                    (mm_rd16(w + 52) >> 4 & 0xf00) | (mm_rd16(w + 54) & 0xf000)))
                                      : f16(w);
        const __m256 v = _mm256_cvtepi32_ps(iq_superblock(t, w, x->q + QK_K * i));
        if (i & 1) a1 = _mm256_fmadd_ps(v, _mm256_set1_ps(d * x->d[8 * i] * inv_div), a1);
        else a0 = _mm256_fmadd_ps(v, _mm256_set1_ps(d * x->d[8 * i] * inv_div), a0);
    }
    return hsum8(_mm256_add_ps(a0, a1));
}

static float dot_iq2_xxs(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_iq_t(QT_IQ2_XXS, 66, 0.125f, w, x, n); }
static float dot_iq2_xs(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_iq_t(QT_IQ2_XS, 74, 0.125f, w, x, n); }
static float dot_iq2_s(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_iq_t(QT_IQ2_S, 82, 0.125f, w, x, n); }
static float dot_iq3_xxs(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_iq_t(QT_IQ3_XXS, 98, 0.25f, w, x, n); }
static float dot_iq3_s(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_iq_t(QT_IQ3_S, 110, 1.0f, w, x, n); }
static float dot_iq1_s(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_iq_t(QT_IQ1_S, 50, 0.125f, w, x, n); }
static float dot_iq1_m(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_iq_t(QT_IQ1_M, 56, 0.125f, w, x, n); }

/* Q2_K / Q3_K: per 16-group float scales gs (groups 0-7, 8-15) as for Q6_K; chunk j
 * (32 elements) of half h is bits 2j..2j+1 of the half's 32 qs bytes (Q3_K: plus
 * bit 4h+j of hmask as bit 2), its lanes 0-3 group 8h+2j and 4-7 group 8h+2j+1.
 * gs_g = sc_g · dd, dd = d_x·d in every lane (a superblock's eight activation scales
 * are one value, mm_act_span). */
static inline void k16_group_scales(const __m128i sc8, const __m256 dd, __m256 gs[2]) {
    gs[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)), dd);
    gs[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))), dd);
}

/* d_x·d for superblock i in every lane */
static inline __m256 k16_dd(const mm_xrow *x, int64_t i, float d) {
    return _mm256_mul_ps(_mm256_broadcast_ss(x->d + 8 * i), _mm256_set1_ps(d));
}

static inline __m256 k16_chunk_scale(__m256 gs, int j) {
    return _mm256_permutevar8x32_ps(gs, _mm256_setr_epi32(2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1, 2 * j + 1,
                                                          2 * j + 1, 2 * j + 1));
}

static float dot_q2_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 macc = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q2_K)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        _mm_prefetch((const char *)w + MM_PF_DIST + 64, MM_PF_HINT);
        const __m128i sb = _mm_loadu_si128((const __m128i *)w);
        const __m128i sc8 = _mm_and_si128(sb, _mm_set1_epi8(0x0f));
        const __m128i mn8 = _mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0f));
        __m256 gs[2], gm[2];
        k16_group_scales(sc8, k16_dd(x, i, f16(w + 80)), gs);
        k16_group_scales(mn8, k16_dd(x, i, f16(w + 82)), gm);
        const int32_t *aux = x->ai + 16 * i;
        macc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)aux)), gm[0], macc);
        macc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(aux + 8))), gm[1], macc);
        const int8_t *qx = x->q + 256 * i;
        _Pragma("GCC unroll 2")
        for (int h = 0; h < 2; h++) {
            const __m256i qv = _mm256_loadu_si256((const __m256i *)(w + 16 + 32 * h));
            _Pragma("GCC unroll 4")
            for (int j = 0; j < 4; j++) {
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                const __m256i s = dot_u8s8(u, _mm256_loadu_si256((const __m256i *)(qx + 128 * h + 32 * j)));
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), k16_chunk_scale(gs[h], j), acc[j]);
            }
        }
    }
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    return hsum8(sum) - hsum8(macc);
}

/* Q3_K's 16 six-bit scales, minus 32, as 16 signed bytes, from the 16 bytes that
 * end the block (w + 94: qs[62..63], the 12 scale bytes, d), so nothing past the
 * block is read. Scale i: the low (i < 8) or high nibble of byte i % 8, and two
 * bits from byte 8 + i % 4 at shift 2·(i / 4). */
static inline __m128i q3k_scales_i8(const uint8_t *w) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(w + 94));
    const __m128i b = _mm_shuffle_epi8(v, _mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9));
    const __m128i lo = _mm_and_si128(_mm_srlv_epi64(b, _mm_set_epi64x(4, 0)), _mm_set1_epi8(0x0f));
    const __m128i t = _mm_shuffle_epi8(v, _mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13));
    const __m128i hi = _mm_and_si128(_mm_slli_epi32(_mm_srlv_epi32(t, _mm_setr_epi32(0, 2, 4, 6)), 4), _mm_set1_epi8(0x30));
    return _mm_sub_epi8(_mm_or_si128(lo, hi), _mm_set1_epi8(32));
}

/* Bit k of every byte moved to bit 2, the rest cleared (no bit of a neighbouring
 * byte reaches bit 2). */
static inline __m256i bit_to_2(__m256i v, int k) {
    const __m256i b = k == 2 ? v : k < 2 ? _mm256_slli_epi16(v, 2 - k) : _mm256_srli_epi16(v, k - 2);
    return _mm256_and_si256(b, _mm256_set1_epi8(4));
}

/* Chunk j of half h (32 elements) of a Q3_K block as u + 4 = the two low bits (2j of
 * the half's qs bytes qv) | the hmask bit 4h + j as bit 2, 0..7. */
static inline __m256i q3k_chunk(__m256i qv, __m256i hm, int h, int j) {
    const __m256i lo = _mm256_and_si256(j ? _mm256_srli_epi16(qv, 2 * j) : qv, _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, bit_to_2(hm, 4 * h + j));
}

/* Q3_K: chunk j's int32 lanes (4 elements each) scaled per lane by its group's
 * d·d_x·(sc - 32) into acc[j]; the -4 offset is Σ_g gs_g·Σq_g (cacc), taken off four
 * times at the end. */
static float dot_q3_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 cacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q3_K)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        _mm_prefetch((const char *)w + MM_PF_DIST + 64, MM_PF_HINT);
        __m256 gs[2];
        k16_group_scales(q3k_scales_i8(w), k16_dd(x, i, f16(w + 108)), gs);
        const int32_t *aux = x->ai + 16 * i;
        cacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)aux)), gs[0], cacc);
        cacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(aux + 8))), gs[1], cacc);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)w);
        const int8_t *qx = x->q + 256 * i;
        _Pragma("GCC unroll 2")
        for (int h = 0; h < 2; h++) {
            const __m256i qv = _mm256_loadu_si256((const __m256i *)(w + 32 + 32 * h));
            _Pragma("GCC unroll 4")
            for (int j = 0; j < 4; j++) {
                const __m256i s = dot_u8s8(q3k_chunk(qv, hm, h, j),
                                           _mm256_loadu_si256((const __m256i *)(qx + 128 * h + 32 * j)));
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), k16_chunk_scale(gs[h], j), acc[j]);
            }
        }
    }
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    return hsum8(sum) - 4.0f * hsum8(cacc);
}

#ifndef MM_DOT_Q5_K
#define MM_DOT_Q5_K dot_q5_K
static float dot_q5_K(const uint8_t *w, const mm_xrow *x, int64_t n) { return dot_q45_K(w, x, n, 1); }
#endif

#ifdef MM_DOT256_Q6_K_ROWS /* (the AVX2 level: AVX-512 has its own K-quant dots) */
/* dot_rows for Q4_K, Q5_K and Q6_K with T > 1: activation rows in pairs (an odd
 * last one alone) against each weight row, over blocks of 16 weight rows as
 * mm_dot_rows_blocked does; every output as the row alone gives it */
static void dot_rows_paired_256(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    const int64_t n = a->n_in;
    for (int64_t ob = o0; ob < o1; ob += 16) {
        const int64_t oe = ob + 16 < o1 ? ob + 16 : o1;
        for (int64_t t = t0; t < t1; t += 2) {
            const int R = t + 1 < t1 ? 2 : 1;
            const mm_xrow x0 = mm_xrow_at(a->xq + (size_t)t * a->xq_stride, n);
            const mm_xrow x1 = mm_xrow_at(a->xq + (size_t)(t + R - 1) * a->xq_stride, n);
            const mm_xrow *xs[2] = {&x0, &x1};
            float *y0 = a->Y + t * a->n_out, *y1 = y0 + (R - 1) * a->n_out;
            for (int64_t o = ob; o < oe; o++) {
                const uint8_t *w = a->W + (size_t)o * a->w_stride;
                float y[2];
                if (a->type == QT_Q6_K) R == 2 ? dot_q6_K_rows(w, xs, 2, n, y) : dot_q6_K_rows(w, xs, 1, n, y);
                else if (R == 2) dot_q45_K_rows(w, xs, 2, n, a->type == QT_Q5_K, y);
                else dot_q45_K_rows(w, xs, 1, n, a->type == QT_Q5_K, y);
                y0[o] = y[0];
                y1[o] = y[R - 1];
            }
        }
    }
}
#endif

static float dot_pair_256(const mm_args *a, const uint8_t *w, const float *x, const mm_xrow *xr) {
    const int64_t n = a->n_in;
    switch (a->type) {
    case QT_Q8_0: return dot_q8_0(w, xr, n);
    case QT_Q4_0: return dot_q4_0(w, xr, n);
    case QT_Q4_K: return MM_DOT_Q4_K(w, xr, n);
    case QT_Q6_K: return MM_DOT_Q6_K(w, xr, n);
    case QT_Q4_1: return dot_q4_1(w, xr, n);
    case QT_Q5_0: return dot_q5_0(w, xr, n);
    case QT_Q5_1: return dot_q5_1(w, xr, n);
    case QT_Q2_K: return dot_q2_K(w, xr, n);
    case QT_Q3_K: return dot_q3_K(w, xr, n);
    case QT_Q5_K: return MM_DOT_Q5_K(w, xr, n);
    case QT_IQ4_NL: return dot_iq4_nl(w, xr, n);
    case QT_IQ4_XS: return dot_iq4_xs(w, xr, n);
    case QT_MXFP4: return dot_mxfp4(w, xr, n);
    case QT_IQ2_XXS: return dot_iq2_xxs(w, xr, n);
    case QT_IQ2_XS: return dot_iq2_xs(w, xr, n);
    case QT_IQ2_S: return dot_iq2_s(w, xr, n);
    case QT_IQ3_XXS: return dot_iq3_xxs(w, xr, n);
    case QT_IQ3_S: return dot_iq3_s(w, xr, n);
    case QT_IQ1_S: return dot_iq1_s(w, xr, n);
    case QT_IQ1_M: return dot_iq1_m(w, xr, n);
    default: return 0;
    }
}

/* the kernels prefetch MM_PF_DIST ahead; start the stream of a chunk at row o0 */
static void prefetch_chunk_start(const mm_args *a, int64_t o0, int64_t o1) {
    if (o1 > o0)
        for (size_t l = 0; l < MM_PF_DIST; l += 64)
            _mm_prefetch((const char *)a->W + (size_t)o0 * a->w_stride + l, MM_PF_HINT);
}

static void dot_rows_256(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    prefetch_chunk_start(a, o0, o1);
    mm_dot_rows_blocked(a, o0, o1, t0, t1, dot_pair_256);
}

#ifdef MM_DOT256_Q6_K_ROWS
#ifdef MM_DOT256_U8_FULL
/* IQ4_NL: weight rows four at a time (iq4_nl_rows_pairs, over slices of the
 * activations laid out once for all of them), the last (o1 - o0) mod 4 of a block of 16
 * rows alone; the same bits as dot_iq4_nl row by row */
static void dot_rows_iq4_nl_256(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    prefetch_chunk_start(a, o0, o1);
    const size_t stride = a->w_stride, pair = 2 * sizeof(block_iq4_nl);
    const int64_t nb = a->n_in / QK4_NL, npairs = nb / 2;
    iq4_nl_xpair xs[IQ4_NL_SLICE_PAIRS];
    for (int64_t ob = o0; ob < o1; ob += 16) {
        const int64_t oe = ob + 16 < o1 ? ob + 16 : o1, ng = (oe - ob) / 4;
        for (int64_t t = t0; t < t1; t++) {
            const mm_xrow xr = mm_xrow_at(a->xq + (size_t)t * a->xq_stride, a->n_in);
            float *y = a->Y + t * a->n_out;
            const __m256 z = _mm256_setzero_ps();
            iq4_nl_acc acc[16];
            for (int k = 0; k < 16; k++) acc[k] = (iq4_nl_acc){z, z};
            for (int64_t p0 = 0; p0 < npairs; p0 += IQ4_NL_SLICE_PAIRS) {
                const int64_t np = npairs - p0 < IQ4_NL_SLICE_PAIRS ? npairs - p0 : IQ4_NL_SLICE_PAIRS;
                iq4_nl_x_slice(&xr, p0, np, xs);
                for (int64_t g = 0; g < ng; g++)
                    iq4_nl_rows_pairs(a->W + (size_t)(ob + 4 * g) * stride + (size_t)p0 * pair, stride, xs,
                                      xr.d + 2 * p0, np, acc + 4 * g);
            }
            for (int64_t g = 0; g < ng; g++) {
                if (nb % 2)
                    iq4_nl_rows4_last(a->W + (size_t)(ob + 4 * g) * stride + (size_t)npairs * pair, stride, &xr,
                                      nb - 1, acc + 4 * g);
                for (int r = 0; r < 4; r++) y[ob + 4 * g + r] = iq4_nl_acc_sum(acc[4 * g + r]);
            }
            for (int64_t o = ob + 4 * ng; o < oe; o++) y[o] = dot_iq4_nl(a->W + (size_t)o * stride, &xr, a->n_in);
        }
    }
}

#endif

/* The AVX2 level's quantized rows: Q4_K, Q5_K and Q6_K with T > 1 in activation
 * pairs, IQ4_NL four weight rows at a time, the rest (and one row) one pair at a time. */
static void dot_rows_quant_256(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    if ((a->type == QT_Q4_K || a->type == QT_Q5_K || a->type == QT_Q6_K) && t1 - t0 > 1)
        dot_rows_paired_256(a, o0, o1, t0, t1);
#ifdef MM_DOT256_U8_FULL /* (AVX-VNNI: four rows at a time) */
    else if (a->type == QT_IQ4_NL) dot_rows_iq4_nl_256(a, o0, o1, t0, t1);
#endif
    else dot_rows_256(a, o0, o1, t0, t1);
}
#endif

#endif
