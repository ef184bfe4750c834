/* matmul_avx512_bf16.h — the AVX-512 level's BF16-weight kernels with vdpbf16ps
 * (matmul_avx512_bf16.c), for CPUs with AVX512_BF16 (mm_avx512_bf16): the
 * activations rounded to bf16, one arithmetic at every T (batched == alone). */
#ifndef LLC_CPU_MATMUL_AVX512_BF16_H
#define LLC_CPU_MATMUL_AVX512_BF16_H

#include "kernels/cpu/matmul_internal.h"

/* Y rows t0..t1-1, outputs o0..o1-1 (mm_impl.dot_rows), rounding X as it is read. */
void mm_avx512_bf16_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1);

/* Batches, through the planner's GEMM hooks: chunks in multiples of
 * mm_avx512_bf16_batch_rows(T) rows (0: small T, dot_rows does it); the activations
 * rounded to bf16 into a->xp group by group (mm_avx512_bf16_pack_x); then all T rows,
 * outputs o0..o1-1. */
int mm_avx512_bf16_batch_rows(int64_t T);
int64_t mm_avx512_bf16_groups(int64_t T);
void mm_avx512_bf16_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1);
size_t mm_avx512_bf16_xp_bytes(int64_t n_in, int64_t T);
void mm_avx512_bf16_pack_x(const mm_args *a, int64_t g, uint8_t *xp);
void mm_avx512_bf16_batch(const mm_args *a, int64_t o0, int64_t o1);

#endif
