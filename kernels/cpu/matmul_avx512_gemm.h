/* matmul_avx512_gemm.h — the AVX-512 blocked GEMM for quantized weights
 * (matmul_avx512_gemm.c, "gemmq"), as used by the AVX-512 level's kernel table in
 * matmul_avx512.c; see the gemm hooks of mm_impl in matmul_internal.h for what each
 * does. (Float weights use the AVX2 row loop at this level: matmul_avx2_float.h.) */
#ifndef LLC_CPU_MATMUL_AVX512_GEMM_H
#define LLC_CPU_MATMUL_AVX512_GEMM_H

#include "kernels/cpu/matmul_internal.h"

/* IQ4_NL's rows from which the GEMM's arithmetic takes over from the dot kernel's
 * (gemm_rows); below, the panels packed ahead give the dot kernel's results. */
#define MM_AVX512_NL_GEMM_MIN_T 4

int64_t mm_avx512_gemmq_groups(int64_t T);
void mm_avx512_gemmq_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1);
size_t mm_avx512_gemmq_xp_bytes(uint32_t type, int64_t n_in, int64_t T);
void mm_avx512_gemmq_pack_x(const mm_args *a, int64_t g, uint8_t *xp);
size_t mm_avx512_gemmq_scratch(uint32_t type, int64_t n_in, int64_t rows);
void mm_avx512_gemmq(const mm_args *a, int64_t o0, int64_t o1, void *scratch);
size_t mm_avx512_gemmq_prepack_bytes(uint32_t type, int64_t n_in, int64_t n_out);
void mm_avx512_gemmq_prepack(const mm_args *a, int64_t p0, int64_t p1, uint8_t *wp);

#endif
