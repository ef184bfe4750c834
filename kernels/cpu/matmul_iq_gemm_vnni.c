/* matmul_iq_gemm_vnni.c — the i-quants' GEMM (matmul_iq_gemm.c) compiled again with
 * AVX-VNNI: each pair sum is one vpdpwssd (ymm, VEX) instead of a madd and an add;
 * the same exact lanes, so the same results. The AVX2 level calls it where cpuid
 * reports AVX-VNNI (mm_avx_vnni). */
#define MM_IQ_AVXVNNI 1
#include "kernels/cpu/matmul_iq_gemm.c"
