/* matmul_avx2_float.h — the AVX2 level's float-weight (F32, F16, BF16) kernels of
 * matmul_avx2_float.c: one row loop ("dotf"), which computes every output in the same
 * order at any T, so a batched row equals the row alone bit for bit. */
#ifndef LLC_CPU_MATMUL_AVX2_FLOAT_H
#define LLC_CPU_MATMUL_AVX2_FLOAT_H

#include "kernels/cpu/matmul_internal.h"

/* Y rows t0..t1-1, outputs o0..o1-1 (mm_impl.dot_rows), the activation rows taken
 * in L2-sized blocks. The AVX-512 level borrows it for float weights below 32 rows. */
void mm_avx2_dotf_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1);

/* Prompt-sized batches, through the planner's GEMM path (its chunks of up to 128
 * rows, multiples of what mm_avx2_dotf_batch_rows returns; 0: small T, use dot_rows):
 * all T rows, outputs o0..o1-1. BF16's activations are rounded to bf16 once into a->xp
 * (f32, in groups: mm_avx2_dotf_groups / _group / _xp_bytes / _pack_x); F32 and F16
 * pack nothing (0 bytes, one group). */
int mm_avx2_dotf_batch_rows(int64_t T);
int64_t mm_avx2_dotf_groups(uint32_t type, int64_t T);
void mm_avx2_dotf_group(uint32_t type, int64_t T, int64_t g, int64_t *t0, int64_t *t1);
size_t mm_avx2_dotf_xp_bytes(uint32_t type, int64_t n_in, int64_t T);
void mm_avx2_dotf_pack_x(const mm_args *a, int64_t g, uint8_t *xp);
void mm_avx2_dotf_batch(const mm_args *a, int64_t o0, int64_t o1);

#endif
