/* matmul_avxvnni_gemm.c — the AVX2 level's blocked GEMM (matmul_avx2_gemm.c) compiled
 * a second time with AVX-VNNI: its u8 × s8 sums take one vpdpbusd (ymm, VEX) instead
 * of maddubs, an int16 add and a madd per 8 × 4 products. Same panels, activations
 * and exact integer sums, so the same results; matmul_avx2.c calls it (through
 * mm_avx2_gemmq_any) where cpuid reports AVX-VNNI (mm_avx_vnni). Only the driver
 * (with kern_nib, the nibble kernel of IQ4_NL, IQ4_XS and MXFP4 that only this build
 * has) is used from here; the rest keeps the AVX2 build's, which reads mm_avx_vnni
 * to pack those types' panels and activations for it. */
#if defined(__x86_64__)
#define MM_AVX2_VNNI 1
#define mm_avx2_gemmq_rows mm_avxvnni_gemmq_rows_
#define mm_avx2_gemmq_groups mm_avxvnni_gemmq_groups_
#define mm_avx2_gemmq_group mm_avxvnni_gemmq_group_
#define mm_avx2_gemmq_xp_bytes mm_avxvnni_gemmq_xp_bytes_
#define mm_avx2_gemmq_pack_x mm_avxvnni_gemmq_pack_x_
#define mm_avx2_gemmq_scratch mm_avxvnni_gemmq_scratch_
#define mm_avx2_gemmq_prepack_bytes mm_avxvnni_gemmq_prepack_bytes_
#define mm_avx2_gemmq_prepack mm_avxvnni_gemmq_prepack_
#define mm_avx2_gemmq_rows_prepacked mm_avxvnni_gemmq_rows_prepacked_
#define mm_avx2_gemmq mm_avxvnni_gemmq
#include "kernels/cpu/matmul_avx2_gemm.c"
#endif
