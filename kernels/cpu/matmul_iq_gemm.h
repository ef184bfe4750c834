/* matmul_iq_gemm.h — the i-quants' GEMM for prompts (matmul_iq_gemm.c: IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S at T > 1), as the AVX2 and AVX-512 kernel
 * tables use it. Its results equal the dot kernels' (matmul_dot256.h, dot_iq_t) bit
 * for bit, so a row computes the same in a batch and alone. With VNNI (AVX-VNNI at
 * the AVX2 level, AVX-512 VNNI) it packs the quantized activation rows (x + 128, its
 * sub-block pairs interleaved: mm_iq_gemm_pack_x_256 / _512), groups of 8 rows;
 * plain AVX2 reads them in place (a->xq: one group, nothing packed). */
#ifndef LLC_CPU_MATMUL_IQ_GEMM_H
#define LLC_CPU_MATMUL_IQ_GEMM_H

#include "kernels/cpu/matmul_internal.h"

/* Whether `type` is an i-quant this GEMM serves (the seven of iq_unpack). */
static inline int mm_iq_gemm_type(uint32_t type) {
    return type == QT_IQ2_XXS || type == QT_IQ2_XS || type == QT_IQ2_S || type == QT_IQ3_XXS || type == QT_IQ3_S ||
           type == QT_IQ1_S || type == QT_IQ1_M;
}
/* Output rows per work unit (0: the dot kernels serve this batch size). */
int mm_iq_gemm_rows(uint32_t type, int64_t T);
/* The packed activations (the VNNI kernels): groups, a group's rows, bytes for T rows;
 * pack_x packs group g from a->xq. */
int64_t mm_iq_gemm_groups(int64_t T);
void mm_iq_gemm_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1);
size_t mm_iq_gemm_xp_bytes(int64_t n_in, int64_t T);
void mm_iq_gemm_pack_x_256(const mm_args *a, int64_t g, uint8_t *xp);
void mm_iq_gemm_pack_x_512(const mm_args *a, int64_t g, uint8_t *xp);
/* Per-thread scratch for a chunk of `rows` output rows: the rows unpacked. */
size_t mm_iq_gemm_scratch(const mm_args *a, int64_t rows);
/* Y for outputs [o0, o1) and all T rows. One per instruction set: AVX2 (maddubs and
 * madd, a->xq in place), AVX-VNNI (vpdpbusd, packs, vpdpwssd on ymm, a->xp packed by
 * _256) and AVX-512 VNNI (the same on zmm, two sub-block pairs per vector, larger
 * tiles; a->xp packed by _512); all give the same results. */
void mm_iq_gemm_avx2(const mm_args *a, int64_t o0, int64_t o1, void *scratch);
void mm_iq_gemm_avxvnni(const mm_args *a, int64_t o0, int64_t o1, void *scratch);
void mm_iq_gemm_avx512(const mm_args *a, int64_t o0, int64_t o1, void *scratch);

#endif
