/* matmul_avx512_util.h — small AVX-512 helpers shared by the GEMM files: the 16×16
 * transpose of 32-bit elements and row masks. Include only from files compiled with
 * an AVX-512 target pragma. */
#ifndef LLC_CPU_MATMUL_AVX512_UTIL_H
#define LLC_CPU_MATMUL_AVX512_UTIL_H

#include <immintrin.h>

#define MM_AI static inline __attribute__((always_inline))

/* mask of the first n (0..16) lanes */
MM_AI __mmask16 row_mask(int n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* r[i] lane j → r[j] lane i */
MM_AI void tr16(__m512 r[16]) {
    __m512 t[16];
    _Pragma("GCC unroll 16")
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    _Pragma("GCC unroll 16")
    for (int i = 0; i < 4; i++) {
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    /* now r[4i+j] lane L = column 4L+j of rows 4i..4i+3: transpose the 128-bit lanes */
    _Pragma("GCC unroll 16")
    for (int j = 0; j < 4; j++) {
        const __m512 u0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);
        const __m512 u1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xee);
        const __m512 u2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
        const __m512 u3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xee);
        t[j] = _mm512_shuffle_f32x4(u0, u2, 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(u0, u2, 0xdd);
        t[8 + j] = _mm512_shuffle_f32x4(u1, u3, 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(u1, u3, 0xdd);
    }
    _Pragma("GCC unroll 16")
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

#endif
