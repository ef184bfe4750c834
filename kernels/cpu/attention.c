/* attention.c — paged causal attention on the CPU (see attention.h), and writing
 * rows into the KV cache. One task is one (row, head): scores against every
 * visible key (all earlier ones, or those in a sliding window; optionally
 * soft-capped), softmax (with a per-head sink logit in its denominator where the
 * model has one), weighted sum of values. The caches are read in their own
 * element type (f32, f16 or q8_0), converted in registers. The same task body is
 * instantiated per type for AVX-512, AVX2+FMA+F16C and plain C; the levels differ
 * only in the helpers (load, dot, exp-and-sum, axpy). */
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

typedef struct attn_job {
    const bk_batch *b;
    const bk_attn *a;
    const float *q;
    const uint8_t *k_cache, *v_cache; /* a row of row_bytes per slot */
    size_t row_bytes;
    float *out;
    const int32_t *row_seq; /* [T] sequence of each row */
    float *scores;          /* [nth][max_kv_len] */
    int max_kv_len;
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

T_AVX2 static ALWAYS_INLINE float dot_avx2(const float *x, const uint8_t *row, int e0, int n, uint32_t type) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), ld8_avx2(type, row, e0 + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), ld8_avx2(type, row, e0 + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), ld8_avx2(type, row, e0 + i), acc0);
    float s = hsum256(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) s += x[i] * kv_elem(type, row, e0 + i);
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

/* One (row, head) task, AVX-512: scores 16 keys at a time (the products of each
 * key summed by the tree above, so no per-key horizontal sum), the running maximum
 * kept as a vector, and the weighted sum of values in registers, 64 dimensions at
 * a time, with even and odd keys in separate sums so two FMA chains overlap. */
T_AVX512 static ALWAYS_INLINE void attn_body_avx512(const attn_job *j, int ith, int nth, const uint32_t type) {
    const bk_batch *b = j->b;
    const bk_attn *a = j->a;
    const int group = a->n_heads / a->n_kv_heads, hd = a->head_dim, bs = a->block_size;
    float *scores = j->scores + (size_t)ith * (size_t)j->max_kv_len;
    const long n_tasks = (long)b->n_tokens * a->n_heads;
    const int nv = (hd + 15) / 16; /* vectors per head */
    const __mmask16 tail = tail_mask(hd & 15 ? hd & 15 : 16);
    for (long task = ith; task < n_tasks; task += nth) {
        const int r = (int)(task / a->n_heads), h = (int)(task % a->n_heads);
        const int s = j->row_seq[r];
        int n_kv = b->positions[r] + 1;
        if (n_kv > b->kv_len[s]) n_kv = b->kv_len[s];
        const int lo = first_key(a, b->positions[r]);
        const int32_t *blocks = b->block_table + (size_t)s * b->max_blocks;
        const int e0 = (h / group) * hd; /* the head's first element in a row */
        const float *q = j->q + ((size_t)r * a->n_heads + h) * hd;
        float *o = j->out + ((size_t)r * a->n_heads + h) * hd;
#define ROW_AT(cache, t) ((cache) + ((size_t)blocks[(t) / bs] * bs + (size_t)((t) % bs)) * j->row_bytes)
        __m512 vmax = _mm512_set1_ps(-INFINITY);
        const __m512 vscale = _mm512_set1_ps(a->scale);
        for (int t0 = lo; t0 < n_kv; t0 += 16) {
            const int nk = n_kv - t0 < 16 ? n_kv - t0 : 16;
            __m512 acc[16];
            for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
            for (int t = 0; t < nk; t++) {
                const uint8_t *k = ROW_AT(j->k_cache, t0 + t);
                __m512 sum = _mm512_setzero_ps();
                for (int v = 0; v < nv; v++) {
                    const __mmask16 m = v == nv - 1 ? tail : (__mmask16)0xffff;
                    sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + 16 * v), ld16_avx512(type, k, e0 + 16 * v, m), sum);
                }
                acc[slot16(t)] = sum;
            }
            const __mmask16 km = tail_mask(nk);
            __m512 sc = _mm512_mul_ps(hsum16_avx512(acc), vscale);
            if (a->softcap > 0) {
                float tmp[16];
                _mm512_storeu_ps(tmp, sc);
                for (int t = 0; t < nk; t++) tmp[t] = softcap(tmp[t], a->softcap);
                sc = _mm512_loadu_ps(tmp);
            }
            _mm512_mask_storeu_ps(scores + (t0 - lo), km, sc);
            vmax = _mm512_mask_max_ps(vmax, km, vmax, sc);
        }
        float max = _mm512_reduce_max_ps(vmax);
        if (a->sinks && a->sinks[h] > max) max = a->sinks[h];
        const float sum = exp_sum_avx512(scores, n_kv - lo, max) + (a->sinks ? expf(a->sinks[h] - max) : 0.0f);
        const float inv = sum > 0 ? 1.0f / sum : 0;
        for (int d0 = 0; d0 < hd; d0 += 64) {
            __m512 e[4], od[4];
            for (int i = 0; i < 4; i++) e[i] = od[i] = _mm512_setzero_ps();
            const int nvd = (hd - d0 + 15) / 16 < 4 ? (hd - d0 + 15) / 16 : 4;
            int t = lo;
            for (; t + 2 <= n_kv; t += 2) {
                const uint8_t *v0 = ROW_AT(j->v_cache, t), *v1 = ROW_AT(j->v_cache, t + 1);
                const __m512 p0 = _mm512_set1_ps(scores[t - lo]), p1 = _mm512_set1_ps(scores[t + 1 - lo]);
                for (int i = 0; i < nvd; i++) {
                    const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
                    e[i] = _mm512_fmadd_ps(p0, ld16_avx512(type, v0, e0 + d0 + 16 * i, m), e[i]);
                    od[i] = _mm512_fmadd_ps(p1, ld16_avx512(type, v1, e0 + d0 + 16 * i, m), od[i]);
                }
            }
            if (t < n_kv) {
                const uint8_t *v0 = ROW_AT(j->v_cache, t);
                const __m512 p0 = _mm512_set1_ps(scores[t - lo]);
                for (int i = 0; i < nvd; i++) {
                    const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
                    e[i] = _mm512_fmadd_ps(p0, ld16_avx512(type, v0, e0 + d0 + 16 * i, m), e[i]);
                }
            }
            const __m512 vinv = _mm512_set1_ps(inv);
            for (int i = 0; i < nvd; i++) {
                const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
                _mm512_mask_storeu_ps(o + d0 + 16 * i, m, _mm512_mul_ps(_mm512_add_ps(e[i], od[i]), vinv));
            }
        }
#undef ROW_AT
    }
}

T_AVX512 static void attn_job_avx512_f32(void *arg, int ith, int nth) { attn_body_avx512(arg, ith, nth, QT_F32); }
T_AVX512 static void attn_job_avx512_f16(void *arg, int ith, int nth) { attn_body_avx512(arg, ith, nth, QT_F16); }
T_AVX512 static void attn_job_avx512_q8_0(void *arg, int ith, int nth) { attn_body_avx512(arg, ith, nth, QT_Q8_0); }

#endif /* __x86_64__ */

/* ---- the task body, once per level and KV type ---- */

/* Tasks are dealt round-robin: rows of one sequence see more keys the later
 * they are, and interleaving keeps the threads' shares even. */
#define DEFINE_ATTN_JOB(NAME, TARGET, DOT, EXP_SUM, AXPY, TYPE)                            \
    TARGET static void NAME(void *arg, int ith, int nth) {                                 \
        const attn_job *j = arg;                                                            \
        const bk_batch *b = j->b;                                                           \
        const bk_attn *a = j->a;                                                            \
        const int group = a->n_heads / a->n_kv_heads, hd = a->head_dim, bs = a->block_size; \
        const size_t rb = j->row_bytes;                                                     \
        float *scores = j->scores + (size_t)ith * (size_t)j->max_kv_len;                    \
        const long n_tasks = (long)b->n_tokens * a->n_heads;                                \
        for (long task = ith; task < n_tasks; task += nth) {                                \
            const int r = (int)(task / a->n_heads), h = (int)(task % a->n_heads);           \
            const int s = j->row_seq[r];                                                    \
            int n_kv = b->positions[r] + 1;                                                 \
            if (n_kv > b->kv_len[s]) n_kv = b->kv_len[s];                                   \
            const int lo = first_key(a, b->positions[r]);                                   \
            const int32_t *blocks = b->block_table + (size_t)s * b->max_blocks;             \
            const int e0 = (h / group) * hd; /* the head's first element in a row */        \
            const float *q = j->q + ((size_t)r * a->n_heads + h) * hd;                      \
            float *o = j->out + ((size_t)r * a->n_heads + h) * hd;                          \
            float max = -INFINITY;                                                          \
            for (int t0 = lo; t0 < n_kv; t0 = (t0 / bs + 1) * bs) {                         \
                const uint8_t *k = j->k_cache + ((size_t)blocks[t0 / bs] * bs + t0 % bs) * rb; \
                const int n = n_kv - t0 < bs - t0 % bs ? n_kv - t0 : bs - t0 % bs;          \
                for (int t = 0; t < n; t++) {                                               \
                    float sc = DOT(q, k + (size_t)t * rb, e0, hd, TYPE) * a->scale;         \
                    if (a->softcap > 0) sc = softcap(sc, a->softcap);                       \
                    scores[t0 + t - lo] = sc;                                               \
                    if (sc > max) max = sc;                                                 \
                }                                                                           \
            }                                                                               \
            if (a->sinks && a->sinks[h] > max) max = a->sinks[h];                           \
            const float sum = EXP_SUM(scores, n_kv - lo, max) +                             \
                              (a->sinks ? expf(a->sinks[h] - max) : 0.0f);                  \
            const float inv = sum > 0 ? 1.0f / sum : 0;                                     \
            memset(o, 0, (size_t)hd * sizeof *o);                                           \
            for (int t0 = lo; t0 < n_kv; t0 = (t0 / bs + 1) * bs) {                         \
                const uint8_t *v = j->v_cache + ((size_t)blocks[t0 / bs] * bs + t0 % bs) * rb; \
                const int n = n_kv - t0 < bs - t0 % bs ? n_kv - t0 : bs - t0 % bs;          \
                for (int t = 0; t < n; t++)                                                 \
                    AXPY(o, scores[t0 + t - lo] * inv, v + (size_t)t * rb, e0, hd, TYPE);   \
            }                                                                               \
        }                                                                                   \
    }

DEFINE_ATTN_JOB(attn_job_c_f32, , dot_c, exp_sum_c, axpy_c, QT_F32)
DEFINE_ATTN_JOB(attn_job_c_f16, , dot_c, exp_sum_c, axpy_c, QT_F16)
DEFINE_ATTN_JOB(attn_job_c_q8_0, , dot_c, exp_sum_c, axpy_c, QT_Q8_0)
#if defined(__x86_64__)
DEFINE_ATTN_JOB(attn_job_avx2_f32, T_AVX2, dot_avx2, exp_sum_avx2, axpy_avx2, QT_F32)
DEFINE_ATTN_JOB(attn_job_avx2_f16, T_AVX2, dot_avx2, exp_sum_avx2, axpy_avx2, QT_F16)
DEFINE_ATTN_JOB(attn_job_avx2_q8_0, T_AVX2, dot_avx2, exp_sum_avx2, axpy_avx2, QT_Q8_0)
#endif

typedef void (*attn_fn)(void *arg, int ith, int nth);

/* The job for the SIMD level and KV type: [f32, f16, q8_0]. */
static attn_fn pick_job(uint32_t type) {
    const int t = type == QT_F16 ? 1 : type == QT_Q8_0 ? 2 : 0;
    static const attn_fn c[3] = {attn_job_c_f32, attn_job_c_f16, attn_job_c_q8_0};
#if defined(__x86_64__)
    static const attn_fn avx2[3] = {attn_job_avx2_f32, attn_job_avx2_f16, attn_job_avx2_q8_0};
    static const attn_fn avx512[3] = {attn_job_avx512_f32, attn_job_avx512_f16, attn_job_avx512_q8_0};
    switch (cpu_matmul_level()) {
    case CPU_SIMD_AVX512: return avx512[t];
    case CPU_SIMD_AVX2: return avx2[t];
    default: break;
    }
#endif
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
    int nth = cpu_pool_size(pool);
    if (max_kv_len < 1) max_kv_len = 1;
    size_t score_floats = (size_t)nth * (size_t)max_kv_len;
    float *scratch = cpu_pool_scratch(pool, score_floats * sizeof(float) +
                                                (size_t)b->n_tokens * sizeof(int32_t));
    int32_t *row_seq = (int32_t *)(scratch + score_floats);
    for (int s = 0; s < b->n_seqs; s++)
        for (int r = b->seq_start[s]; r < b->seq_start[s + 1]; r++) row_seq[r] = s;
    attn_job j = {b, a, q, k_cache, v_cache, qtype_row_bytes(a->kv_type, (int64_t)a->n_kv_heads * a->head_dim),
                  out, row_seq, scratch, max_kv_len};
    cpu_pool_run(pool, pick_job(a->kv_type), &j);
}
