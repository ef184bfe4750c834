/* matmul_avx512_f16.h — the AVX-512 level's F16-weight kernel (matmul_avx512_f16.c):
 * vcvtph2ps + f32 FMA, 16 lanes, one order at every T (batched == alone). */
#ifndef LLC_CPU_MATMUL_AVX512_F16_H
#define LLC_CPU_MATMUL_AVX512_F16_H

#include "kernels/cpu/matmul_internal.h"

/* Y rows t0..t1-1, outputs o0..o1-1 (mm_impl.dot_rows). */
void mm_avx512_f16_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1);

/* Batches, through the planner's GEMM hooks: chunks in multiples of
 * mm_avx512_f16_batch_rows(T) rows (0: small T, dot_rows does it); nothing packed;
 * all T rows, outputs o0..o1-1, by the same row loop. */
int mm_avx512_f16_batch_rows(int64_t T);
void mm_avx512_f16_batch(const mm_args *a, int64_t o0, int64_t o1);

#endif
