/* matmul_iq_gemm.c — the i-quants' GEMM (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S) for T > 1, identical bit for bit to their dot kernel (matmul_dot256.h,
 * dot_iq_t), which decodes the grid per activation row; here each weight row is
 * decoded once per call and every activation row then runs over plain bytes.
 *
 * The dot kernel, per 256-superblock i, builds 8 int32 lanes: lane j = Σ over the 8
 * sub-blocks of mul · Σ lv·q over the sub-block's elements 4j..4j+3 (mul = 2s+1 per
 * 16 elements: lanes 0-3 and 4-7), converts them to float and adds them with one fma,
 * scaled by (d · d_x) · 1/div, into accumulator a0 (even i) or a1 (odd i); the row is
 * hsum8(a0 + a1). The lanes are exact integers, so any exact way to the same lanes
 * gives the same float result; the float steps are then done in the same order.
 *
 * The levels of a sub-block (32 signed bytes lv) come from the dot kernels' grid
 * gathers and sign patterns (decode_sub: exactly iq_unpack's lv and mul). The
 * activations enter as u8, x + 128 (an xor). Two ways to the lanes:
 *
 * Plain AVX2 (no VNNI): rows unpacked to int8 lv[256], int16 m[8][16] (8 × mul of each
 * half: the madd partner), int32 corr[8]. maddubs(x + 128, lv) has pairs
 * |(x+128)·lv| <= 2·255·62 = 31620 (no saturation) and madd with m gives the lanes
 * plus 128·Σ mul·lv, which corr takes off: the int accumulators start at -corr. Two
 * multiply instructions per 32 products. The activations are read in place (xq).
 *
 * AVX-VNNI and AVX-512 VNNI ("pairs"): sub-blocks by pairs (a, b), their 4-byte groups
 * interleaved, A = a0 b0 a1 b1 | a4 b4 a5 b5 and B = a2 b2 a3 b3 | a6 b6 a7 b7
 * (unpacklo/hi_epi32), weights at unpack time and activations once per call
 * (pack_x, flipped to x + 128 there too). One vpdpbusd gives 8 four-element sums
 * Σ (x+128)·lv, starting from -128·Σ lv (stored per row: the bias off), so each is
 * Σ x·lv exactly, |.| <= 4·128·62 = 31744: it fits int16, and packs_epi32(A, B)
 * (no saturation) lays them out a0 b0 a1 b1 a2 b2 a3 b3 | a4 b4 ... b7, which one
 * vpdpwssd with (mul_a, mul_b) pairs turns into the 8 lanes of both sub-blocks:
 * three multiply instructions per 64 products instead of four (the multiply ports
 * bound this loop), the pack on a shuffle port.
 *
 * A chunk's rows are unpacked IQ_SUB_ROWS at a time (fewer for long rows: sub_rows);
 * the activations then pass over them IQ_T_BLOCK rows at a time (a block small enough
 * to stay in L1 while every unpacked row runs over it), the rows IQ_R at a time and
 * the block's rows IQ_C at a time, their int sums in registers; superblocks by pairs,
 * so the even and odd float accumulators are fixed. (Each weight row passing over all
 * T activation rows, as before, streamed the whole packed activations from L2/L3 per
 * row, a byte per product, and two threads slowed each other ~1.4×:
 * docs/PERFORMANCE.md, "activations in L1-sized blocks".) At AVX-512 the vectors are
 * 512 bits: a zmm holds two sub-block pairs, its halves the lanes of pairs (0,1),
 * (4,5) and (2,3), (6,7), added at the superblock's end (the same exact integers); activation rows go
 * by pairs there, one in each half of a zmm, through the convert, scale and fma, lane
 * for lane the dot kernel's float steps.
 * This file is compiled three times: plain AVX2 here, and by matmul_iq_gemm_vnni.c
 * (MM_IQ_AVXVNNI) and matmul_iq_gemm_512.c (MM_IQ_AVX512), which take the pairs and
 * change the vector width and tiles. */
#if defined(__x86_64__)

#pragma GCC push_options
#if defined(MM_IQ_AVX512)
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#define IQ_GEMM mm_iq_gemm_avx512
#define IQ_PACK_X mm_iq_gemm_pack_x_512
#define IQ_PAIRS 1
#define IQ_VW 64 /* vector bytes */
#define IQ_R 4   /* weight rows per tile (32 vector registers) */
#define IQ_C 4   /* activation rows per tile */
#define IQ_X_IN_REGS 1 /* a tile's activations all in registers */
#define IQ_T_BLOCK 16  /* activation rows per pass over the unpacked rows */
#elif defined(MM_IQ_AVXVNNI)
#pragma GCC target("avx2,fma,f16c,avxvnni")
#define IQ_GEMM mm_iq_gemm_avxvnni
#define IQ_PACK_X mm_iq_gemm_pack_x_256
#define IQ_PAIRS 1
#define IQ_VW 32
#define IQ_R 1 /* (16 registers: a row's fields in registers, 4 activation rows over them; */
#define IQ_C 4 /*  measured against 2 × 4, 2 × 2, 3 × 2, 1 × 6 and 1 × 8) */
#define IQ_X_IN_REGS 0
#define IQ_T_BLOCK 8
#else
#pragma GCC target("avx2,fma,f16c")
#define IQ_GEMM mm_iq_gemm_avx2
#define IQ_PAIRS 0
#define IQ_VW 32
#define IQ_R 2
#define IQ_C 4
#define IQ_T_BLOCK 8
#endif
#define IQ_SUB_ROWS 32 /* weight rows unpacked at a time, at most (~160 KB at n_in 2048) */
#define IQ_SUB_BYTES (512 * 1024) /* ... and their bytes, at most: half a 1 MiB L2 */
#define SB_MAX 640     /* bytes of an unpacked superblock in any build (SB below) */

#include <immintrin.h>

#include "kernels/cpu/matmul_iq_gemm.h"
#include "kernels/iq_tables.h"

#define AI static inline __attribute__((always_inline))

/* 1/div of the dot kernel's scale */
static float inv_div_of(uint32_t type) { return type == QT_IQ3_S ? 1.0f : type == QT_IQ3_XXS ? 0.25f : 0.125f; }

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Packed activation rows (the pairs' layout): per superblock its 256 bytes x + 128,
 * interleaved as the weights, then the superblocks' d_x (floats); 64-byte aligned. */
static size_t xp_row_bytes(int64_t n_in) { return round64((size_t)n_in + 4 * (size_t)(n_in / QK_K)); }

#if !IQ_PAIRS /* (once, in the plain build) */
/* From 4 rows: decoding a row costs about one dot-kernel row, and each further
 * activation row then runs several times faster than the dot kernel's. */
int mm_iq_gemm_rows(uint32_t type, int64_t T) { return mm_iq_gemm_type(type) && T >= 4 ? 4 : 0; }

/* The packed activations: groups of 8 rows (each packed where it was quantized). */
int64_t mm_iq_gemm_groups(int64_t T) { return (T + 7) / 8; }
void mm_iq_gemm_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1) {
    *t0 = 8 * g;
    *t1 = 8 * g + 8 < T ? 8 * g + 8 : T;
}
size_t mm_iq_gemm_xp_bytes(int64_t n_in, int64_t T) { return (size_t)T * xp_row_bytes(n_in) + 64; }

size_t mm_iq_gemm_scratch(const mm_args *a, int64_t rows) {
    (void)rows; /* (sub_rows rows at a time, in any build: at most IQ_SUB_ROWS rows, and
                 * at most IQ_SUB_BYTES unless IQ_R rows (4 or fewer) are more) */
    const int64_t nsb = a->n_in / QK_K;
    const size_t rb = (size_t)nsb * SB_MAX + round64(4 * (size_t)nsb);
    const size_t cap = IQ_SUB_BYTES > 4 * rb ? IQ_SUB_BYTES : 4 * rb;
    return (IQ_SUB_ROWS * rb < cap ? IQ_SUB_ROWS * rb : cap) + 64;
}
#endif

/* ---- decoding a superblock (the dot kernels' gathers: matmul_dot256.h) ---------------
 * Each sub-block (32 elements) becomes its 32 signed levels in one vector and its two
 * multipliers (per 16 elements); exactly iq_unpack's lv and mul (quant.c). */

/* four ±1 sign patterns from 7-bit indices at bits 0, 7, 14, 21 of a */
AI __m256i signs7(uint32_t a) {
    return _mm256_set_epi64x((long long)iq_signs_pm1[(a >> 21) & 127], (long long)iq_signs_pm1[(a >> 14) & 127],
                             (long long)iq_signs_pm1[(a >> 7) & 127], (long long)iq_signs_pm1[a & 127]);
}
AI __m256i grid64(const uint64_t *grid, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    return _mm256_set_epi64x((long long)grid[i3], (long long)grid[i2], (long long)grid[i1], (long long)grid[i0]);
}
/* 8 four-byte entries; h: bit j is bit 8 of index j (IQ3_S; 0 for IQ3_XXS) */
AI __m256i grid32(const uint32_t *grid, const uint8_t *q, unsigned h) {
    return _mm256_set_epi32((int)grid[q[7] | (h << 1 & 256)], (int)grid[q[6] | (h << 2 & 256)],
                            (int)grid[q[5] | (h << 3 & 256)], (int)grid[q[4] | (h << 4 & 256)],
                            (int)grid[q[3] | (h << 5 & 256)], (int)grid[q[2] | (h << 6 & 256)],
                            (int)grid[q[1] | (h << 7 & 256)], (int)grid[q[0] | (h << 8 & 256)]);
}
/* v negated where bit j of the 32 bits at p is set */
AI __m256i negate_bits(__m256i v, const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, 4);
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i m = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread), bit), bit);
    return _mm256_sub_epi8(_mm256_xor_si256(v, m), m);
}
/* IQ1 levels 8·g + δ (g the grid's -1, 0, 1; δ = ±1 per group of 8, the bytes of delta) */
AI __m256i iq1_levels(__m256i g, __m256i delta) {
    return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
}
AI uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Sub-block ib of the superblock at b: its levels; *m0, *m1 its two multipliers. */
AI __m256i decode_sub(uint32_t type, const uint8_t *b, int ib, int *m0, int *m1) {
    switch (type) {
    case QT_IQ2_XXS: {
        const uint32_t a0 = rd32(b + 2 + 8 * ib), a1 = rd32(b + 6 + 8 * ib);
        *m0 = *m1 = 2 * (int)(a1 >> 28) + 1;
        return _mm256_sign_epi8(grid64(iq2xxs_grid, a0 & 255, (a0 >> 8) & 255, (a0 >> 16) & 255, a0 >> 24), signs7(a1));
    }
    case QT_IQ2_XS: {
        uint16_t q[4];
        memcpy(q, b + 2 + 8 * ib, 8);
        *m0 = 2 * (b[66 + ib] & 15) + 1, *m1 = 2 * (b[66 + ib] >> 4) + 1;
        const __m256i s = _mm256_set_epi64x((long long)iq_signs_pm1[q[3] >> 9], (long long)iq_signs_pm1[q[2] >> 9],
                                            (long long)iq_signs_pm1[q[1] >> 9], (long long)iq_signs_pm1[q[0] >> 9]);
        return _mm256_sign_epi8(grid64(iq2xs_grid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511), s);
    }
    case QT_IQ2_S: {
        const uint8_t *qs = b + 2 + 4 * ib;
        const unsigned qh = b[66 + ib];
        *m0 = 2 * (b[74 + ib] & 15) + 1, *m1 = 2 * (b[74 + ib] >> 4) + 1;
        const __m256i g = grid64(iq2s_grid, qs[0] | (qh & 3) << 8, qs[1] | (qh >> 2 & 3) << 8,
                                 qs[2] | (qh >> 4 & 3) << 8, qs[3] | (qh >> 6 & 3) << 8);
        return negate_bits(g, b + 34 + 4 * ib);
    }
    case QT_IQ3_XXS: {
        const uint32_t a = rd32(b + 66 + 4 * ib);
        *m0 = *m1 = 2 * (int)(a >> 28) + 1;
        return _mm256_sign_epi8(grid32(iq3xxs_grid, b + 2 + 8 * ib, 0), signs7(a));
    }
    case QT_IQ3_S:
        *m0 = *m1 = 2 * ((b[106 + ib / 2] >> (4 * (ib & 1))) & 15) + 1;
        return negate_bits(grid32(iq3s_grid, b + 2 + 8 * ib, b[66 + ib]), b + 74 + 4 * ib);
    case QT_IQ1_S: {
        const uint8_t *qs = b + 2 + 4 * ib;
        const unsigned h = (unsigned)(b[34 + 2 * ib] | b[35 + 2 * ib] << 8);
        *m0 = *m1 = 2 * (int)(h >> 12 & 7) + 1;
        const __m256i g = grid64(iq1s_grid, qs[0] | (h & 7) << 8, qs[1] | (h >> 3 & 7) << 8,
                                 qs[2] | (h >> 6 & 7) << 8, qs[3] | (h >> 9 & 7) << 8);
        return iq1_levels(g, _mm256_set1_epi8(h & 0x8000 ? -1 : 1));
    }
    default: { /* QT_IQ1_M */
        const uint8_t *qs = b + 4 * ib, *qh = b + 32 + 2 * ib;
        const unsigned sw = (unsigned)(b[48 + 2 * (ib / 2)] | b[49 + 2 * (ib / 2)] << 8) >> (6 * (ib & 1));
        *m0 = 2 * (int)(sw & 7) + 1, *m1 = 2 * (int)(sw >> 3 & 7) + 1;
        const unsigned n0 = qh[0] & 15, n1 = qh[0] >> 4, n2 = qh[1] & 15, n3 = qh[1] >> 4;
        const __m256i g = grid64(iq1s_grid, qs[0] | (n0 & 7) << 8, qs[1] | (n1 & 7) << 8, qs[2] | (n2 & 7) << 8,
                                 qs[3] | (n3 & 7) << 8);
        const long long neg = -1, pos = 0x0101010101010101ll;
        return iq1_levels(g, _mm256_set_epi64x(n3 & 8 ? neg : pos, n2 & 8 ? neg : pos, n1 & 8 ? neg : pos,
                                               n0 & 8 ? neg : pos));
    }
    }
}

/* The superblock's d: fp16, at its start or (IQ1_M) in the top nibbles of its scale words */
AI float decode_d(uint32_t type, const uint8_t *b) {
    if (type != QT_IQ1_M) return _cvtsh_ss((unsigned short)(b[0] | b[1] << 8));
    const uint8_t *sc = b + 48;
    const unsigned w0 = (unsigned)(sc[0] | sc[1] << 8), w1 = (unsigned)(sc[2] | sc[3] << 8);
    const unsigned w2 = (unsigned)(sc[4] | sc[5] << 8), w3 = (unsigned)(sc[6] | sc[7] << 8);
    return _cvtsh_ss((unsigned short)((w0 >> 12) | (w1 >> 8 & 0xf0) | (w2 >> 4 & 0xf00) | (w3 & 0xf000)));
}

AI uint8_t *align64(const uint8_t *p) { return (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

#if !IQ_PAIRS
/* ---- plain AVX2: lv, m, corr per superblock; maddubs, madd ------------------------- */
enum {
    SB_LV = 0,     /* int8 lv[256] */
    SB_M = 256,    /* int16 m[8][16] */
    SB_CORR = 512, /* int32 corr[8] */
    SB = 576,      /* bytes of one unpacked superblock (d: the row's d array) */
};
#define XD_STEP 8 /* xq rows: a d per 32 elements */

/* One superblock of type `type` at src → the unpacked superblock at dst (SB bytes). */
AI void unpack_superblock(uint32_t type, const uint8_t *src, uint8_t *dst) {
    const __m256i x0 = _mm256_set1_epi8((char)0x80);
    __m256i corr = _mm256_setzero_si256();
    _Pragma("GCC unroll 8")
    for (int ib = 0; ib < 8; ib++) {
        int m0, m1;
        const __m256i w = decode_sub(type, src, ib, &m0, &m1);
        const __m256i mv = _mm256_setr_m128i(_mm_set1_epi16((short)m0), _mm_set1_epi16((short)m1));
        _mm256_store_si256((__m256i *)(void *)(dst + SB_LV + 32 * ib), w);
        _mm256_store_si256((__m256i *)(void *)(dst + SB_M + 32 * ib), mv);
        corr = _mm256_add_epi32(corr, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, w), mv));
    }
    _mm256_store_si256((__m256i *)(void *)(dst + SB_CORR), corr);
}

/* The int lanes of superblock i for every weight row r and activation row c. */
AI void tile_sums(const uint8_t *const wr[IQ_R], const uint8_t *const xq[IQ_C], int64_t i, const int C,
                  __m256i ia[IQ_R][IQ_C]) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < IQ_R; r++) { /* starting at -corr: the x + 128 bias taken off */
        const __m256i corr = _mm256_load_si256((const __m256i *)(const void *)(wr[r] + (size_t)i * SB + SB_CORR));
        _Pragma("GCC unroll 8")
        for (int c = 0; c < C; c++) ia[r][c] = _mm256_sub_epi32(_mm256_setzero_si256(), corr);
    }
    _Pragma("GCC unroll 2")
    for (int ib = 0; ib < 8; ib++) {
        __m256i xv[IQ_C];
        _Pragma("GCC unroll 8")
        for (int c = 0; c < C; c++)
            xv[c] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(xq[c] + QK_K * i + 32 * ib)),
                                     flip);
        _Pragma("GCC unroll 8")
        for (int r = 0; r < IQ_R; r++) {
            const uint8_t *s = wr[r] + (size_t)i * SB;
            const __m256i w = _mm256_load_si256((const __m256i *)(const void *)(s + SB_LV + 32 * ib));
            const __m256i m = _mm256_load_si256((const __m256i *)(const void *)(s + SB_M + 32 * ib));
            _Pragma("GCC unroll 8")
            for (int c = 0; c < C; c++)
                ia[r][c] = _mm256_add_epi32(ia[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(xv[c], w), m));
        }
    }
}
#else
/* ---- the pairs (AVX-VNNI, AVX-512 VNNI): vpdpbusd, packs, vpdpwssd ------------------
 * An unpacked superblock: STEPS steps of five IQ_VW-byte fields (each a sub-block pair
 * per 32 bytes: HPV pairs per vector), the fields the levels A and B (interleaved, as
 * the activations), their biases -128·Σ lv (int32 per 4-element group, A's and B's)
 * and the (mul_a, mul_b) int16 pairs, 8 of each half. */
enum { F_WA, F_WB, F_BA, F_BB, F_M, N_FIELDS };
#define HPV (IQ_VW / 32)
#define STEPS (4 / HPV)
#define SB (STEPS * N_FIELDS * IQ_VW) /* 640 bytes either way */
#define XD_STEP 1                     /* packed rows: a d per superblock */

/* where pair g's 32 bytes of field f lie in a superblock of (n_fields × IQ_VW)-byte steps */
AI size_t pair_at(int g, int f, int n_fields) {
    return (size_t)(g / HPV) * (size_t)(n_fields * IQ_VW) + (size_t)(f * IQ_VW) + (size_t)(g % HPV) * 32;
}

/* Sub-blocks a and b → their interleaved 4-byte groups: A = a0 b0 a1 b1 | a4 b4 a5 b5, B = the rest */
AI void interleave(__m256i a, __m256i b, __m256i *A, __m256i *B) {
    *A = _mm256_unpacklo_epi32(a, b);
    *B = _mm256_unpackhi_epi32(a, b);
}

/* -128 · the 4-element sums of w: the bias of x + 128 taken off ahead */
AI __m256i neg_bias(__m256i w) {
    const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8((char)0x80), w), _mm256_set1_epi16(1));
    return _mm256_sub_epi32(_mm256_setzero_si256(), sums);
}

AI void store32(uint8_t *p, __m256i v) { _mm256_store_si256((__m256i *)(void *)p, v); }

/* One superblock of type `type` at src → the unpacked superblock at dst (SB bytes). */
AI void unpack_superblock(uint32_t type, const uint8_t *src, uint8_t *dst) {
    _Pragma("GCC unroll 4")
    for (int g = 0; g < 4; g++) {
        int ma0, ma1, mb0, mb1;
        const __m256i a = decode_sub(type, src, 2 * g, &ma0, &ma1);
        const __m256i b = decode_sub(type, src, 2 * g + 1, &mb0, &mb1);
        __m256i wa, wb;
        interleave(a, b, &wa, &wb);
        store32(dst + pair_at(g, F_WA, N_FIELDS), wa);
        store32(dst + pair_at(g, F_WB, N_FIELDS), wb);
        store32(dst + pair_at(g, F_BA, N_FIELDS), neg_bias(wa));
        store32(dst + pair_at(g, F_BB, N_FIELDS), neg_bias(wb));
        store32(dst + pair_at(g, F_M, N_FIELDS), _mm256_setr_m128i(_mm_set1_epi32(ma0 | mb0 << 16),
                                                                   _mm_set1_epi32(ma1 | mb1 << 16)));
    }
}

/* Activation rows of group g (quantized, a->xq) → packed rows (xp_row_bytes apart):
 * x + 128 interleaved by sub-block pairs as the weights, then the d_x of each superblock. */
void IQ_PACK_X(const mm_args *a, int64_t g, uint8_t *xp) {
    const int64_t nsb = a->n_in / QK_K;
    const size_t xb = xp_row_bytes(a->n_in);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    int64_t t0, t1;
    mm_iq_gemm_group(a->T, g, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const mm_xrow xr = mm_xrow_at(a->xq + (size_t)t * a->xq_stride, a->n_in);
        uint8_t *dst = align64(xp) + (size_t)t * xb;
        float *dx = (float *)(void *)(dst + a->n_in);
        for (int64_t i = 0; i < nsb; i++) {
            const int8_t *q = xr.q + QK_K * i;
            for (int p = 0; p < 4; p++) {
                __m256i A, B;
                interleave(_mm256_loadu_si256((const __m256i *)(const void *)(q + 64 * p)),
                           _mm256_loadu_si256((const __m256i *)(const void *)(q + 64 * p + 32)), &A, &B);
                store32(dst + QK_K * i + pair_at(p, 0, 2), _mm256_xor_si256(A, flip));
                store32(dst + QK_K * i + pair_at(p, 1, 2), _mm256_xor_si256(B, flip));
            }
            dx[i] = xr.d[8 * i];
        }
    }
}

#if defined(MM_IQ_AVX512)
typedef __m512i vi;
AI vi v_load(const uint8_t *p) { return _mm512_load_si512((const void *)p); }
AI vi v_zero(void) { return _mm512_setzero_si512(); }
AI vi v_dpbusd(vi acc, vi u, vi s) { return _mm512_dpbusd_epi32(acc, u, s); }
AI vi v_dpwssd(vi acc, vi p, vi m) { return _mm512_dpwssd_epi32(acc, p, m); }
AI vi v_packs(vi a, vi b) { return _mm512_packs_epi32(a, b); }
#else
typedef __m256i vi;
AI vi v_load(const uint8_t *p) { return _mm256_load_si256((const __m256i *)(const void *)p); }
AI vi v_zero(void) { return _mm256_setzero_si256(); }
AI vi v_dpbusd(vi acc, vi u, vi s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
AI vi v_dpwssd(vi acc, vi p, vi m) { return _mm256_dpwssd_avx_epi32(acc, p, m); }
AI vi v_packs(vi a, vi b) { return _mm256_packs_epi32(a, b); }
#endif

/* acc + the lanes of the sub-block pairs of one step: activations xa, xb (x + 128), weights at w */
AI vi pair_step(vi acc, vi xa, vi xb, const uint8_t *w) {
    const vi ta = v_dpbusd(v_load(w + F_BA * IQ_VW), xa, v_load(w + F_WA * IQ_VW));
    const vi tb = v_dpbusd(v_load(w + F_BB * IQ_VW), xb, v_load(w + F_WB * IQ_VW));
    return v_dpwssd(acc, v_packs(ta, tb), v_load(w + F_M * IQ_VW));
}

/* The int lanes of superblock i for every weight row r and activation row c (at
 * AVX-512 two halves to add). IQ_X_IN_REGS (32 registers): every row's activations
 * in registers, each weight row's fields loaded once; else an activation row at a
 * time over the weight rows. */
AI void tile_sums(const uint8_t *const wr[IQ_R], const uint8_t *const xq[IQ_C], int64_t i, const int C,
                  vi ia[IQ_R][IQ_C]) {
    _Pragma("GCC unroll 8")
    for (int r = 0; r < IQ_R; r++)
        _Pragma("GCC unroll 8")
        for (int c = 0; c < C; c++) ia[r][c] = v_zero();
    _Pragma("GCC unroll 4")
    for (int s = 0; s < STEPS; s++) {
        const size_t xo = (size_t)QK_K * i + (size_t)(2 * IQ_VW * s);
        const size_t wo = (size_t)i * SB + (size_t)(N_FIELDS * IQ_VW * s);
#if IQ_X_IN_REGS
        vi xa[IQ_C], xb[IQ_C];
        _Pragma("GCC unroll 8")
        for (int c = 0; c < C; c++) xa[c] = v_load(xq[c] + xo), xb[c] = v_load(xq[c] + xo + IQ_VW);
        _Pragma("GCC unroll 8")
        for (int r = 0; r < IQ_R; r++)
            _Pragma("GCC unroll 8")
            for (int c = 0; c < C; c++) ia[r][c] = pair_step(ia[r][c], xa[c], xb[c], wr[r] + wo);
#else
        _Pragma("GCC unroll 8")
        for (int c = 0; c < C; c++) {
            const vi xa = v_load(xq[c] + xo), xb = v_load(xq[c] + xo + IQ_VW);
            _Pragma("GCC unroll 8")
            for (int r = 0; r < IQ_R; r++) ia[r][c] = pair_step(ia[r][c], xa, xb, wr[r] + wo);
        }
#endif
    }
}
#endif

_Static_assert(SB <= SB_MAX, "mm_iq_gemm_scratch sizes rows with SB_MAX");
static size_t row_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * SB + round64(4 * (size_t)(n_in / QK_K)); }

AI void unpack_row_t(uint32_t type, const uint8_t *src, int64_t nsb, uint8_t *dst) {
    const size_t bb = qtype_get(type)->block_bytes;
    float *d = (float *)(void *)(dst + (size_t)nsb * SB);
    for (int64_t i = 0; i < nsb; i++, src += bb) {
        unpack_superblock(type, src, dst + (size_t)i * SB);
        d[i] = decode_d(type, src);
    }
}

/* One weight row's nsb superblocks → unpacked superblocks at dst (64-byte aligned),
 * then their d (floats). */
static void unpack_row(uint32_t type, const uint8_t *src, int64_t nsb, uint8_t *dst) {
    switch (type) { /* (a constant type in each: the decoder's switch folds) */
    case QT_IQ2_XXS: unpack_row_t(QT_IQ2_XXS, src, nsb, dst); break;
    case QT_IQ2_XS: unpack_row_t(QT_IQ2_XS, src, nsb, dst); break;
    case QT_IQ2_S: unpack_row_t(QT_IQ2_S, src, nsb, dst); break;
    case QT_IQ3_XXS: unpack_row_t(QT_IQ3_XXS, src, nsb, dst); break;
    case QT_IQ3_S: unpack_row_t(QT_IQ3_S, src, nsb, dst); break;
    case QT_IQ1_S: unpack_row_t(QT_IQ1_S, src, nsb, dst); break;
    default: unpack_row_t(QT_IQ1_M, src, nsb, dst); break;
    }
}

static inline float hsum8(__m256 v) { /* (as matmul_dot256.h's: the same order) */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* A tile's operands: its weight rows unpacked (wd: their d), its activation rows
 * (xq: the bytes, xd: d_x, XD_STEP floats per superblock). */
typedef struct tile_in {
    const uint8_t *wr[IQ_R];
    const float *wd[IQ_R];
    const uint8_t *xq[IQ_C];
    const float *xd[IQ_C];
} tile_in;

#if defined(MM_IQ_AVX512)
/* [a's two 256-bit halves added | b's]: the halves' lanes → the dot kernel's 8
 * lanes, for two activation rows at once */
AI __m512i fold_halves(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}

/* Superblock i of a tile: fa[r][p] += lanes · scale, pair p holding activation rows
 * 2p (low half) and 2p + 1 (high half). */
AI void tile_superblock(const tile_in *in, int64_t i, const int CP, float inv_div, __m512 fa[IQ_R][IQ_C / 2]) {
    __m512i ia[IQ_R][IQ_C];
    tile_sums(in->wr, in->xq, i, 2 * CP, ia);
    __m512 xd[IQ_C / 2]; /* d_x of rows 2p | 2p + 1 */
    _Pragma("GCC unroll 8")
    for (int p = 0; p < CP; p++)
        xd[p] = _mm512_insertf32x8(_mm512_set1_ps(in->xd[2 * p][XD_STEP * i]),
                                   _mm256_set1_ps(in->xd[2 * p + 1][XD_STEP * i]), 1);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < IQ_R; r++) {
        const __m512 d = _mm512_set1_ps(in->wd[r][i]);
        _Pragma("GCC unroll 8")
        for (int p = 0; p < CP; p++) { /* scale (d · d_x) · 1/div, as the dot kernel rounds it */
            const __m512 sc = _mm512_mul_ps(_mm512_mul_ps(d, xd[p]), _mm512_set1_ps(inv_div));
            const __m512 v = _mm512_cvtepi32_ps(fold_halves(ia[r][2 * p], ia[r][2 * p + 1]));
            fa[r][p] = _mm512_fmadd_ps(v, sc, fa[r][p]);
        }
    }
}

/* Outputs o .. o + nr - 1 for activation rows t0 .. t0 + C - 1 (an odd C computes
 * one row twice; weight rows past nr repeat the last). */
AI void tile(const mm_args *a, const tile_in *in, int nr, int64_t o, int64_t t0, const int C, float inv_div) {
    const int64_t nsb = a->n_in / QK_K;
    const int CP = (C + 1) / 2;
    __m512 fa[2][IQ_R][IQ_C / 2]; /* even and odd superblocks, as the dot kernel's a0, a1 */
    _Pragma("GCC unroll 8")
    for (int r = 0; r < IQ_R; r++)
        _Pragma("GCC unroll 8")
        for (int p = 0; p < CP; p++) fa[0][r][p] = fa[1][r][p] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nsb; i += 2) {
        tile_superblock(in, i, CP, inv_div, fa[0]);
        tile_superblock(in, i + 1, CP, inv_div, fa[1]);
    }
    if (i < nsb) tile_superblock(in, i, CP, inv_div, fa[0]);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < IQ_R; r++)
        _Pragma("GCC unroll 8")
        for (int p = 0; p < CP; p++) {
            const __m512 s = _mm512_add_ps(fa[0][r][p], fa[1][r][p]);
            if (r >= nr) continue;
            a->Y[(t0 + 2 * p) * a->n_out + o + r] = hsum8(_mm512_castps512_ps256(s));
            if (2 * p + 1 < C) a->Y[(t0 + 2 * p + 1) * a->n_out + o + r] = hsum8(_mm512_extractf32x8_ps(s, 1));
        }
}
#define IQ_C_ROWS(C) (2 * (((C) + 1) / 2)) /* activation rows a tile reads */
#else
/* Superblock i of a tile: fa[r][c] += lanes · scale. */
AI void tile_superblock(const tile_in *in, int64_t i, const int C, float inv_div, __m256 fa[IQ_R][IQ_C]) {
    __m256i ia[IQ_R][IQ_C];
    tile_sums(in->wr, in->xq, i, C, ia);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < IQ_R; r++) {
        const float d = in->wd[r][i];
        _Pragma("GCC unroll 8")
        for (int c = 0; c < C; c++) {
            const __m256 sc = _mm256_set1_ps(d * in->xd[c][XD_STEP * i] * inv_div);
            fa[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r][c]), sc, fa[r][c]);
        }
    }
}

/* Outputs o .. o + nr - 1 for activation rows t0 .. t0 + C - 1 (weight rows past nr
 * repeat the last). */
AI void tile(const mm_args *a, const tile_in *in, int nr, int64_t o, int64_t t0, const int C, float inv_div) {
    const int64_t nsb = a->n_in / QK_K;
    __m256 fa[2][IQ_R][IQ_C]; /* even and odd superblocks, as the dot kernel's a0, a1 */
    _Pragma("GCC unroll 8")
    for (int r = 0; r < IQ_R; r++)
        _Pragma("GCC unroll 8")
        for (int c = 0; c < C; c++) fa[0][r][c] = fa[1][r][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nsb; i += 2) {
        tile_superblock(in, i, C, inv_div, fa[0]);
        tile_superblock(in, i + 1, C, inv_div, fa[1]);
    }
    if (i < nsb) tile_superblock(in, i, C, inv_div, fa[0]);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < IQ_R; r++)
        _Pragma("GCC unroll 8")
        for (int c = 0; c < C; c++)
            if (r < nr) a->Y[(t0 + c) * a->n_out + o + r] = hsum8(_mm256_add_ps(fa[0][r][c], fa[1][r][c]));
}
#define IQ_C_ROWS(C) (C)
#endif

/* The activation rows t0 .. t0 + C - 1 into in (rows past T - 1 repeat the last):
 * packed (the pairs) or read in place. */
static void tile_rows(const mm_args *a, int64_t t0, int C, tile_in *in) {
    for (int c = 0; c < IQ_C_ROWS(C); c++) {
        const int64_t t = t0 + (c < C ? c : C - 1);
#if IQ_PAIRS
        in->xq[c] = align64(a->xp) + (size_t)t * xp_row_bytes(a->n_in);
        in->xd[c] = (const float *)(const void *)(in->xq[c] + a->n_in);
#else
        const mm_xrow xr = mm_xrow_at(a->xq + (size_t)t * a->xq_stride, a->n_in);
        in->xq[c] = (const uint8_t *)xr.q;
        in->xd[c] = xr.d;
#endif
    }
}

static void tile_c(const mm_args *a, tile_in *in, int nr, int64_t o, int64_t t0, int C, float inv_div) {
    tile_rows(a, t0, C, in);
    switch (C) {
    case 1: tile(a, in, nr, o, t0, 1, inv_div); break;
    case 2: tile(a, in, nr, o, t0, 2, inv_div); break;
    case 3: tile(a, in, nr, o, t0, 3, inv_div); break;
    default: tile(a, in, nr, o, t0, IQ_C, inv_div); break;
    }
}

/* Weight rows unpacked at a time: IQ_SUB_ROWS, fewer where they would pass IQ_SUB_BYTES
 * (measured at n_in 14336, down of an 8B model: 32 rows, 1.15 MB, 1.17-1.21× slower
 * than 12; n_in 2048 and 5632 keep 32) */
static int64_t sub_rows(size_t rb) {
    const int64_t n = (int64_t)(IQ_SUB_BYTES / rb) / IQ_R * IQ_R;
    return n < IQ_R ? IQ_R : n > IQ_SUB_ROWS ? IQ_SUB_ROWS : n;
}

/* Activation rows t0 .. t1 - 1 over the unpacked rows o0 .. o1 - 1 (at buf, rb apart). */
static void pass_block(const mm_args *a, const uint8_t *buf, size_t rb, int64_t o0, int64_t o1, int64_t t0,
                       int64_t t1, float inv_div) {
    const int64_t nsb = a->n_in / QK_K;
    for (int64_t o = o0; o < o1; o += IQ_R) {
        const int nr = (int)(o1 - o < IQ_R ? o1 - o : IQ_R);
        tile_in in;
        for (int r = 0; r < IQ_R; r++) {
            in.wr[r] = buf + (size_t)(o - o0 + (r < nr ? r : nr - 1)) * rb;
            in.wd[r] = (const float *)(const void *)(in.wr[r] + (size_t)nsb * SB);
        }
        for (int64_t t = t0; t < t1; t += IQ_C)
            tile_c(a, &in, nr, o, t, (int)(t1 - t < IQ_C ? t1 - t : IQ_C), inv_div);
    }
}

void IQ_GEMM(const mm_args *a, int64_t o0, int64_t o1, void *scratch) {
    const int64_t nsb = a->n_in / QK_K;
    const size_t rb = row_bytes(a->n_in);
    const float inv_div = inv_div_of(a->type);
    const int64_t sub = sub_rows(rb);
    uint8_t *buf = align64(scratch);
    for (int64_t s0 = o0; s0 < o1; s0 += sub) {
        const int64_t s1 = s0 + sub < o1 ? s0 + sub : o1;
        for (int64_t o = s0; o < s1; o++)
            unpack_row(a->type, a->W + (size_t)o * a->w_stride, nsb, buf + (size_t)(o - s0) * rb);
        for (int64_t t = 0; t < a->T; t += IQ_T_BLOCK)
            pass_block(a, buf, rb, s0, s1, t, t + IQ_T_BLOCK < a->T ? t + IQ_T_BLOCK : a->T, inv_div);
    }
}

#pragma GCC pop_options

#endif
