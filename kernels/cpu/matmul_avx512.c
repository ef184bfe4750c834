/* matmul_avx512.c — the AVX-512 matmul level (F/BW/VL/DQ + VNNI), its GEMV half and
 * its kernel table: the 256-bit dot kernels of matmul_dot256.h with vpdpbusd byte
 * products, 512-bit row dots for Q4_K, Q5_K and Q6_K (whose unpacking dominates), and the
 * blocked GEMM of matmul_avx512_gemm.c for quantized T > 1 (at every T over weights
 * packed ahead); F16 weights take the 512-bit row loop of matmul_avx512_f16.c
 * (vcvtph2ps + f32 FMA) at every T, BF16 on CPUs with AVX512_BF16 that of
 * matmul_avx512_bf16.c (vdpbf16ps), and F32 (and BF16 without it) borrow the AVX2
 * row loop (matmul_avx2_float.c).
 * Compiled for AVX-512 by a target pragma; only called after cpuid says so.
 * Never uses AMX. */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")

#include <immintrin.h>

#include "kernels/cpu/matmul_avx2_float.h"
#include "kernels/cpu/matmul_avx2_gemm.h"
#include "kernels/cpu/matmul_avx512_bf16.h"
#include "kernels/cpu/matmul_avx512_f16.h"
#include "kernels/cpu/matmul_avx512_gemm.h"
#include "kernels/cpu/matmul_iq_gemm.h"
#include "kernels/cpu/matmul_internal.h"

static inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}
static inline __m256i dot_u8s8_acc(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}

#define MM_DOT_Q4_K dot_q4_K_512
#define MM_DOT_Q6_K dot_q6_K_512
#define MM_DOT_Q5_K dot_q5_K_512
static float dot_q4_K_512(const uint8_t *w, const mm_xrow *x, int64_t n);
static float dot_q5_K_512(const uint8_t *w, const mm_xrow *x, int64_t n);
static float dot_q6_K_512(const uint8_t *w, const mm_xrow *x, int64_t n);

#include "kernels/cpu/matmul_dot256.h"

/* Q4_K, 64 elements per step: a 32-byte run of nibbles broadcast to both halves of a
 * zmm, the upper half shifted down 4, is sub-blocks 2r (low) and 2r+1 (high) side by
 * side, in the same order as the activations. */
static float dot_q4_K_512(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 macc = _mm256_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i idx[4];
    for (int r = 0; r < 4; r++)
        idx[r] = _mm512_inserti64x4(_mm512_set1_epi32(2 * r), _mm256_set1_epi32(2 * r + 1), 1);
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q4_K)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        _mm_prefetch((const char *)w + MM_PF_DIST + 64, MM_PF_HINT);
        _mm_prefetch((const char *)w + MM_PF_DIST + 128, MM_PF_HINT);
        const float d = f16(w), dmin = f16(w + 2);
        uint32_t sm[4];
        mm_q4k_scales_u32(w + 4, sm);
        const __m256 scf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sm)));
        const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sm + 2))));
        const __m256 sc = _mm256_mul_ps(_mm256_mul_ps(scf, _mm256_set1_ps(d)), _mm256_loadu_ps(x->d + 8 * i));
        macc = _mm256_fmadd_ps(_mm256_mul_ps(mnf, _mm256_set1_ps(dmin)), _mm256_loadu_ps(x->af + 8 * i), macc);
        const __m512 sc16 = _mm512_castps256_ps512(sc);
        const uint8_t *qs = w + 16;
        const int8_t *qx = x->q + 256 * i;
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) {
            const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * r)));
            const __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xffff0000u, q, 4), m4);
            const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u,
                                                  _mm512_loadu_si512(qx + 64 * r));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_permutexvar_ps(idx[r], sc16), acc[r]);
        }
    }
    /* four accumulators: one chain of dependent FMAs per step would cap the speed */
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    return _mm512_reduce_add_ps(sum) - hsum8(macc);
}

/* Q5_K, as Q4_K's 512-bit kernel, the fifth bits (bit j of qh[l] for sub-block j)
 * shifted per half: bit 2r in the lower, 2r+1 in the upper. */
static float dot_q5_K_512(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 macc = _mm256_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f), one = _mm512_set1_epi8(1);
    __m512i idx[4], hsh[4];
    for (int r = 0; r < 4; r++) {
        idx[r] = _mm512_inserti64x4(_mm512_set1_epi32(2 * r), _mm256_set1_epi32(2 * r + 1), 1);
        hsh[r] = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * r)), _mm256_set1_epi16((short)(2 * r + 1)), 1);
    }
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q5_K)) {
        _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
        _mm_prefetch((const char *)w + MM_PF_DIST + 64, MM_PF_HINT);
        _mm_prefetch((const char *)w + MM_PF_DIST + 128, MM_PF_HINT);
        const float d = f16(w), dmin = f16(w + 2);
        uint32_t sm[4];
        mm_q4k_scales_u32(w + 4, sm);
        const __m256 scf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sm)));
        const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sm + 2))));
        const __m256 sc = _mm256_mul_ps(_mm256_mul_ps(scf, _mm256_set1_ps(d)), _mm256_loadu_ps(x->d + 8 * i));
        macc = _mm256_fmadd_ps(_mm256_mul_ps(mnf, _mm256_set1_ps(dmin)), _mm256_loadu_ps(x->af + 8 * i), macc);
        const __m512 sc16 = _mm512_castps256_ps512(sc);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 16)));
        const uint8_t *qs = w + 48;
        const int8_t *qx = x->q + 256 * i;
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++) {
            const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * r)));
            const __m512i hb = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, hsh[r]), one), 4);
            const __m512i u = _mm512_or_si512(_mm512_and_si512(_mm512_mask_srli_epi16(q, 0xffff0000u, q, 4), m4), hb);
            const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(qx + 64 * r));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_permutexvar_ps(idx[r], sc16), acc[r]);
        }
    }
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    return _mm512_reduce_add_ps(sum) - hsum8(macc);
}

/* Q6_K, 64 elements per step: ql[64h..64h+63] holds in its low nibbles elements
 * 128h..128h+63 and in its high nibbles 128h+64..128h+127, in activation order; the
 * two high bits come from qh shifted by a per-half amount. */
static float dot_q6_K_512(const uint8_t *w, const mm_xrow *x, int64_t n) {
    __m512 acc[5] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    /* 16-bit shift counts: lower half (quarter 0 / 2) and upper half (1 / 3) */
    const __m512i sh_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i sh_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i dx_idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    __m512i gidx[4]; /* step k covers groups 4k..4k+3, four lanes each */
    for (int k = 0; k < 4; k++)
        gidx[k] = _mm512_setr_epi32(4 * k, 4 * k, 4 * k, 4 * k, 4 * k + 1, 4 * k + 1, 4 * k + 1,
                                    4 * k + 1, 4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 2,
                                    4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3);
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q6_K)) {
        for (int l = 0; l < 4; l++) _mm_prefetch((const char *)w + MM_PF_DIST + 64 * l, MM_PF_HINT);
        const float d = f16(w + 208);
        const __m512 scf = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + 192))));
        const __m512 dx = _mm512_permutexvar_ps(dx_idx, _mm512_castps256_ps512(_mm256_loadu_ps(x->d + 8 * i)));
        const __m512 gs = _mm512_mul_ps(_mm512_mul_ps(scf, dx), _mm512_set1_ps(d));
        /* the -32 offsets: Σ_g gs_g · aux_g */
        acc[4] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(x->ai + 16 * i)), gs, acc[4]);
        const int8_t *qx = x->q + 256 * i;
        _Pragma("GCC unroll 4")
        for (int h = 0; h < 2; h++) {
            const __m512i a = _mm512_loadu_si512(w + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h)));
            const __m512i u01 = _mm512_or_si512(_mm512_and_si512(a, m4),
                                                _mm512_and_si512(_mm512_sllv_epi16(qh, sh_lo), m30));
            const __m512i u23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), m4),
                                                _mm512_and_si512(_mm512_srlv_epi16(qh, sh_hi), m30));
            const __m512i s01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u01,
                                                    _mm512_loadu_si512(qx + 128 * h));
            const __m512i s23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u23,
                                                    _mm512_loadu_si512(qx + 128 * h + 64));
            acc[2 * h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s01), _mm512_permutexvar_ps(gidx[2 * h], gs), acc[2 * h]);
            acc[2 * h + 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s23), _mm512_permutexvar_ps(gidx[2 * h + 1], gs),
                                             acc[2 * h + 1]);
        }
    }
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    return _mm512_reduce_add_ps(_mm512_add_ps(sum, acc[4]));
}

/* ---- Q8_0 against a few activation rows at once ------------------------------------ *
 * Each pair of weight blocks is loaded and summed once for all rows; per row, the
 * int8 activations become unsigned (x + 128, an xor of the sign bit) so one vpdpbusd
 * gives Σ(x+128)w, and 128·Σw (one vpdpbusd against ones, per weight pair) is taken
 * off. Lanes 0-7 hold block b, lanes 8-15 block b+1, as the activations lie.
 * Measured on the TinyLlama shapes (2 threads): 51 ms per step at T = 2 against 60
 * for the one-row kernels; from T = 3 on, each row adds ~10 ms and the blocked GEMM
 * (62 ms at T = 3, 83 at T = 8) wins, so gemm_rows hands those over. */
#define MM_Q8_MULTI 8

static void dot_q8_0_rows(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    const int64_t n = a->n_in, nb = n / QK8_0, T = t1 - t0;
    mm_xrow xr[MM_Q8_MULTI];
    for (int64_t t = 0; t < T; t++) xr[t] = mm_xrow_at(a->xq + (size_t)(t0 + t) * a->xq_stride, n);
    const __m512i ones = _mm512_set1_epi8(1), flip = _mm512_set1_epi8((char)0x80);
    const __m512i halves = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    if (o1 > o0)
        for (size_t l = 0; l < MM_PF_DIST; l += 64)
            _mm_prefetch((const char *)a->W + (size_t)o0 * a->w_stride + l, MM_PF_HINT);
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *w = a->W + (size_t)o * a->w_stride;
        __m512 acc[MM_Q8_MULTI];
        for (int64_t t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
        __m256 tail[MM_Q8_MULTI];
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2, w += 2 * sizeof(block_q8_0)) {
            _mm_prefetch((const char *)w + MM_PF_DIST, MM_PF_HINT);
            const __m512i qw = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(w + 2))),
                _mm256_loadu_si256((const __m256i *)(w + sizeof(block_q8_0) + 2)), 1);
            const __m512i corr = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, qw), 7);
            const __m512 dw = _mm512_insertf32x8(_mm512_set1_ps(f16(w)), _mm256_set1_ps(f16(w + sizeof(block_q8_0))), 1);
            for (int64_t t = 0; t < T; t++) {
                const __m512i xu = _mm512_xor_si512(_mm512_loadu_si512(xr[t].q + 32 * b), flip);
                const __m512i s = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xu, qw), corr);
                const __m512 dx = _mm512_permutexvar_ps(
                    halves, _mm512_castps128_ps512(_mm_castpd_ps(_mm_load_sd((const double *)(const void *)(xr[t].d + b)))));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx), acc[t]);
            }
        }
        for (int64_t t = 0; t < T; t++) {
            tail[t] = _mm256_setzero_ps();
            if (b < nb) tail[t] = q8_0_block(w, &xr[t], b, tail[t]);
            a->Y[(t0 + t) * a->n_out + o] = _mm512_reduce_add_ps(acc[t]) + hsum8(tail[t]);
        }
    }
}

/* Row blocks for the pool: the 512-bit row loops for BF16 (with AVX512_BF16) and
 * F16, the AVX2 row loop (3 × 4 register tiles) for the other float weights — each
 * the same loop at every T: see gemm_rows —, the multi-row kernel for Q8_0 with a
 * few rows, else the 256-bit dot kernels. */
static void dot_rows_512(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    if (a->type == QT_BF16 && mm_avx512_bf16) {
        mm_avx512_bf16_rows(a, o0, o1, t0, t1);
        return;
    }
    if (a->type == QT_F16) {
        mm_avx512_f16_rows(a, o0, o1, t0, t1);
        return;
    }
    if (mm_type_is_float(a->type)) {
        mm_avx2_dotf_rows(a, o0, o1, t0, t1);
        return;
    }
    if (a->type == QT_Q8_0 && t1 - t0 >= 2) {
        for (int64_t t = t0; t < t1; t += MM_Q8_MULTI)
            dot_q8_0_rows(a, o0, o1, t, t + MM_Q8_MULTI < t1 ? t + MM_Q8_MULTI : t1);
        return;
    }
    dot_rows_256(a, o0, o1, t0, t1);
}

/* ---- GEMM hooks: quantized weights → gemmq ------------------------------------------- */

/* Below these batch sizes the dot kernels, reading each weight block once from
 * memory and then from cache for every activation row, beat packing the weights
 * (measured on 2048×2048 and 2048×5632; with few rows most GEMM lanes would idle).
 * Float weights: no GEMM; the AVX2 row loop at every T (bench_matmul, TinyLlama
 * shapes, 2 threads, tokens/s from matmuls, the 512-bit float GEMM this level had →
 * the row loop: F16 T=4 33 → 65, T=8 41 → 95, T=16 79 → 101, T=128 ~105 both; BF16
 * T=128 ~5% less; F32 T=8 30 → 58 but T=128 ~104 → ~82), so that a row computes the
 * same at any batch size: embeddings, samples and batched requests do not depend on
 * what else shares the step. Since then F16 and BF16 (with AVX512_BF16) have 512-bit
 * row loops of the same kind, one order per n_in at every T; here only their
 * chunking (whole weight tiles) is chosen. */
static int gemm_rows(uint32_t type, int64_t T) {
    switch (type) {
    case QT_Q8_0: return T >= 3 ? 16 : 0; /* T = 2: dot_q8_0_rows (51 vs 60 ms per step) */
    case QT_Q4_0: return T >= 3 ? 16 : 0;
    case QT_Q4_K:
    case QT_Q6_K:
    case QT_Q2_K:
    case QT_Q3_K: return T >= 4 ? 16 : 0;
    case QT_IQ4_NL: return T >= MM_AVX512_NL_GEMM_MIN_T ? 16 : 0;
    case QT_IQ4_XS: return T >= 4 ? 16 : 0;
    case QT_Q5_K:
    case QT_Q4_1: case QT_Q5_0: case QT_Q5_1: case QT_MXFP4:
        return mm_avx2_gemmq_rows(type, T); /* borrowed, below */
    case QT_F16: return mm_avx512_f16_batch_rows(T); /* nothing packed */
    case QT_BF16: if (mm_avx512_bf16) return mm_avx512_bf16_batch_rows(T); /* activations packed as bf16 */
        /* fall through */
    case QT_F32: return mm_avx2_dotf_batch_rows(T); /* the planner's chunking; BF16's rounded once */
    default: return mm_iq_gemm_rows(type, T); /* the i-quants (matmul_iq_gemm_512.c), else 0 */
    }
}

/* Q5_K has no 512-bit GEMM: batches borrow the AVX2 one (matmul_avx2_gemm.c; this
 * CPU has AVX2), 3× the dot kernels' prompt speed on Q5_K_M files; so do Q4_1, Q5_0,
 * Q5_1, IQ4_NL, IQ4_XS and MXFP4 (3-5× their dot kernels at T = 128). */
static int borrows_avx2(uint32_t type) {
    switch (type) {
    case QT_Q5_K: case QT_Q4_1: case QT_Q5_0: case QT_Q5_1: case QT_MXFP4: return 1;
    default: return 0;
    }
}

/* BF16 weights through vdpbf16ps: the activations packed (rounded to bf16);
 * the i-quants' GEMM packs the quantized rows (x + 128, sub-block pairs interleaved) */
static int bf16_dp(uint32_t type) { return type == QT_BF16 && mm_avx512_bf16; }

static int64_t gemm_groups(uint32_t type, int64_t T) {
    if (bf16_dp(type)) return mm_avx512_bf16_groups(T);
    if (borrows_avx2(type)) return mm_avx2_gemmq_groups(T);
    if (mm_iq_gemm_type(type)) return mm_iq_gemm_groups(T);
    return mm_type_is_float(type) ? mm_avx2_dotf_groups(type, T) : mm_avx512_gemmq_groups(T);
}
static void gemm_group(uint32_t type, int64_t T, int64_t g, int64_t *t0, int64_t *t1) {
    if (bf16_dp(type)) mm_avx512_bf16_group(T, g, t0, t1);
    else if (borrows_avx2(type)) mm_avx2_gemmq_group(T, g, t0, t1);
    else if (mm_iq_gemm_type(type)) mm_iq_gemm_group(T, g, t0, t1);
    else if (mm_type_is_float(type)) mm_avx2_dotf_group(type, T, g, t0, t1);
    else mm_avx512_gemmq_group(T, g, t0, t1);
}
static size_t gemm_xp_bytes(uint32_t type, int64_t n_in, int64_t T) {
    if (bf16_dp(type)) return mm_avx512_bf16_xp_bytes(n_in, T);
    if (borrows_avx2(type)) return mm_avx2_gemmq_xp_bytes(type, n_in, T);
    if (mm_iq_gemm_type(type)) return mm_iq_gemm_xp_bytes(n_in, T);
    return mm_type_is_float(type) ? mm_avx2_dotf_xp_bytes(type, n_in, T) : mm_avx512_gemmq_xp_bytes(type, n_in, T);
}
static void gemm_pack_x(const mm_args *a, int64_t g, uint8_t *xp) {
    if (bf16_dp(a->type)) mm_avx512_bf16_pack_x(a, g, xp);
    else if (borrows_avx2(a->type)) mm_avx2_gemmq_pack_x(a, g, xp);
    else if (mm_iq_gemm_type(a->type)) mm_iq_gemm_pack_x_512(a, g, xp);
    else if (mm_type_is_float(a->type)) mm_avx2_dotf_pack_x(a, g, xp);
    else mm_avx512_gemmq_pack_x(a, g, xp);
}
static size_t gemm_scratch(const mm_args *a, int64_t rows) {
    if (borrows_avx2(a->type)) return mm_avx2_gemmq_scratch(a, rows);
    if (mm_iq_gemm_type(a->type)) return mm_iq_gemm_scratch(a, rows);
    if (a->wp) return 0; /* the panels packed ahead are read in place */
    return mm_type_is_float(a->type) ? 0 : mm_avx512_gemmq_scratch(a->type, a->n_in, rows);
}
static void gemm(const mm_args *a, int64_t o0, int64_t o1, int64_t n0, int64_t n1, void *scratch) {
    if (bf16_dp(a->type)) mm_avx512_bf16_batch(a, o0, o1);
    else if (borrows_avx2(a->type)) mm_avx2_gemmq_any(a, o0, o1, scratch);
    else if (a->type == QT_F16) mm_avx512_f16_batch(a, o0, o1);
    else if (mm_type_is_float(a->type)) mm_avx2_dotf_batch(a, o0, o1);
    else if (mm_iq_gemm_type(a->type)) mm_iq_gemm_avx512(a, o0, o1, scratch);
    else mm_avx512_gemmq(a, o0, o1, scratch);
}

/* With the panels packed ahead there is no packing to amortize: the two-panel
 * kernel reads them at every row count, one row streaming them as fast as the GEMV
 * streams the file's blocks (the K-quants' panels keep their nibbles and six-bit
 * scales packed, 1.06× / 1.01× the file's bytes), so each row's arithmetic is the
 * same at any batch size and the file's pages need not stay resident. */
static int gemm_rows_prepacked(uint32_t type, int64_t T) {
    /* 32: chunks of whole panel pairs for the few-row kernel (IQ4_NL below
     * MM_AVX512_NL_GEMM_MIN_T rows: its dot kernel's lanes, over the same panels) */
    return mm_type_has_gemmq(type) && T >= 1 ? 32 : gemm_rows(type, T);
}

const mm_impl mm_impl_avx512 = {
    .name = "avx512-vnni",
    .quantize_x = quantize_x_256,
    .dot_rows = dot_rows_512,
    .gemm_rows = gemm_rows,
    .gemm_groups = gemm_groups,
    .gemm_group = gemm_group,
    .gemm_xp_bytes = gemm_xp_bytes,
    .gemm_pack_x = gemm_pack_x,
    .gemm_scratch = gemm_scratch,
    .gemm = gemm,
    .gemm_prepack_bytes = mm_avx512_gemmq_prepack_bytes,
    .gemm_prepack = mm_avx512_gemmq_prepack,
    .gemm_rows_prepacked = gemm_rows_prepacked,
};

#pragma GCC pop_options

#endif
