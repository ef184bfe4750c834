/* matmul_avxvnni_dot.c — the AVX2 level's dot kernels (matmul_dot256.h) compiled a
 * second time with AVX-VNNI: each u8 × s8 sum of 8 × 4 products is one vpdpbusd (ymm,
 * VEX) instead of maddubs and a madd. Same activations and exact integer sums, so
 * the same results; matmul_avx2.c calls mm_avxvnni_dot_rows for the types it lists
 * (vnni_dot_type) where cpuid reports AVX-VNNI (mm_avx_vnni). IQ4_NL's rows go four
 * at a time here (MM_DOT256_U8_FULL), the same bits as its one-row kernel. */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")

#include <immintrin.h>

static inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
}
static inline __m256i dot_u8s8_acc(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
}

#define MM_DOT256_U8_FULL /* vpdpbusd never saturates: IQ4_NL four rows at a time, level + 128 */
#include "kernels/cpu/matmul_dot256.h"

void mm_avxvnni_dot_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1);
void mm_avxvnni_dot_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    dot_rows_quant_256(a, o0, o1, t0, t1);
}

#pragma GCC pop_options

#endif
