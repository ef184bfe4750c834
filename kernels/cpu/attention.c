/* attention.c — paged causal attention on the CPU (see attention.h), and writing
 * rows into the KV cache. One task is a tile of query rows of one sequence times
 * the query heads of one KV head; it walks the tiles of FA_KT keys its rows see
 * (all earlier ones, or those in a sliding window; tiles past every row's
 * position are skipped), keeping per query a running maximum, sum and output
 * accumulator (scores optionally soft-capped; a per-head sink logit joins the
 * denominator at the end). The caches are read in their own element type (f32,
 * f16 or q8_0): in place, or converted once per key tile into f32 copies that the
 * task's queries share. The task body is instantiated for AVX-512, AVX2+FMA+F16C
 * and plain C; the levels differ only in the helpers (scores, exp-and-sum, the
 * weighted value sum, conversion). */
#include "kernels/cpu/attention.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <string.h>

#include "kernels/cpu/matmul.h"
#include "kernels/quant.h"
#if defined(__x86_64__)
#include "kernels/cpu/vecmath.h"
#endif

/* Keys per tile of the online softmax, aligned to multiples of FA_KT positions;
 * the most query vectors (rows x heads of one KV head) in one task. */
enum { FA_KT = 32, FA_MAXQ = 64 };

/* A query tile: rows [r0, r1) of sequence s. */
typedef struct fa_tile {
    int32_t r0, r1, s;
} fa_tile;

typedef struct attn_job {
    const bk_batch *b;
    const bk_attn *a;
    const float *q;
    const uint8_t *k_cache, *v_cache; /* a row of row_bytes per slot */
    size_t row_bytes;
    float *out;
    const fa_tile *tiles;
    long n_tasks;  /* tiles x KV heads x hsplit */
    int hsplit;    /* a KV head's query heads go to this many tasks */
    float *scratch; /* [nth][stride] */
    size_t stride;
} attn_job;

/* The first key a row at position pos sees: 0, or the start of its window. */
static inline int first_key(const bk_attn *a, int pos) {
    return a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
}

/* Gemma's attention-logit soft-capping; plain tanhf at every SIMD level */
static inline float softcap(float x, float cap) { return cap * tanhf(x / cap); }

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE uint16_t rd16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* ---- plain C ---- */

/* Element e of a cache row of `type` (the types of bk_attn.kv_type). Every task
 * body is instantiated with a constant type, so the switch folds away. */
static ALWAYS_INLINE float kv_elem(uint32_t type, const uint8_t *row, int e) {
    switch (type) {
    case QT_F16: return fp16_to_f32(rd16(row + 2 * (size_t)e));
    case QT_Q8_0: {
        const uint8_t *blk = row + (size_t)(e / QK8_0) * sizeof(block_q8_0);
        return fp16_to_f32(rd16(blk)) * (float)(int8_t)blk[2 + e % QK8_0];
    }
    default: return ((const float *)row)[e];
    }
}

/* q · row[e0 .. e0+n) */
static ALWAYS_INLINE float dot_c(const float *x, const uint8_t *row, int e0, int n, uint32_t type) {
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i] * kv_elem(type, row, e0 + i);
    return s;
}

/* s[i] = exp(s[i] - max); returns the sum */
static inline float exp_sum_c(float *s, int n, float max) {
    float sum = 0;
    for (int i = 0; i < n; i++) sum += s[i] = expf(s[i] - max);
    return sum;
}

/* o += p * row[e0 .. e0+n) */
static ALWAYS_INLINE void axpy_c(float *o, float p, const uint8_t *row, int e0, int n, uint32_t type) {
    for (int i = 0; i < n; i++) o[i] += p * kv_elem(type, row, e0 + i);
}

#if defined(__x86_64__) /* (other CPUs run the plain C body) */
/* ---- AVX2 + FMA ---- */

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))

T_AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 elements of a cache row from element e (Q8_0: e % 8 == 0, so they lie in one block) */
T_AVX2 static ALWAYS_INLINE __m256 ld8_avx2(uint32_t type, const uint8_t *row, int e) {
    switch (type) {
    case QT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)e)));
    case QT_Q8_0: {
        const uint8_t *blk = row + (size_t)(e / QK8_0) * sizeof(block_q8_0);
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + e % QK8_0)));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(_cvtsh_ss(rd16(blk))));
    }
    default: return _mm256_loadu_ps((const float *)row + e);
    }
}

/* q · row[e0 .. e0+n) in lanes, before the horizontal sum: chunks of 8 alternate
 * between two accumulators, added at the end (n % 8 == 0) */
T_AVX2 static ALWAYS_INLINE __m256 dot8_lanes_avx2(const float *x, const uint8_t *row, int e0, int n, uint32_t type) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), ld8_avx2(type, row, e0 + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), ld8_avx2(type, row, e0 + i + 8), acc1);
    }
    if (i < n) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), ld8_avx2(type, row, e0 + i), acc0);
    return _mm256_add_ps(acc0, acc1);
}

/* dot8_lanes_avx2 at n = 64 with q already in registers (the same fmas in the same
 * order, so the same bits): a group of 8 keys then loads each q element once */
T_AVX2 static ALWAYS_INLINE __m256 dot64_lanes_avx2(const __m256 qv[8], const uint8_t *row, int e0, uint32_t type) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        acc0 = _mm256_fmadd_ps(qv[i], ld8_avx2(type, row, e0 + 8 * i), acc0);
        acc1 = _mm256_fmadd_ps(qv[i + 1], ld8_avx2(type, row, e0 + 8 * i + 8), acc1);
    }
    return _mm256_add_ps(acc0, acc1);
}

/* q · row[e0 .. e0+n): the lanes, their horizontal sum, then the last n % 8 one by one */
T_AVX2 static ALWAYS_INLINE float dot_avx2(const float *x, const uint8_t *row, int e0, int n, uint32_t type) {
    const int n8 = n & ~7;
    float s = hsum256(dot8_lanes_avx2(x, row, e0, n8, type));
    for (int i = n8; i < n; i++) s += x[i] * kv_elem(type, row, e0 + i);
    return s;
}

T_AVX2 static inline float exp_sum_avx2(float *s, int n, float max) {
    __m256 vmax = _mm256_set1_ps(max), acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = vm_exp256(_mm256_sub_ps(_mm256_loadu_ps(s + i), vmax));
        _mm256_storeu_ps(s + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum256(acc);
    for (; i < n; i++) sum += s[i] = expf(s[i] - max);
    return sum;
}

T_AVX2 static ALWAYS_INLINE void axpy_avx2(float *o, float p, const uint8_t *row, int e0, int n, uint32_t type) {
    __m256 vp = _mm256_set1_ps(p);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(vp, ld8_avx2(type, row, e0 + i), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) o[i] += p * kv_elem(type, row, e0 + i);
}

/* hsum256 of 8 vectors at once: lane j of the result is the sum of a[j], added in
 * hsum256's order ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)), so a group of 8 keys
 * gives each key the bits its own horizontal sum gave (18 shuffles, 7 adds). */
T_AVX2 static inline __m256 hsum8x8_avx2(const __m256 a[8]) {
    __m256 x[4], y[2];
    for (int i = 0; i < 4; i++) /* [a(2i): v_l + v_l+4, l < 4 | a(2i+1): the same] */
        x[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
    for (int i = 0; i < 2; i++) /* per 128 bits, two vectors' (s0 + s2, s1 + s3) */
        y[i] = _mm256_add_ps(_mm256_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 z = _mm256_add_ps(_mm256_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* z holds vectors 0 2 4 6 1 3 5 7 */
    return _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Scores of keys [vlo, vhi) of a tile (indices relative to its start, a multiple of
 * 8 positions) against q, into sc[vlo..vhi); returns their maximum. 8 keys at a time
 * through hsum8x8_avx2: each key's score has exactly dot_avx2's bits (one order at
 * this level, whether a row is alone or in a batch), without a horizontal sum per
 * key. Keys the row does not see are never read. */
T_AVX2 static ALWAYS_INLINE float scores_avx2(const float *q, const uint8_t *const *kp, int eoff, int hd, int vlo,
                                              int vhi, float scale, float cap, float *sc, const uint32_t type) {
    if (hd % 8) { /* (no model has such heads) one key at a time */
        float mx = -INFINITY;
        for (int t = vlo; t < vhi; t++) {
            float s = dot_avx2(q, kp[t], eoff, hd, type) * scale;
            if (cap > 0) s = softcap(s, cap);
            sc[t] = s;
            if (s > mx) mx = s;
        }
        return mx;
    }
    const __m256 vscale = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 vmax = ninf;
    for (int g0 = vlo & ~7; g0 < vhi; g0 += 8) {
        const int t_lo = g0 > vlo ? g0 : vlo, t_hi = g0 + 8 < vhi ? g0 + 8 : vhi;
        __m256 acc[8];
        if (t_lo == g0 && t_hi == g0 + 8 && hd == 64) {
            __m256 qv[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) qv[i] = _mm256_loadu_ps(q + 8 * i);
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) acc[t] = dot64_lanes_avx2(qv, kp[g0 + t], eoff, type);
        } else if (t_lo == g0 && t_hi == g0 + 8) {
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) acc[t] = dot8_lanes_avx2(q, kp[g0 + t], eoff, hd, type);
        } else {
            for (int t = 0; t < 8; t++)
                acc[t] = g0 + t >= t_lo && g0 + t < t_hi ? dot8_lanes_avx2(q, kp[g0 + t], eoff, hd, type)
                                                         : _mm256_setzero_ps();
        }
        __m256 s = _mm256_mul_ps(hsum8x8_avx2(acc), vscale);
        if (cap > 0) {
            float tmp[8];
            _mm256_storeu_ps(tmp, s);
            for (int t = t_lo - g0; t < t_hi - g0; t++) tmp[t] = softcap(tmp[t], cap);
            s = _mm256_loadu_ps(tmp);
        }
        const __m256i seen = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(t_hi - g0), lane),
                                              _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(t_lo - g0 - 1)));
        _mm256_maskstore_ps(sc + g0, seen, s);
        vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(ninf, s, _mm256_castsi256_ps(seen)));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* o = o * corr + Σ p[t] · V[t] over t in [vlo, vhi), in key order: axpy_avx2's
 * arithmetic, with 64 dimensions at a time kept in registers across the keys
 * instead of loaded and stored per key. */
T_AVX2 static ALWAYS_INLINE void pv_avx2(float *o, float corr, const float *p, const uint8_t *const *vp, int eoff,
                                         int hd, int vlo, int vhi, const uint32_t type) {
    if (corr != 1.0f)
        for (int i = 0; i < hd; i++) o[i] *= corr;
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        __m256 e[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) e[i] = _mm256_loadu_ps(o + d0 + 8 * i);
        for (int t = vlo; t < vhi; t++) {
            const __m256 pt = _mm256_set1_ps(p[t]);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) e[i] = _mm256_fmadd_ps(pt, ld8_avx2(type, vp[t], eoff + d0 + 8 * i), e[i]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(o + d0 + 8 * i, e[i]);
    }
    if (d0 < hd)
        for (int t = vlo; t < vhi; t++) axpy_avx2(o + d0, p[t], vp[t], eoff + d0, hd - d0, type);
}

/* ---- AVX-512 ---- */

#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))

/* the first n (0..16) lanes */
T_AVX512 static inline __mmask16 tail_mask(int n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

/* The elements of a cache row from element e that mask m selects (its first n).
 * Q8_0 goes 8 at a time (e % 8 == 0 and n is 8 or 16: head_dim % 8 == 0). */
T_AVX512 static ALWAYS_INLINE __m512 ld16_avx512(uint32_t type, const uint8_t *row, int e, __mmask16 m) {
    switch (type) {
    case QT_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * (size_t)e));
    case QT_Q8_0: {
        const __m256 lo = ld8_avx2(type, row, e), hi = m >> 8 ? ld8_avx2(type, row, e + 8) : _mm256_setzero_ps();
        return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    }
    default: return _mm512_maskz_loadu_ps(m, (const float *)row + e);
    }
}

T_AVX512 static inline float exp_sum_avx512(float *s, int n, float max) {
    __m512 vmax = _mm512_set1_ps(max), acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = vm_exp512(_mm512_sub_ps(_mm512_loadu_ps(s + i), vmax));
        _mm512_storeu_ps(s + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m512 e = vm_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), vmax));
        _mm512_mask_storeu_ps(s + i, m, e);
        acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, e));
    }
    return _mm512_reduce_add_ps(acc);
}

/* Lane j of the result is Σ a[4·(j % 4) + j / 4]: a transposing sum tree over 16
 * vectors (31 shuffles, 15 adds), so 16 dot products need no horizontal sums.
 * Callers put key j's products in a[slot16(j)]. */
static inline int slot16(int j) { return 4 * (j & 3) + (j >> 2); }

T_AVX512 static inline __m512 hsum16_avx512(__m512 a[16]) {
    __m512 b[8], c[4], d[2];
    for (int i = 0; i < 8; i++) /* 128-bit lanes: [x.0+x.2, x.1+x.3, y.0+y.2, y.1+y.3] */
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xee));
    for (int i = 0; i < 4; i++) /* 128-bit lane L: the four partial sums of vector 4i+L */
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xdd));
    for (int i = 0; i < 2; i++)
        d[i] = _mm512_add_ps(_mm512_unpacklo_ps(c[2 * i], c[2 * i + 1]), _mm512_unpackhi_ps(c[2 * i], c[2 * i + 1]));
    return _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 2, 3, 2)));
}

/* Scores of keys [vlo, vhi) of a tile (indices relative to its start, a multiple of
 * 16 positions) against q, into sc[vlo..vhi); returns their maximum. 16 keys at a
 * time: each key's products summed in one vector over the head, the 16 vectors by
 * the tree above, so no per-key horizontal sum. Key j of a group always takes
 * slot16(j), whichever keys of the group the row sees. */
T_AVX512 static ALWAYS_INLINE float scores_avx512(const float *q, const uint8_t *const *kp, int eoff, int hd, int vlo,
                                                  int vhi, float scale, float cap, float *sc, const uint32_t type) {
    const int nv = (hd + 15) / 16;
    const __mmask16 tail = tail_mask(hd & 15 ? hd & 15 : 16);
    const __m512 vscale = _mm512_set1_ps(scale);
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int g0 = vlo & ~15; g0 < vhi; g0 += 16) {
        const int t_lo = g0 > vlo ? g0 : vlo, t_hi = g0 + 16 < vhi ? g0 + 16 : vhi;
        __m512 acc[16];
        if (t_lo == g0 && t_hi == g0 + 16) { /* the whole group: constant slots */
#pragma GCC unroll 16
            for (int t = 0; t < 16; t++) {
                __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 8
                for (int v = 0; v < nv; v++) {
                    const __mmask16 m = v == nv - 1 ? tail : (__mmask16)0xffff;
                    sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + 16 * v),
                                          ld16_avx512(type, kp[g0 + t], eoff + 16 * v, m), sum);
                }
                acc[slot16(t)] = sum;
            }
        } else {
            for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
            for (int t = t_lo; t < t_hi; t++) { /* the same sums, keys the row does not see left at 0 */
                __m512 sum = _mm512_setzero_ps();
                for (int v = 0; v < nv; v++) {
                    const __mmask16 m = v == nv - 1 ? tail : (__mmask16)0xffff;
                    sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + 16 * v),
                                          ld16_avx512(type, kp[t], eoff + 16 * v, m), sum);
                }
                acc[slot16(t - g0)] = sum;
            }
        }
        const __mmask16 km = (__mmask16)(tail_mask(t_hi - g0) & ~tail_mask(t_lo - g0));
        __m512 s = _mm512_mul_ps(hsum16_avx512(acc), vscale);
        if (cap > 0) {
            float tmp[16];
            _mm512_storeu_ps(tmp, s);
            for (int t = t_lo - g0; t < t_hi - g0; t++) tmp[t] = softcap(tmp[t], cap);
            s = _mm512_loadu_ps(tmp);
        }
        _mm512_mask_storeu_ps(sc + g0, km, s);
        vmax = _mm512_mask_max_ps(vmax, km, vmax, s);
    }
    return _mm512_reduce_max_ps(vmax);
}

/* o = o * corr + Σ p[t] · V[t] over t in [vlo, vhi), in key order; 64 dimensions at
 * a time in registers. corr == 1 leaves o as it is (the product would too). */
T_AVX512 static ALWAYS_INLINE void pv_avx512(float *o, float corr, const float *p, const uint8_t *const *vp, int eoff,
                                             int hd, int vlo, int vhi, const uint32_t type) {
    const __mmask16 tail = tail_mask(hd & 15 ? hd & 15 : 16);
    const __m512 vc = _mm512_set1_ps(corr);
    if (hd % 64 == 0) { /* four named vectors: the sums stay in registers */
        const __mmask16 all = 0xffff;
        for (int d0 = 0; d0 < hd; d0 += 64) {
            __m512 e0 = _mm512_loadu_ps(o + d0), e1 = _mm512_loadu_ps(o + d0 + 16);
            __m512 e2 = _mm512_loadu_ps(o + d0 + 32), e3 = _mm512_loadu_ps(o + d0 + 48);
            if (corr != 1.0f)
                e0 = _mm512_mul_ps(e0, vc), e1 = _mm512_mul_ps(e1, vc), e2 = _mm512_mul_ps(e2, vc),
                e3 = _mm512_mul_ps(e3, vc);
            for (int t = vlo; t < vhi; t++) {
                const __m512 pt = _mm512_set1_ps(p[t]);
                const uint8_t *v = vp[t];
                e0 = _mm512_fmadd_ps(pt, ld16_avx512(type, v, eoff + d0, all), e0);
                e1 = _mm512_fmadd_ps(pt, ld16_avx512(type, v, eoff + d0 + 16, all), e1);
                e2 = _mm512_fmadd_ps(pt, ld16_avx512(type, v, eoff + d0 + 32, all), e2);
                e3 = _mm512_fmadd_ps(pt, ld16_avx512(type, v, eoff + d0 + 48, all), e3);
            }
            _mm512_storeu_ps(o + d0, e0), _mm512_storeu_ps(o + d0 + 16, e1);
            _mm512_storeu_ps(o + d0 + 32, e2), _mm512_storeu_ps(o + d0 + 48, e3);
        }
        return;
    }
    for (int d0 = 0; d0 < hd; d0 += 64) {
        const int nvd = (hd - d0 + 15) / 16 < 4 ? (hd - d0 + 15) / 16 : 4;
        __m512 e[4];
        for (int i = 0; i < nvd; i++) {
            const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
            e[i] = _mm512_maskz_loadu_ps(m, o + d0 + 16 * i);
            if (corr != 1.0f) e[i] = _mm512_mul_ps(e[i], vc);
        }
        for (int t = vlo; t < vhi; t++) {
            const __m512 pt = _mm512_set1_ps(p[t]);
            for (int i = 0; i < nvd; i++) {
                const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
                e[i] = _mm512_fmadd_ps(pt, ld16_avx512(type, vp[t], eoff + d0 + 16 * i, m), e[i]);
            }
        }
        for (int i = 0; i < nvd; i++) {
            const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
            _mm512_mask_storeu_ps(o + d0 + 16 * i, m, e[i]);
        }
    }
}

/* dst[0..n) = row[e0 .. e0+n) as f32 (the values every reader converts to) */
T_AVX512 static ALWAYS_INLINE void conv_avx512(float *dst, const uint8_t *row, int e0, int n, const uint32_t type) {
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(dst + i, m, ld16_avx512(type, row, e0 + i, m));
    }
}

#endif /* __x86_64__ */

/* ---- the task body, once per level ---- */

/* Scores of keys [vlo, vhi) of a tile, one dot product each (C, AVX2). */
#define DEFINE_SCORES(NAME, TARGET, DOT)                                                                          \
    TARGET static ALWAYS_INLINE float NAME(const float *q, const uint8_t *const *kp, int eoff, int hd, int vlo,   \
                                           int vhi, float scale, float cap, float *sc, const uint32_t type) {     \
        float mx = -INFINITY;                                                                                     \
        for (int t = vlo; t < vhi; t++) {                                                                         \
            float s = DOT(q, kp[t], eoff, hd, type) * scale;                                                      \
            if (cap > 0) s = softcap(s, cap);                                                                     \
            sc[t] = s;                                                                                            \
            if (s > mx) mx = s;                                                                                   \
        }                                                                                                         \
        return mx;                                                                                                \
    }

#define DEFINE_PV(NAME, TARGET, AXPY)                                                                            \
    TARGET static ALWAYS_INLINE void NAME(float *o, float corr, const float *p, const uint8_t *const *vp,       \
                                          int eoff, int hd, int vlo, int vhi, const uint32_t type) {            \
        if (corr != 1.0f)                                                                                        \
            for (int i = 0; i < hd; i++) o[i] *= corr;                                                           \
        for (int t = vlo; t < vhi; t++) AXPY(o, p[t], vp[t], eoff, hd, type);                                    \
    }

static ALWAYS_INLINE void conv_c(float *dst, const uint8_t *row, int e0, int n, const uint32_t type) {
    for (int i = 0; i < n; i++) dst[i] = kv_elem(type, row, e0 + i);
}

DEFINE_SCORES(scores_c, , dot_c)
DEFINE_PV(pv_c, , axpy_c)
#if defined(__x86_64__)
T_AVX2 static ALWAYS_INLINE void conv_avx2(float *dst, const uint8_t *row, int e0, int n, const uint32_t type) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, ld8_avx2(type, row, e0 + i));
    for (; i < n; i++) dst[i] = kv_elem(type, row, e0 + i);
}
#endif

/* One task: a query tile's rows x `hper` heads of one KV head, against the tiles
 * of FA_KT keys the rows see (a key tile wholly above every row's position or
 * before every row's window is never read). Each query keeps a running maximum m,
 * sum l and output accumulator: per key tile, its scores' maximum raises m, the
 * accumulator and l are rescaled by exp(m_old - m_new), and the tile's
 * exp(score - m) weights are added with their values, key by key.
 *
 * What a query computes depends only on its own q and the keys it sees: tiles and
 * 16-key groups lie at fixed positions, the keys of one are taken in order, and
 * other queries of the task only share the loads. So a row gives the same bits
 * alone (decode), in a prefill chunk of any length, at any thread count or tile
 * split. The caches are read where they are (ctype == rtype) or, when the task
 * has several queries to share them, converted per key tile into f32 tiles
 * (rtype == QT_F32), which hold exactly the values the in-place reads produce. */
#define DEFINE_FA_TASK(NAME, TARGET, SCORES, EXP_SUM, PV, CONV)                                                  \
    TARGET static ALWAYS_INLINE void NAME(const attn_job *j, long task, float *scr, const uint32_t ctype,          \
                                          const uint32_t rtype, const int HDC) {                                   \
        const bk_batch *b = j->b;                                                                                  \
        const bk_attn *a = j->a;                                                                                   \
        const int group = a->n_heads / a->n_kv_heads, hd = HDC ? HDC : a->head_dim, bs = a->block_size;           \
        const int hper = group / j->hsplit;                                                                        \
        const long per_tile = (long)a->n_kv_heads * j->hsplit;                                                     \
        const fa_tile *tl = &j->tiles[task / per_tile];                                                            \
        const int g = (int)(task % per_tile / j->hsplit), h0 = g * group + (int)(task % j->hsplit) * hper;         \
        const int s = tl->s, nr = tl->r1 - tl->r0;                                                                 \
        const int32_t *blocks = b->block_table + (size_t)s * b->max_blocks;                                        \
        const int e0 = g * hd, eoff = rtype == ctype ? e0 : 0;                                                     \
        float *acc = scr, *m = acc + (size_t)FA_MAXQ * hd, *l = m + FA_MAXQ, *kt = l + FA_MAXQ;                    \
        float *vt = kt + (size_t)FA_KT * hd, *p = vt + (size_t)FA_KT * hd;                                         \
        int rlo[FA_MAXQ], rhi[FA_MAXQ], klo = 0, khi = 0;                                                          \
        for (int ri = 0; ri < nr; ri++) {                                                                          \
            const int pos = b->positions[tl->r0 + ri];                                                             \
            rhi[ri] = pos + 1 < b->kv_len[s] ? pos + 1 : b->kv_len[s];                                             \
            rlo[ri] = first_key(a, pos);                                                                           \
            if (ri == 0 || rlo[ri] < klo) klo = rlo[ri];                                                           \
            if (rhi[ri] > khi) khi = rhi[ri];                                                                      \
        }                                                                                                          \
        memset(acc, 0, (size_t)nr * hper * hd * sizeof *acc);                                                      \
        for (int i = 0; i < nr * hper; i++) m[i] = -INFINITY, l[i] = 0;                                            \
        const uint8_t *kp[FA_KT], *vp[FA_KT];                                                                      \
        for (int c0 = klo & ~(FA_KT - 1); c0 < khi; c0 += FA_KT) {                                                 \
            const int tlo = (klo > c0 ? klo : c0) - c0, thi = (khi < c0 + FA_KT ? khi : c0 + FA_KT) - c0;          \
            for (int t = tlo; t < thi; t++) {                                                                      \
                const size_t slot = (size_t)blocks[(c0 + t) / bs] * bs + (size_t)((c0 + t) % bs);                  \
                const uint8_t *kr = j->k_cache + slot * j->row_bytes, *vr = j->v_cache + slot * j->row_bytes;      \
                if (rtype != ctype) {                                                                              \
                    CONV(kt + (size_t)t * hd, kr, e0, hd, ctype);                                                  \
                    CONV(vt + (size_t)t * hd, vr, e0, hd, ctype);                                                  \
                    kp[t] = (const uint8_t *)(kt + (size_t)t * hd), vp[t] = (const uint8_t *)(vt + (size_t)t * hd); \
                } else                                                                                             \
                    kp[t] = kr, vp[t] = vr;                                                                        \
            }                                                                                                      \
            for (int ri = 0; ri < nr; ri++) {                                                                      \
                const int vlo = (rlo[ri] > c0 ? rlo[ri] : c0) - c0;                                                \
                const int vhi = (rhi[ri] < c0 + FA_KT ? rhi[ri] : c0 + FA_KT) - c0;                                \
                if (vlo >= vhi) continue;                                                                          \
                for (int hi = 0; hi < hper; hi++) {                                                                \
                    const int qi = ri * hper + hi;                                                                 \
                    const float *q = j->q + ((size_t)(tl->r0 + ri) * a->n_heads + h0 + hi) * hd;                   \
                    const float tmax = SCORES(q, kp, eoff, hd, vlo, vhi, a->scale, a->softcap, p, rtype);          \
                    const float mnew = tmax > m[qi] ? tmax : m[qi];                                                \
                    const float corr = mnew == m[qi] ? 1.0f : expf(m[qi] - mnew);                                  \
                    m[qi] = mnew;                                                                                  \
                    l[qi] = l[qi] * corr + EXP_SUM(p + vlo, vhi - vlo, mnew);                                      \
                    PV(acc + (size_t)qi * hd, corr, p, vp, eoff, hd, vlo, vhi, rtype);                             \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
        for (int ri = 0; ri < nr; ri++)                                                                            \
            for (int hi = 0; hi < hper; hi++) {                                                                    \
                const int qi = ri * hper + hi, h = h0 + hi;                                                        \
                float c = 1.0f, sum = l[qi];                                                                       \
                if (a->sinks) { /* the sink joins the denominator only */                                          \
                    const float mf = a->sinks[h] > m[qi] ? a->sinks[h] : m[qi];                                    \
                    c = m[qi] == -INFINITY ? 0.0f : expf(m[qi] - mf);                                              \
                    sum = sum * c + expf(a->sinks[h] - mf);                                                        \
                }                                                                                                  \
                const float inv = sum > 0 ? c / sum : 0;                                                           \
                const float *src = acc + (size_t)qi * hd;                                                          \
                float *o = j->out + ((size_t)(tl->r0 + ri) * a->n_heads + h) * hd;                                 \
                for (int i = 0; i < hd; i++) o[i] = src[i] * inv;                                                  \
            }                                                                                                      \
    }

/* Tasks are dealt round-robin: a sequence's later query tiles see more keys, and
 * interleaving keeps the threads' shares even. A task of one query reads the
 * caches in place; more share f32 copies of each key tile. */
#define DEFINE_FA_JOB(NAME, TARGET, TASK, TYPE, HDC)                                                              \
    TARGET static void NAME(void *arg, int ith, int nth) {                                                        \
        const attn_job *j = arg;                                                                                  \
        float *scr = j->scratch + (size_t)ith * j->stride;                                                        \
        const long per_tile = (long)j->a->n_kv_heads * j->hsplit;                                                 \
        const int hper = j->a->n_heads / j->a->n_kv_heads / j->hsplit;                                            \
        for (long t = ith; t < j->n_tasks; t += nth) {                                                            \
            const fa_tile *tl = &j->tiles[t / per_tile];                                                          \
            if ((TYPE) != QT_F32 && (tl->r1 - tl->r0) * hper > 1)                                                 \
                TASK(j, t, scr, TYPE, QT_F32, HDC);                                                               \
            else                                                                                                  \
                TASK(j, t, scr, TYPE, TYPE, HDC);                                                                 \
        }                                                                                                         \
    }

DEFINE_FA_TASK(fa_task_c, , scores_c, exp_sum_c, pv_c, conv_c)
DEFINE_FA_JOB(attn_job_c_f32, , fa_task_c, QT_F32, 0)
DEFINE_FA_JOB(attn_job_c_f16, , fa_task_c, QT_F16, 0)
DEFINE_FA_JOB(attn_job_c_q8_0, , fa_task_c, QT_Q8_0, 0)
#if defined(__x86_64__)
/* The SIMD levels have bodies for heads of 64 and 128 (constant trip counts keep
 * the value sums in registers) and one for any head size. */
#define DEFINE_FA_JOBS(LEVEL, TARGET, TASK)                                  \
    DEFINE_FA_JOB(attn_job_##LEVEL##_f32, TARGET, TASK, QT_F32, 0)           \
    DEFINE_FA_JOB(attn_job_##LEVEL##_f16, TARGET, TASK, QT_F16, 0)           \
    DEFINE_FA_JOB(attn_job_##LEVEL##_q8_0, TARGET, TASK, QT_Q8_0, 0)         \
    DEFINE_FA_JOB(attn_job_##LEVEL##_f32_64, TARGET, TASK, QT_F32, 64)       \
    DEFINE_FA_JOB(attn_job_##LEVEL##_f16_64, TARGET, TASK, QT_F16, 64)       \
    DEFINE_FA_JOB(attn_job_##LEVEL##_q8_0_64, TARGET, TASK, QT_Q8_0, 64)     \
    DEFINE_FA_JOB(attn_job_##LEVEL##_f32_128, TARGET, TASK, QT_F32, 128)     \
    DEFINE_FA_JOB(attn_job_##LEVEL##_f16_128, TARGET, TASK, QT_F16, 128)     \
    DEFINE_FA_JOB(attn_job_##LEVEL##_q8_0_128, TARGET, TASK, QT_Q8_0, 128)
DEFINE_FA_TASK(fa_task_avx2, T_AVX2, scores_avx2, exp_sum_avx2, pv_avx2, conv_avx2)
DEFINE_FA_JOBS(avx2, T_AVX2, fa_task_avx2)
DEFINE_FA_TASK(fa_task_avx512, T_AVX512, scores_avx512, exp_sum_avx512, pv_avx512, conv_avx512)
DEFINE_FA_JOBS(avx512, T_AVX512, fa_task_avx512)
#endif

typedef void (*attn_fn)(void *arg, int ith, int nth);

/* The job for the SIMD level, KV type [f32, f16, q8_0] and head size. */
static attn_fn pick_job(uint32_t type, int hd) {
    const int t = type == QT_F16 ? 1 : type == QT_Q8_0 ? 2 : 0;
    static const attn_fn c[3] = {attn_job_c_f32, attn_job_c_f16, attn_job_c_q8_0};
#if defined(__x86_64__)
    static const attn_fn avx2[3][3] = {
        {attn_job_avx2_f32, attn_job_avx2_f16, attn_job_avx2_q8_0},
        {attn_job_avx2_f32_64, attn_job_avx2_f16_64, attn_job_avx2_q8_0_64},
        {attn_job_avx2_f32_128, attn_job_avx2_f16_128, attn_job_avx2_q8_0_128}};
    static const attn_fn avx512[3][3] = {
        {attn_job_avx512_f32, attn_job_avx512_f16, attn_job_avx512_q8_0},
        {attn_job_avx512_f32_64, attn_job_avx512_f16_64, attn_job_avx512_q8_0_64},
        {attn_job_avx512_f32_128, attn_job_avx512_f16_128, attn_job_avx512_q8_0_128}};
    const int h = hd == 64 ? 1 : hd == 128 ? 2 : 0;
    switch (cpu_matmul_level()) {
    case CPU_SIMD_AVX512: return avx512[h][t];
    case CPU_SIMD_AVX2: return avx2[h][t];
    default: break;
    }
#endif
    (void)hd;
    return c[t];
}

bool cpu_kv_type_supported(uint32_t type, int kv_dim, int head_dim) {
    switch (type) {
    case QT_F32: case QT_F16: return kv_dim > 0;
    case QT_Q8_0: return kv_dim > 0 && kv_dim % QK8_0 == 0 && head_dim % 8 == 0;
    default: return false;
    }
}

#if defined(__x86_64__)
/* f32 -> f16, 8 at a time: F16C rounds to nearest even, as f32_to_fp16 does */
T_AVX2 static void to_f16_f16c(uint16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = f32_to_fp16(src[i]);
}
#endif

void cpu_kv_write_row(uint32_t type, void *dst, const float *src, int n) {
    switch (type) {
    case QT_F16:
#if defined(__x86_64__)
        if (cpu_matmul_level() >= CPU_SIMD_AVX2) {
            to_f16_f16c(dst, src, n);
            break;
        }
#endif
        for (int i = 0; i < n; i++) ((uint16_t *)dst)[i] = f32_to_fp16(src[i]);
        break;
    case QT_Q8_0: quantize_row(QT_Q8_0, src, dst, n); break;
    default: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    }
}

void cpu_attention_run(cpu_pool *pool, const bk_batch *b, const bk_attn *a, const float *q,
                       const void *k_cache, const void *v_cache, float *out, int max_kv_len) {
    (void)max_kv_len; /* tiles bound the scratch, not the keys */
    const int nth = cpu_pool_size(pool), group = a->n_heads / a->n_kv_heads, hd = a->head_dim;
    /* a task's heads: all of a KV head's group where they fit FA_MAXQ */
    int hsplit = 1;
    while (group / hsplit > FA_MAXQ || group % hsplit) hsplit++;
    const int rows_per_tile = FA_MAXQ / (group / hsplit);
    long n_tiles = 0;
    for (int s = 0; s < b->n_seqs; s++)
        n_tiles += (b->seq_start[s + 1] - b->seq_start[s] + rows_per_tile - 1) / rows_per_tile;
    /* few tasks (decode of one or two sequences): split each group further so every
     * thread has work; what a query computes does not change */
    while (n_tiles * a->n_kv_heads * hsplit < 2L * nth && hsplit < group) {
        hsplit++;
        while (group % hsplit) hsplit++;
    }
    /* per thread: acc [FA_MAXQ][hd], m and l [FA_MAXQ], K and V tiles [FA_KT][hd], scores [FA_KT] */
    const size_t stride = ((size_t)(FA_MAXQ + 2 * FA_KT) * hd + 2 * FA_MAXQ + FA_KT + 15) & ~(size_t)15;
    float *scratch = cpu_pool_scratch(pool, (size_t)nth * stride * sizeof(float) + (size_t)n_tiles * sizeof(fa_tile));
    fa_tile *tiles = (fa_tile *)(scratch + (size_t)nth * stride);
    long n = 0;
    for (int s = 0; s < b->n_seqs; s++)
        for (int r = b->seq_start[s]; r < b->seq_start[s + 1]; r += rows_per_tile)
            tiles[n++] = (fa_tile){r, r + rows_per_tile < b->seq_start[s + 1] ? r + rows_per_tile : b->seq_start[s + 1], s};
    attn_job j = {b, a, q, k_cache, v_cache, qtype_row_bytes(a->kv_type, (int64_t)a->n_kv_heads * a->head_dim),
                  out, tiles, n_tiles * a->n_kv_heads * hsplit, hsplit, scratch, stride};
    cpu_pool_run(pool, pick_job(a->kv_type, hd), &j);
}
