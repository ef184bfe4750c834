/* matmul_dot256.h — the 256-bit dot-product kernels of the x86 matmul levels:
 * activation quantization and one dot product per weight type (a weight row in
 * place against one activation row), plus dot_rows_256 looping over a chunk.
 * A template, included by matmul_avx2.c and matmul_avx512.c under their own target
 * pragma, each first defining
 *   dot_u8s8(u, s)  Σ over 4-byte groups of u8 × s8 → 8 int32 lanes (maddubs+madd
 *                   on AVX2, vpdpbusd with AVX-512 VNNI); dot_u8s8_acc(acc, u, s)
 *                   the same added to acc;
 *   MM_DOT_Q4_K, MM_DOT_Q6_K  the Q4_K / Q6_K row dot to use (the AVX-512 file
 *                   substitutes 512-bit versions).
 * Weight rows are prefetched MM_PF_DIST bytes ahead into L2: with the hardware
 * prefetcher alone one core streams at ~60% of its bandwidth (measured on the
 * 2-core Xeon this was tuned on: 4 KB ahead into L2 beat 1-2 KB and L1 targets). */
#ifndef LLC_CPU_MATMUL_DOT256_H
#define LLC_CPU_MATMUL_DOT256_H

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/matmul_internal.h"


#ifndef MM_PF_DIST
#define MM_PF_DIST 4096 /* bytes ahead in a weight row to prefetch */
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

static void quantize_x_256(uint32_t type, const float *x, int64_t n, uint8_t *xq) {
    int8_t *q = (int8_t *)xq;
    float *d = (float *)(void *)(xq + n);
    int32_t *ai = (int32_t *)(void *)(xq + n + 4 * (n / 32));
    float *af = (float *)(void *)ai;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / MM_QB; b++) {
        const float *xb = x + b * MM_QB;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps(), nanm = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
            nanm = _mm256_or_ps(nanm, _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float db = _mm_cvtss_f32(m) / 127.0f;
        const float id = db > 0 ? 1.0f / db : 0.0f;
        int8_t *qb = q + b * MM_QB;
        int s0, s1;
        if (_mm256_movemask_ps(nanm) || isinf(db)) { /* non-finite block: NaN/inf·0 */
            memset(qb, 0, MM_QB);
            d[b] = _mm256_movemask_ps(nanm) ? NAN : db;
            s0 = s1 = 0;
        } else {
            const __m256 vid = _mm256_set1_ps(id);
            __m256i i[4];
            for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
            s0 = hsum8i(_mm256_add_epi32(i[0], i[1]));
            s1 = hsum8i(_mm256_add_epi32(i[2], i[3]));
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]),
                                           _mm256_packs_epi32(i[2], i[3]));
            _mm256_storeu_si256((__m256i *)qb, _mm256_permutevar8x32_epi32(p, perm));
            d[b] = db;
        }
        switch (type) {
        case QT_Q8_0:
        case QT_Q4_0: ai[b] = -128 * (s0 + s1); break;
        case QT_Q4_K: af[b] = d[b] * (float)(s0 + s1); break;
        case QT_Q6_K:
            ai[2 * b] = -32 * s0;
            ai[2 * b + 1] = -32 * s1;
            break;
        default: break;
        }
    }
}

/* ---- float weights --------------------------------------------------------------- */

static inline __m256 load_f16x8(const uint8_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline __m256 load_bf16x8(const uint8_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

#define DOT_FLOAT(NAME, ESZ, LOAD, SCALAR)                                                   \
    static float NAME(const uint8_t *w, const float *x, int64_t n) {                        \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                         \
        int64_t i = 0;                                                                      \
        for (; i + 32 <= n; i += 32) {                                                      \
            _mm_prefetch((const char *)w + ESZ * i + MM_PF_DIST, MM_PF_HINT);              \
            if (ESZ == 4)                                                                   \
                _mm_prefetch((const char *)w + ESZ * i + MM_PF_DIST + 64, MM_PF_HINT);     \
            a0 = _mm256_fmadd_ps(LOAD(w + ESZ * i), _mm256_loadu_ps(x + i), a0);            \
            a1 = _mm256_fmadd_ps(LOAD(w + ESZ * (i + 8)), _mm256_loadu_ps(x + i + 8), a1);  \
            a2 = _mm256_fmadd_ps(LOAD(w + ESZ * (i + 16)), _mm256_loadu_ps(x + i + 16), a2); \
            a3 = _mm256_fmadd_ps(LOAD(w + ESZ * (i + 24)), _mm256_loadu_ps(x + i + 24), a3); \
        }                                                                                   \
        for (; i + 8 <= n; i += 8)                                                          \
            a0 = _mm256_fmadd_ps(LOAD(w + ESZ * i), _mm256_loadu_ps(x + i), a0);            \
        float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));       \
        for (; i < n; i++) s += SCALAR(w + ESZ * i) * x[i];                                 \
        return s;                                                                           \
    }

static inline __m256 load_f32x8(const uint8_t *p) { return _mm256_loadu_ps((const float *)(const void *)p); }
static inline float rd_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}
static inline float rd_bf16(const uint8_t *p) { return bf16_to_f32(mm_rd16(p)); }

DOT_FLOAT(dot_f32, 4, load_f32x8, rd_f32)
DOT_FLOAT(dot_f16, 2, load_f16x8, f16)
DOT_FLOAT(dot_bf16, 2, load_bf16x8, rd_bf16)

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

#ifndef MM_DOT_Q4_K
#define MM_DOT_Q4_K dot_q4_K
static float dot_q4_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 macc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q4_K)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        _mm_prefetch((const char *)w + MM_PF_DIST + 64, MM_PF_HINT);
        _mm_prefetch((const char *)w + MM_PF_DIST + 128, MM_PF_HINT);
        const float d = f16(w), dmin = f16(w + 2);
        uint32_t sm[4];
        mm_q4k_scales_u32(w + 4, sm);
        const __m256 scf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sm)));
        const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sm + 2))));
        /* per 32-block: d·sc_j·d_x,j, and the min term dmin·m_j·(d_x,j·Σq_j) */
        const __m256 sc = _mm256_mul_ps(_mm256_mul_ps(scf, _mm256_set1_ps(d)), _mm256_loadu_ps(x->d + 8 * i));
        macc = _mm256_fmadd_ps(_mm256_mul_ps(mnf, _mm256_set1_ps(dmin)), _mm256_loadu_ps(x->af + 8 * i), macc);
        const uint8_t *qs = w + 16;
        const int8_t *qx = x->q + 256 * i;
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) {
            const __m256i qw = _mm256_loadu_si256((const __m256i *)(qs + 32 * r));
            const __m256i lo = _mm256_and_si256(qw, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qw, 4), m4);
            const __m256i s0 = dot_u8s8(lo, _mm256_loadu_si256((const __m256i *)(qx + 64 * r)));
            const __m256i s1 = dot_u8s8(hi, _mm256_loadu_si256((const __m256i *)(qx + 64 * r + 32)));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0),
                                     _mm256_permutevar8x32_ps(sc, _mm256_set1_epi32(2 * r)), acc[r]);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1),
                                     _mm256_permutevar8x32_ps(sc, _mm256_set1_epi32(2 * r + 1)), acc[r]);
        }
    }
    /* four accumulators: one chain of dependent FMAs per superblock would cap the speed */
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) - hsum8(macc);
}

#endif

#ifndef MM_DOT_Q6_K
#define MM_DOT_Q6_K dot_q6_K
/* Q6_K: u = 6-bit quant (0..63) into maddubs; the -32 offset comes from aux per group. */
static float dot_q6_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 cacc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i lo_idx = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256i hi_idx = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q6_K)) {
        for (int l = 0; l < 4; l++) _mm_prefetch((const char *)w + MM_PF_DIST + 64 * l, MM_PF_HINT);
        const float d = f16(w + 208);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(w + 192));
        const __m256 dx = _mm256_mul_ps(_mm256_loadu_ps(x->d + 8 * i), _mm256_set1_ps(d));
        /* per 16-group scale d·sc_g·d_x(g/2), groups 0-7 and 8-15 */
        __m256 gs[2];
        gs[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)),
                              _mm256_permutevar8x32_ps(dx, lo_idx));
        gs[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))),
                              _mm256_permutevar8x32_ps(dx, hi_idx));
        const int32_t *aux = x->ai + 16 * i;
        cacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)aux)), gs[0], cacc);
        cacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(aux + 8))), gs[1], cacc);
        const int8_t *qx = x->q + 256 * i;
        _Pragma("GCC unroll 4")
        for (int h = 0; h < 2; h++) {
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
                const __m256i s = dot_u8s8(u[c], _mm256_loadu_si256((const __m256i *)(qx + 128 * h + 32 * c)));
                /* lanes 0-3: group 2c, lanes 4-7: group 2c+1 (of this half) */
                const __m256i idx = _mm256_setr_epi32(2 * c, 2 * c, 2 * c, 2 * c, 2 * c + 1,
                                                      2 * c + 1, 2 * c + 1, 2 * c + 1);
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_permutevar8x32_ps(gs[h], idx), acc[c]);
            }
        }
    }
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    return hsum8(_mm256_add_ps(sum, cacc));
}

#endif

static void dot_rows_256(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    /* the kernels prefetch MM_PF_DIST ahead; start the stream of this chunk */
    if (o1 > o0)
        for (int l = 0; l < MM_PF_DIST; l += 64)
            _mm_prefetch((const char *)a->W + (size_t)o0 * a->w_stride + l, MM_PF_HINT);
    const int64_t n = a->n_in;
    /* blocks of 16 rows stay in cache while every activation row passes */
    for (int64_t ob = o0; ob < o1; ob += 16) {
        const int64_t oe = ob + 16 < o1 ? ob + 16 : o1;
        for (int64_t t = t0; t < t1; t++) {
            const float *x = a->X + t * n;
            mm_xrow xr = {0};
            if (a->xq) xr = mm_xrow_at(a->xq + (size_t)t * a->xq_stride, n);
            float *y = a->Y + t * a->n_out;
            for (int64_t o = ob; o < oe; o++) {
                const uint8_t *w = a->W + (size_t)o * a->w_stride;
                float v = 0;
                switch (a->type) {
                case QT_F32: v = dot_f32(w, x, n); break;
                case QT_F16: v = dot_f16(w, x, n); break;
                case QT_BF16: v = dot_bf16(w, x, n); break;
                case QT_Q8_0: v = dot_q8_0(w, &xr, n); break;
                case QT_Q4_0: v = dot_q4_0(w, &xr, n); break;
                case QT_Q4_K: v = MM_DOT_Q4_K(w, &xr, n); break;
                case QT_Q6_K: v = MM_DOT_Q6_K(w, &xr, n); break;
                default: break;
                }
                y[o] = v;
            }
        }
    }
}

#endif
