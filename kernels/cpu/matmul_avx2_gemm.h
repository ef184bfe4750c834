/* matmul_avx2_gemm.h — the AVX2 level's blocked GEMM for quantized weights at T > 1
 * (matmul_avx2_gemm.c, "gemmq"), as used by the kernel table in matmul_avx2.c; see
 * the gemm hooks of mm_impl in matmul_internal.h for what each does. */
#ifndef LLC_CPU_MATMUL_AVX2_GEMM_H
#define LLC_CPU_MATMUL_AVX2_GEMM_H

#include "kernels/cpu/matmul_internal.h"

int mm_avx2_gemmq_rows(uint32_t type, int64_t T); /* 0: not this type / batch size */
int64_t mm_avx2_gemmq_groups(int64_t T);
void mm_avx2_gemmq_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1);
size_t mm_avx2_gemmq_xp_bytes(uint32_t type, int64_t n_in, int64_t T);
void mm_avx2_gemmq_pack_x(const mm_args *a, int64_t g, uint8_t *xp);
size_t mm_avx2_gemmq_scratch(const mm_args *a, int64_t rows);
void mm_avx2_gemmq(const mm_args *a, int64_t o0, int64_t o1, void *scratch);
/* Q8_0's panels packed ahead (int8 and f16 scales: the file's size); the gemm_prepack hooks */
size_t mm_avx2_gemmq_prepack_bytes(uint32_t type, int64_t n_in, int64_t n_out);
void mm_avx2_gemmq_prepack(const mm_args *a, int64_t p0, int64_t p1, uint8_t *wp);
int mm_avx2_gemmq_rows_prepacked(uint32_t type, int64_t T);
/* mm_avx2_gemmq with AVX-VNNI's vpdpbusd (matmul_avxvnni_gemm.c): the same panels,
 * activations and results; only where mm_avx_vnni says the CPU has it */
void mm_avxvnni_gemmq(const mm_args *a, int64_t o0, int64_t o1, void *scratch);
static inline void mm_avx2_gemmq_any(const mm_args *a, int64_t o0, int64_t o1, void *scratch) {
    if (mm_avx_vnni) mm_avxvnni_gemmq(a, o0, o1, scratch);
    else mm_avx2_gemmq(a, o0, o1, scratch);
}

#endif
