/* matmul_avx2_gemm_f.h — the AVX2 level's float-weight (F32, F16, BF16) kernels of
 * matmul_avx2_gemm_f.c: the row loop used at small T ("dotf") and the blocked GEMM
 * ("gemmf"), both computing every output in the same order, so a batched row equals
 * the row alone bit for bit. See the gemm hooks of mm_impl in matmul_internal.h for
 * what each gemm function does. */
#ifndef LLC_CPU_MATMUL_AVX2_GEMM_F_H
#define LLC_CPU_MATMUL_AVX2_GEMM_F_H

#include "kernels/cpu/matmul_internal.h"

void mm_avx2_dotf_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1);

int mm_avx2_gemmf_rows(int64_t T);
int64_t mm_avx2_gemmf_groups(int64_t T);
void mm_avx2_gemmf_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1);
size_t mm_avx2_gemmf_xp_bytes(int64_t n_in, int64_t T);
void mm_avx2_gemmf_pack_x(const mm_args *a, int64_t g, uint8_t *xp);
size_t mm_avx2_gemmf_scratch(int64_t n_in, int64_t rows);
void mm_avx2_gemmf(const mm_args *a, int64_t o0, int64_t o1, int64_t n0, int64_t n1, void *scratch);

#endif
