/* matmul_iq_gemm_512.c — the i-quants' GEMM (matmul_iq_gemm.c) compiled again for the
 * AVX-512 level: 512-bit tiles (two sub-blocks per zmm, halves added at the superblock's
 * end), maddubs + vpdpwssd on zmm and, with 32 vector registers, 4 × 4 tiles of weight
 * and activation rows; the same exact lanes, so the same results as the dot kernels. */
#define MM_IQ_AVX512 1
#include "kernels/cpu/matmul_iq_gemm.c"
