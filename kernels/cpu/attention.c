/* attention.c — paged causal attention on the CPU (see attention.h). One task is
 * one (row, head): scores against every visible key (all earlier ones, or those
 * in a sliding window; optionally soft-capped), softmax, weighted sum of values.
 * The same task body is instantiated for AVX-512, AVX2+FMA and plain C; the
 * vector versions differ only in the three helpers (dot, exp-and-sum, axpy). */
#include "kernels/cpu/attention.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <string.h>

#include "kernels/cpu/matmul.h"
#if defined(__x86_64__)
#include "kernels/cpu/vecmath.h"
#endif

typedef struct attn_job {
    const bk_batch *b;
    const bk_attn *a;
    const float *q, *k_cache, *v_cache;
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

/* ---- plain C ---- */

static inline float dot_c(const float *x, const float *y, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

/* s[i] = exp(s[i] - max); returns the sum */
static inline float exp_sum_c(float *s, int n, float max) {
    float sum = 0;
    for (int i = 0; i < n; i++) sum += s[i] = expf(s[i] - max);
    return sum;
}

static inline void axpy_c(float *o, float p, const float *v, int n) {
    for (int i = 0; i < n; i++) o[i] += p * v[i];
}

#if defined(__x86_64__) /* (other CPUs run the plain C body) */
/* ---- AVX2 + FMA ---- */

#define T_AVX2 __attribute__((target("avx2,fma")))

T_AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

T_AVX2 static inline float dot_avx2(const float *x, const float *y, int n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
    float s = hsum256(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) s += x[i] * y[i];
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

T_AVX2 static inline void axpy_avx2(float *o, float p, const float *v, int n) {
    __m256 vp = _mm256_set1_ps(p);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(v + i), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) o[i] += p * v[i];
}

/* ---- AVX-512 ---- */

#define T_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))

/* the first n (0..16) lanes */
T_AVX512 static inline __mmask16 tail_mask(int n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

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
T_AVX512 static void attn_job_avx512(void *arg, int ith, int nth) {
    const attn_job *j = arg;
    const bk_batch *b = j->b;
    const bk_attn *a = j->a;
    const int group = a->n_heads / a->n_kv_heads, hd = a->head_dim, bs = a->block_size;
    const size_t kv_dim = (size_t)a->n_kv_heads * hd;
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
        const size_t head_off = (size_t)(h / group) * hd;
        const float *q = j->q + ((size_t)r * a->n_heads + h) * hd;
        float *o = j->out + ((size_t)r * a->n_heads + h) * hd;
#define KEY_AT(cache, t) ((cache) + ((size_t)blocks[(t) / bs] * bs + (size_t)((t) % bs)) * kv_dim + head_off)
        __m512 vmax = _mm512_set1_ps(-INFINITY);
        const __m512 vscale = _mm512_set1_ps(a->scale);
        for (int t0 = lo; t0 < n_kv; t0 += 16) {
            const int nk = n_kv - t0 < 16 ? n_kv - t0 : 16;
            __m512 acc[16];
            for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
            for (int t = 0; t < nk; t++) {
                const float *k = KEY_AT(j->k_cache, t0 + t);
                __m512 sum = _mm512_setzero_ps();
                for (int v = 0; v < nv; v++) {
                    const __mmask16 m = v == nv - 1 ? tail : (__mmask16)0xffff;
                    sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + 16 * v), _mm512_maskz_loadu_ps(m, k + 16 * v), sum);
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
        const float sum = exp_sum_avx512(scores, n_kv - lo, _mm512_reduce_max_ps(vmax));
        const float inv = sum > 0 ? 1.0f / sum : 0;
        for (int d0 = 0; d0 < hd; d0 += 64) {
            __m512 e[4], od[4];
            for (int i = 0; i < 4; i++) e[i] = od[i] = _mm512_setzero_ps();
            const int nvd = (hd - d0 + 15) / 16 < 4 ? (hd - d0 + 15) / 16 : 4;
            int t = lo;
            for (; t + 2 <= n_kv; t += 2) {
                const float *v0 = KEY_AT(j->v_cache, t) + d0, *v1 = KEY_AT(j->v_cache, t + 1) + d0;
                const __m512 p0 = _mm512_set1_ps(scores[t - lo]), p1 = _mm512_set1_ps(scores[t + 1 - lo]);
                for (int i = 0; i < nvd; i++) {
                    const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
                    e[i] = _mm512_fmadd_ps(p0, _mm512_maskz_loadu_ps(m, v0 + 16 * i), e[i]);
                    od[i] = _mm512_fmadd_ps(p1, _mm512_maskz_loadu_ps(m, v1 + 16 * i), od[i]);
                }
            }
            if (t < n_kv) {
                const float *v0 = KEY_AT(j->v_cache, t) + d0;
                const __m512 p0 = _mm512_set1_ps(scores[t - lo]);
                for (int i = 0; i < nvd; i++) {
                    const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
                    e[i] = _mm512_fmadd_ps(p0, _mm512_maskz_loadu_ps(m, v0 + 16 * i), e[i]);
                }
            }
            const __m512 vinv = _mm512_set1_ps(inv);
            for (int i = 0; i < nvd; i++) {
                const __mmask16 m = d0 + 16 * i + 16 > hd ? tail : (__mmask16)0xffff;
                _mm512_mask_storeu_ps(o + d0 + 16 * i, m, _mm512_mul_ps(_mm512_add_ps(e[i], od[i]), vinv));
            }
        }
#undef KEY_AT
    }
}

#endif /* __x86_64__ */

/* ---- the task body, once per level ---- */

/* Tasks are dealt round-robin: rows of one sequence see more keys the later
 * they are, and interleaving keeps the threads' shares even. */
#define DEFINE_ATTN_JOB(NAME, TARGET, DOT, EXP_SUM, AXPY)                                  \
    TARGET static void NAME(void *arg, int ith, int nth) {                                 \
        const attn_job *j = arg;                                                            \
        const bk_batch *b = j->b;                                                           \
        const bk_attn *a = j->a;                                                            \
        const int group = a->n_heads / a->n_kv_heads, hd = a->head_dim, bs = a->block_size; \
        const size_t kv_dim = (size_t)a->n_kv_heads * hd;                                   \
        float *scores = j->scores + (size_t)ith * (size_t)j->max_kv_len;                    \
        const long n_tasks = (long)b->n_tokens * a->n_heads;                                \
        for (long task = ith; task < n_tasks; task += nth) {                                \
            const int r = (int)(task / a->n_heads), h = (int)(task % a->n_heads);           \
            const int s = j->row_seq[r];                                                    \
            int n_kv = b->positions[r] + 1;                                                 \
            if (n_kv > b->kv_len[s]) n_kv = b->kv_len[s];                                   \
            const int lo = first_key(a, b->positions[r]);                                   \
            const int32_t *blocks = b->block_table + (size_t)s * b->max_blocks;             \
            const size_t head_off = (size_t)(h / group) * hd;                               \
            const float *q = j->q + ((size_t)r * a->n_heads + h) * hd;                      \
            float *o = j->out + ((size_t)r * a->n_heads + h) * hd;                          \
            float max = -INFINITY;                                                          \
            for (int t0 = lo; t0 < n_kv; t0 = (t0 / bs + 1) * bs) {                         \
                const float *k = j->k_cache + ((size_t)blocks[t0 / bs] * bs + t0 % bs) * kv_dim + head_off; \
                const int n = n_kv - t0 < bs - t0 % bs ? n_kv - t0 : bs - t0 % bs;          \
                for (int t = 0; t < n; t++) {                                               \
                    float sc = DOT(q, k + (size_t)t * kv_dim, hd) * a->scale;               \
                    if (a->softcap > 0) sc = softcap(sc, a->softcap);                       \
                    scores[t0 + t - lo] = sc;                                                     \
                    if (sc > max) max = sc;                                                 \
                }                                                                           \
            }                                                                               \
            const float sum = EXP_SUM(scores, n_kv - lo, max);                              \
            const float inv = sum > 0 ? 1.0f / sum : 0;                                     \
            memset(o, 0, (size_t)hd * sizeof *o);                                           \
            for (int t0 = lo; t0 < n_kv; t0 = (t0 / bs + 1) * bs) {                         \
                const float *v = j->v_cache + ((size_t)blocks[t0 / bs] * bs + t0 % bs) * kv_dim + head_off; \
                const int n = n_kv - t0 < bs - t0 % bs ? n_kv - t0 : bs - t0 % bs;          \
                for (int t = 0; t < n; t++) AXPY(o, scores[t0 + t - lo] * inv, v + (size_t)t * kv_dim, hd); \
            }                                                                               \
        }                                                                                   \
    }

DEFINE_ATTN_JOB(attn_job_c, , dot_c, exp_sum_c, axpy_c)
#if defined(__x86_64__)
DEFINE_ATTN_JOB(attn_job_avx2, T_AVX2, dot_avx2, exp_sum_avx2, axpy_avx2)
#endif

void cpu_attention_run(cpu_pool *pool, const bk_batch *b, const bk_attn *a, const float *q,
                       const float *k_cache, const float *v_cache, float *out, int max_kv_len) {
    int nth = cpu_pool_size(pool);
    if (max_kv_len < 1) max_kv_len = 1;
    size_t score_floats = (size_t)nth * (size_t)max_kv_len;
    float *scratch = cpu_pool_scratch(pool, score_floats * sizeof(float) +
                                                (size_t)b->n_tokens * sizeof(int32_t));
    int32_t *row_seq = (int32_t *)(scratch + score_floats);
    for (int s = 0; s < b->n_seqs; s++)
        for (int r = b->seq_start[s]; r < b->seq_start[s + 1]; r++) row_seq[r] = s;
    attn_job j = {b, a, q, k_cache, v_cache, out, row_seq, scratch, max_kv_len};
    switch (cpu_matmul_level()) {
#if defined(__x86_64__)
    case CPU_SIMD_AVX512: cpu_pool_run(pool, attn_job_avx512, &j); break;
    case CPU_SIMD_AVX2: cpu_pool_run(pool, attn_job_avx2, &j); break;
#endif
    default: cpu_pool_run(pool, attn_job_c, &j); break;
    }
}
