/* elementwise.c — SwiGLU, GELU and gpt-oss's gates, residual add and scaling for the CPU
 * backend (see elementwise.h): one loop body per SIMD level, a pool split by
 * 64-element runs. */
#include "kernels/cpu/elementwise.h"

#include <math.h>

#include "kernels/cpu/matmul.h"
#if defined(__x86_64__)
#include "kernels/cpu/vecmath.h"
#endif

/* below this many elements one thread does it all: waking the pool costs more */
#define EW_PARALLEL_MIN 16384

typedef struct ew_job {
    float *x;
    const float *y;
    size_t n;
    void (*body)(float *x, const float *y, size_t n);
} ew_job;

static void silu_mul_c(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* gelu(x) = 0.5·x·(1 + tanh(u)) = x / (1 + e^(-2u)), u = √(2/π)·(x + 0.044715·x³):
 * the second form needs only the exp the other gates use */
#define GELU_K (-2.0f * 0.79788456080286535588f)
#define GELU_A 0.044715f

static void gelu_mul_c(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float x = g[i];
        g[i] = x / (1.0f + expf(GELU_K * x * (1.0f + GELU_A * x * x))) * u[i];
    }
}

static void add_c(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

#if defined(__x86_64__)
VM_T_AVX2 static void silu_mul_avx2(float *g, const float *u, size_t n) {
    size_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(g + i);
        __m256 e = vm_exp256(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    if (i < n) {
        /* the tail goes through the same vector body (masked), so an element's value
         * does not depend on where the call's range happened to start or end: a row
         * batched with others gives the same bits as the row alone */
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), lane);
        __m256 v = _mm256_maskload_ps(g + i, m);
        __m256 e = vm_exp256(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_maskstore_ps(g + i, m, _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(one, e)), _mm256_maskload_ps(u + i, m)));
    }
}

VM_T_AVX2 static inline __m256 gelu256(__m256 v) {
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_K), v),
                             _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_A), v), v, _mm256_set1_ps(1.0f)));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), vm_exp256(t)));
}

VM_T_AVX2 static void gelu_mul_avx2(float *g, const float *u, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(g + i, _mm256_mul_ps(gelu256(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    if (i < n) { /* masked tail through the same body (see silu_mul_avx2) */
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), lane);
        _mm256_maskstore_ps(g + i, m, _mm256_mul_ps(gelu256(_mm256_maskload_ps(g + i, m)), _mm256_maskload_ps(u + i, m)));
    }
}

VM_T_AVX512 static inline __m512 gelu512(__m512 v) {
    __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(GELU_K), v),
                             _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(GELU_A), v), v, _mm512_set1_ps(1.0f)));
    return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), vm_exp512(t)));
}

VM_T_AVX512 static void gelu_mul_avx512(float *g, const float *u, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(g + i, _mm512_mul_ps(gelu512(_mm512_loadu_ps(g + i)), _mm512_loadu_ps(u + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(gelu512(_mm512_maskz_loadu_ps(m, g + i)), _mm512_maskz_loadu_ps(m, u + i)));
    }
}

VM_T_AVX512 static void silu_mul_avx512(float *g, const float *u, size_t n) {
    size_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(g + i);
        __m512 e = vm_exp512(_mm512_sub_ps(_mm512_setzero_ps(), v));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(_mm512_div_ps(v, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, g + i);
        __m512 e = vm_exp512(_mm512_sub_ps(_mm512_setzero_ps(), v));
        _mm512_mask_storeu_ps(g + i, m,
                              _mm512_mul_ps(_mm512_div_ps(v, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, u + i)));
    }
}
#endif

static void ew_work(void *arg, int ith, int nth) {
    const ew_job *j = arg;
    /* runs of whole 64-element groups, so the vector bodies see the same split of
     * every element into vector and tail as a single thread would */
    long lo, hi;
    cpu_split((long)((j->n + 63) / 64), ith, nth, &lo, &hi);
    size_t a = (size_t)lo * 64, b = (size_t)hi * 64 < j->n ? (size_t)hi * 64 : j->n;
    if (a < b) j->body(j->x + a, j->y + a, b - a);
}

static void ew_run(cpu_pool *pool, void (*body)(float *, const float *, size_t), float *x, const float *y,
                   size_t n) {
    ew_job j = {x, y, n, body};
    if (pool && n >= EW_PARALLEL_MIN && cpu_pool_size(pool) > 1) cpu_pool_run(pool, ew_work, &j);
    else body(x, y, n);
}

void cpu_silu_mul_run(cpu_pool *pool, float *gate, const float *up, size_t n) {
    void (*body)(float *, const float *, size_t) = silu_mul_c;
#if defined(__x86_64__)
    switch (cpu_matmul_level()) {
    case CPU_SIMD_AVX512: body = silu_mul_avx512; break;
    case CPU_SIMD_AVX2: body = silu_mul_avx2; break;
    default: break;
    }
#endif
    ew_run(pool, body, gate, up, n);
}

void cpu_gelu_mul_run(cpu_pool *pool, float *gate, const float *up, size_t n) {
    void (*body)(float *, const float *, size_t) = gelu_mul_c;
#if defined(__x86_64__)
    switch (cpu_matmul_level()) {
    case CPU_SIMD_AVX512: body = gelu_mul_avx512; break;
    case CPU_SIMD_AVX2: body = gelu_mul_avx2; break;
    default: break;
    }
#endif
    ew_run(pool, body, gate, up, n);
}

void cpu_swiglu_oai_run(float *gate, const float *up, size_t n, float alpha, float limit) {
    for (size_t i = 0; i < n; i++) {
        const float g = fminf(gate[i], limit), u = fminf(fmaxf(up[i], -limit), limit);
        gate[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

void cpu_scale_run(float *x, float s, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= s; /* one multiply: the same in every lane */
}

void cpu_add_run(cpu_pool *pool, float *x, const float *y, size_t n) {
    ew_run(pool, add_c, x, y, n); /* the compiler vectorizes this loop */
}
