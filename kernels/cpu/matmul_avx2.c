/* matmul_avx2.c — the AVX2 matmul level (AVX2 + FMA + F16C) and its kernel table:
 *  - quantized weights: the 256-bit dot-product kernels of matmul_dot256.h with
 *    maddubs/madd byte products (with AVX-VNNI, the types of vnni_dot_type through
 *    matmul_avxvnni_dot.c's vpdpbusd build), for one row and few rows and for the
 *    types without a GEMM at every T (the rows of a chunk stay in cache while the
 *    activation rows pass), and the blocked GEMM of matmul_avx2_gemm.c for Q8_0,
 *    Q4_0, Q4_K, Q5_K and Q6_K at larger T; Q8_0's panels may be packed ahead, and
 *    the GEMM then serves it at every T (one row included); the i-quants' GEMM
 *    (matmul_iq_gemm.c, bit-identical to their dot kernels) from T = 4;
 *  - float weights (F32, F16, BF16): matmul_avx2_float.c's row loop at every T,
 *    over L2-sized blocks of activation rows for prompts (batched == alone); it
 *    takes the GEMM hooks for the planner's chunking, and packs only BF16's
 *    activations (rounded to bf16, as every level multiplies BF16 weights).
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
#include "kernels/cpu/matmul_avx2_gemm.h"
#include "kernels/cpu/matmul_avx2_float.h"
#include "kernels/cpu/matmul_iq_gemm.h"

void mm_avxvnni_dot_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1);

/* ---- routing by weight type: float → the row loop, quantized → gemmq ------------ */

/* Types whose dot kernels take AVX-VNNI's vpdpbusd where the CPU has it
 * (matmul_avxvnni_dot.c): the same exact integer sums, so the same results. */
static int vnni_dot_type(uint32_t type) {
    switch (type) {
    case QT_Q2_K: case QT_Q3_K: case QT_IQ4_NL:
    case QT_Q8_0: case QT_Q4_0: case QT_Q4_1: case QT_Q5_0: case QT_Q5_1: case QT_MXFP4: return 1;
    default: return 0;
    }
}

static void dot_rows_avx2(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    if (mm_type_is_float(a->type)) mm_avx2_dotf_rows(a, o0, o1, t0, t1);
    else if (mm_avx_vnni && vnni_dot_type(a->type)) mm_avxvnni_dot_rows(a, o0, o1, t0, t1);
    else dot_rows_quant_256(a, o0, o1, t0, t1);
}
/* (the i-quants' GEMM: with AVX-VNNI it packs the quantized rows, groups of 8; plain,
 * it reads them in place: one group, nothing packed) */
static int iq_packs_x(uint32_t type) { return mm_iq_gemm_type(type) && mm_avx_vnni; }
static int gemm_rows_avx2(uint32_t type, int64_t T) {
    if (mm_iq_gemm_type(type)) return mm_iq_gemm_rows(type, T);
    return mm_type_is_float(type) ? mm_avx2_dotf_batch_rows(T) : mm_type_is_quant(type) ? mm_avx2_gemmq_rows(type, T) : 0;
}
static int64_t gemm_groups_avx2(uint32_t type, int64_t T) {
    return mm_type_is_float(type)  ? mm_avx2_dotf_groups(type, T)
           : iq_packs_x(type)      ? mm_iq_gemm_groups(T)
           : mm_iq_gemm_type(type) ? 1
           : mm_type_is_quant(type) ? mm_avx2_gemmq_groups(T) : 0;
}
static void gemm_group_avx2(uint32_t type, int64_t T, int64_t g, int64_t *t0, int64_t *t1) {
    if (mm_type_is_float(type)) mm_avx2_dotf_group(type, T, g, t0, t1);
    else if (iq_packs_x(type)) mm_iq_gemm_group(T, g, t0, t1);
    else if (mm_iq_gemm_type(type)) *t0 = 0, *t1 = T;
    else if (mm_type_is_quant(type)) mm_avx2_gemmq_group(T, g, t0, t1);
}
static size_t gemm_xp_bytes_avx2(uint32_t type, int64_t n_in, int64_t T) {
    if (iq_packs_x(type)) return mm_iq_gemm_xp_bytes(n_in, T);
    if (mm_iq_gemm_type(type)) return 0; /* (read in place) */
    return mm_type_is_quant(type) ? mm_avx2_gemmq_xp_bytes(type, n_in, T) : mm_avx2_dotf_xp_bytes(type, n_in, T);
}
static void gemm_pack_x_avx2(const mm_args *a, int64_t g, uint8_t *xp) {
    if (iq_packs_x(a->type)) mm_iq_gemm_pack_x_256(a, g, xp);
    else if (mm_iq_gemm_type(a->type)) return;
    else if (mm_type_is_quant(a->type)) mm_avx2_gemmq_pack_x(a, g, xp);
    else mm_avx2_dotf_pack_x(a, g, xp);
}
static size_t gemm_scratch_avx2(const mm_args *a, int64_t rows) {
    if (mm_iq_gemm_type(a->type)) return mm_iq_gemm_scratch(a, rows);
    return mm_type_is_quant(a->type) ? mm_avx2_gemmq_scratch(a, rows) : 0;
}
static void gemm_avx2(const mm_args *a, int64_t o0, int64_t o1, int64_t n0, int64_t n1, void *scratch) {
    if (mm_type_is_float(a->type)) mm_avx2_dotf_batch(a, o0, o1);
    else if (mm_iq_gemm_type(a->type) && mm_avx_vnni) mm_iq_gemm_avxvnni(a, o0, o1, scratch);
    else if (mm_iq_gemm_type(a->type)) mm_iq_gemm_avx2(a, o0, o1, scratch);
    else if (mm_type_is_quant(a->type)) mm_avx2_gemmq_any(a, o0, o1, scratch);
}

const mm_impl mm_impl_avx2 = {
    .name = "avx2",
    .quantize_x = quantize_x_256,
    .dot_rows = dot_rows_avx2,
    .gemm_rows = gemm_rows_avx2,
    .gemm_groups = gemm_groups_avx2,
    .gemm_group = gemm_group_avx2,
    .gemm_xp_bytes = gemm_xp_bytes_avx2,
    .gemm_pack_x = gemm_pack_x_avx2,
    .gemm_scratch = gemm_scratch_avx2,
    .gemm = gemm_avx2,
    .gemm_prepack_bytes = mm_avx2_gemmq_prepack_bytes,
    .gemm_prepack = mm_avx2_gemmq_prepack,
    .gemm_rows_prepacked = mm_avx2_gemmq_rows_prepacked,
};

#pragma GCC pop_options

#endif
