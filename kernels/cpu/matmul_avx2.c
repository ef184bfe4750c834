/* matmul_avx2.c — the AVX2 matmul level (AVX2 + FMA + F16C): the 256-bit dot-product
 * kernels of matmul_dot256.h with maddubs/madd byte products (no VNNI), used for
 * every T (the rows of a chunk stay in cache while the activation rows pass).
 * Compiled for AVX2 by a target pragma; only called after cpuid says so. */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>

/* Σ over 4-byte groups of u8 × s8 → 8 int32 lanes; the callers keep |u·s| pairs
 * below 32768 so maddubs never saturates. */
static inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
static inline __m256i dot_u8s8_acc(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, dot_u8s8(u, s));
}

#include "kernels/cpu/matmul_dot256.h"

const mm_impl mm_impl_avx2 = {
    .name = "avx2",
    .quantize_x = quantize_x_256,
    .dot_rows = dot_rows_256,
};

#pragma GCC pop_options

#endif
