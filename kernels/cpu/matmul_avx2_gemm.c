/* matmul_avx2_gemm.c — the AVX2 blocked GEMM for quantized weights (Q8_0, Q4_0, Q4_K,
 * Q5_K, Q6_K; Q2_K and Q3_K in Q6_K's units; Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4 in the layouts of two of them,
 * below) at T > 1 ("gemmq" of the AVX2 level; no VNNI): a chunk of output rows is
 * repacked, one K-slice at a time, into 8-row panels, and every group of activation
 * rows then passes over them with an outer-product microkernel.
 *
 * Panels: one ymm holds 4 consecutive weight bytes of each of 8 rows, so a broadcast
 * of 4 activation bytes against it gives 8 outputs × 4 products with
 * _mm256_maddubs_epi16 (u8 × s8 → int16 pairs) and _mm256_madd_epi16(.., 1) (→ int32).
 * maddubs saturates at int16, so each type keeps its products in range exactly:
 *   Q8_0  both sides signed, so no maddubs: weights and activations widened to int16
 *         (a ymm: 2 values of each of 8 rows) and multiplied with _mm256_madd_epi16
 *         alone, one multiply per 16 products where the sign trick (|w| against
 *         sign(x, w), maddubs, madd) took a sign and two multiplies per 32; two
 *         panels per pass, so each broadcast serves 16 outputs (1.19× per core);
 *   Q4_0, Q4_K  nibbles (0..15) kept packed two per byte in the panel (the file's
 *         pairing: low and high nibble are two 4-element steps) and split with an and
 *         and a shift; a block's 8 maddubs results add up in int16 (<= 16·15·127 =
 *         30480) before one madd;
 *   Q5_K  5-bit values (0..31) unpacked to u8, four maddubs added in int16 (<= 31496);
 *   Q6_K  u = w + 32 (0..63) as u8, two maddubs added in int16 (<= 4·63·127 = 32004);
 *         Q3_K as u + 4 (0..7) with its -4·Σq, Q2_K as u (0..3) with a min term;
 *   Q4_1, Q5_1, Q5_0  unpacked to u8 (0..31) in Q5_K's units and multiplied by its
 *         kernel: the min m as Q5_K's min, or (Q5_0) the -16·Σq of u - 16 added to the
 *         integer sum;
 *   IQ4_NL, IQ4_XS, MXFP4  the levels (a byte shuffle of the nibbles; up to 127 in
 *         size, so w + 128 would saturate maddubs) widened to int16 in Q8_0's units and
 *         multiplied by its kernel; IQ4_XS's unit scale is d·(ls - 32). With AVX-VNNI
 *         (no saturation) the panels keep the nibbles in Q4_0's layout instead, and
 *         kern_nib shuffles them to level + 128 per step, its sums starting at
 *         -128·Σq: the same exact block sums, about twice the int16 path's speed.
 * Offsets come from the activations' per-block sums (aux, see matmul_internal.h):
 * Q4_0's -8·Σq, Q6_K's -32·Σq, Q4_K's and Q5_K's min term (one fma per block). Each block's
 * integer sum is exact; it is scaled once per block (cvt, mul by the activation
 * scale, fma with the row's weight scale), as in the AVX-512 GEMM, for up to RXMAX
 * activation rows at a time (their int and float sums in registers).
 *
 * The quantized activations are interleaved once per call, per group of rows
 * ([k/4][XP] dwords per block, Q8_0 [k/2][XP], then the block's scale and aux word),
 * so every broadcast is a constant offset from one pointer. Panels are filled with
 * 8×8 dword transposes of the file's bytes (Q5_K's and Q6_K's values first unpacked
 * per row, Q8_0's widened). Y is written per K-slice (accumulated after the first);
 * every output's arithmetic is fixed by the shapes alone, so the thread count never
 * changes a result. The one-row path (T = 1) keeps the dot kernels of
 * matmul_dot256.h, so a batched row may differ from the row alone in float rounding
 * (not in the integer sums) -- except for Q8_0 packed ahead at load (the gemm_prepack
 * hooks): its int8 panels (the file's size) serve every row count, read in place with
 * the sign trick up to FEW_ROWS rows (one row streams them as fast as the dot kernel
 * streams the file) and widened to int16 per call above, and every row count gives
 * the same result. */
#include "kernels/cpu/matmul_internal.h"

#ifndef MM_AVX2_VNNI
/* (defined here, not in matmul.c, which sets it: this GEMM reads it to lay out the
 * panels and activations of the level types, and matmul.c calls down into here) */
int mm_avx_vnni;
#endif

#if defined(__x86_64__)

#pragma GCC push_options
#ifdef MM_AVX2_VNNI /* compiled a second time by matmul_avxvnni_gemm.c */
#pragma GCC target("avx2,fma,f16c,avxvnni")
#else
#pragma GCC target("avx2,fma,f16c")
#endif

#include <immintrin.h>

#include "kernels/cpu/matmul_avx2_gemm.h"

#define AI static inline __attribute__((always_inline))
#ifndef KUNROLL
#define KUNROLL "GCC unroll 2" /* (fully unrolled, GCC reassociates the sums and spills) */
#endif

#ifndef RXMAX
#define RXMAX 4 /* activation rows per microkernel call (at most 8) */
#endif
enum {
    XP = RXMAX, /* interleave stride of packed activations (rows, padded) */
    KC = 2048,  /* K-slice (multiple of 256) */
    PR = 8,     /* rows per panel */
    FEW_ROWS = 8,  /* Q8_0 packed ahead: up to this many rows read the int8 panels */
    Q8_NARROW_UNIT = 256 + 16, /* a Q8_0 unit packed ahead: s8 w[8][8 rows][4], f16 s[8] (the file's size) */
};

/* elements per packed activation block: 16-groups for Q6_K, else 32-blocks */
static int x_bs(uint32_t t) { return t == QT_Q6_K || t == QT_Q2_K || t == QT_Q3_K ? 16 : 32; }
/* Types whose signed 32-block values are widened to int16 in the panels, Q8_0's
 * int16 layout (their values, up to 127 in size, would saturate maddubs against a
 * w + 128 offset): the multiply is then Q8_0's kern_q8_0, one madd per 16 products */
static int lut_type(uint32_t t) { return t == QT_IQ4_NL || t == QT_IQ4_XS || t == QT_MXFP4; }
/* With AVX-VNNI the level types keep their nibbles in the panels instead (Q4_0's
 * layout, "nib"): vpdpbusd does not saturate, so one byte shuffle per step gives
 * level + 128 as u8 and the sums start at the activations' -128·Σq (kern_nib) */
static int nib_type(uint32_t t) { return lut_type(t) && mm_avx_vnni; }
static int wide_type(uint32_t t) { return t == QT_Q8_0 || (lut_type(t) && !mm_avx_vnni); }
/* Whether a Q8_0 call takes the int16 path (panels and activations widened): without
 * panels packed ahead always; with them (int8, read in place with the sign trick)
 * above FEW_ROWS rows, where widening a copy per call pays. Both give every output
 * the same exact block sums and float operations, so the results are identical. */
static int q8_wide(const mm_args *a) {
    return wide_type(a->type) && !(a->type == QT_Q8_0 && a->wp && a->T <= FEW_ROWS);
}
/* rows interleaved in a packed activation block: a group's own row count for Q8_0's
 * int8 panels packed ahead (see kern_q8_0_narrow), else XP */
static int x_stride(const mm_args *a, int rx) { return a->type == QT_Q8_0 && !q8_wide(a) ? rx : XP; }
/* dwords of quants per packed activation block and row (wide: Q8_0's int16 pairs) */
static int x_dw(uint32_t t, int wide) { return wide ? 16 : x_bs(t) / 4; }
/* bytes of one packed activation block interleaving xs rows: int32 q[x_dw][xs] (4 int8
 * or 2 int16 values), f32 d[xs], aux[xs] */
static size_t x_blk_bytes_at(uint32_t t, int wide, int xs) { return (size_t)(x_dw(t, wide) + 2) * (size_t)xs * 4; }
/* ... at the XP rows every kernel but kern_q8_0_narrow reads */
static size_t x_blk_bytes(uint32_t t, int wide) { return x_blk_bytes_at(t, wide, XP); }

/* One panel block ("unit") of each type: its elements and bytes.
 *   Q8_0  32: s16 w[16][8 rows][2], f32 s[8] (packed ahead: Q8_NARROW_UNIT)
 *   Q4_0  32: nibbles [4][8][4] (low: step j, high: step 4 + j), f32 s[8]; IQ4_NL,
 *             IQ4_XS, MXFP4 the same with AVX-VNNI (s: the block's scale)
 *   Q4_K  64: nibbles [8][8][4] (low: sub-block A step j, high: B step j),
 *             f32 sA[8], sB[8], mA[8], mB[8] (scale d·sc, min -dmin·m)
 *   Q5_K  32: u8 u[8][8][4], f32 s[8], m[8] (scale d·sc, min -dmin·m)
 *   Q6_K  16: u8 u[4][8][4], f32 s[8]; Q3_K the same (u + 4, s = d·(sc - 32));
 *   Q2_K  16: u8 u[4][8][4], f32 s[8], m[8] (scale d·sc, min -dmin·m) */
static int k16_type(uint32_t t) { return t == QT_Q6_K || t == QT_Q2_K || t == QT_Q3_K; }
static int w_unit(uint32_t t) { return t == QT_Q4_K ? 64 : k16_type(t) ? 16 : 32; }
static size_t w_unit_bytes(uint32_t t) {
    if (wide_type(t)) return 512 + 32; /* Q8_0's layout */
    if (nib_type(t)) return 128 + 32; /* Q4_0's layout */
    switch (t) {
    case QT_Q4_0: return 128 + 32;
    case QT_Q4_K: return 256 + 128;
    case QT_Q4_1:
    case QT_Q5_0:
    case QT_Q5_1: /* Q5_K's layout: u8 u[8][8][4], f32 s[8] = d, m[8] = m (Q5_0: no m) */
    case QT_Q5_K: return 256 + 64;
    case QT_Q2_K: return 128 + 64;
    default: return 128 + 32; /* Q6_K, Q3_K */
    }
}

static int64_t kc_of(int64_t n_in) { return n_in < KC ? n_in : KC; }
static size_t panel_bytes(uint32_t type, int64_t kc) { return (size_t)(kc / w_unit(type)) * w_unit_bytes(type); }
static size_t xgroup_bytes(uint32_t type, int64_t n_in, int wide) {
    return (size_t)(n_in / x_bs(type)) * x_blk_bytes(type, wide);
}

/* Below these batch sizes the dot kernels (each weight block read once, then from
 * cache for every activation row) beat packing the weights per call; measured on the
 * TinyLlama shapes, 1 thread: the K-quants' packing (scales, Q6_K's 6-bit values)
 * costs about as much as 4-8 rows of GEMM. */
int mm_avx2_gemmq_rows(uint32_t type, int64_t T) {
    switch (type) {
    case QT_Q8_0:
    case QT_Q4_0: return T >= 4 ? PR : 0;
    case QT_Q4_K:
    case QT_Q5_K:
    case QT_Q6_K:
    case QT_Q2_K:
    case QT_Q3_K: return T >= 8 ? PR : 0;
    case QT_Q4_1: case QT_Q5_0: case QT_Q5_1: return T >= 4 ? PR : 0;
    case QT_IQ4_NL: case QT_IQ4_XS: case QT_MXFP4: return T >= 6 ? PR : 0; /* (T = 4: as the dot kernels) */
    default: return 0;
    }
}

int64_t mm_avx2_gemmq_groups(int64_t T) { return (T + RXMAX - 1) / RXMAX; }

/* group g of ng: rows [g*T/ng, (g+1)*T/ng), sizes differ by at most one */
void mm_avx2_gemmq_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1) {
    const int64_t ng = mm_avx2_gemmq_groups(T);
    *t0 = g * T / ng;
    *t1 = (g + 1) * T / ng;
}

size_t mm_avx2_gemmq_xp_bytes(uint32_t type, int64_t n_in, int64_t T) {
    return (size_t)mm_avx2_gemmq_groups(T) * xgroup_bytes(type, n_in, wide_type(type)); /* (the larger) */
}

size_t mm_avx2_gemmq_scratch(const mm_args *a, int64_t rows) {
    if (a->wp && !q8_wide(a)) return 0; /* panels read in place */
    return (size_t)((rows + PR - 1) / PR) * panel_bytes(a->type, kc_of(a->n_in)) + 64;
}

/* ---- packing weights: one 8-row panel ---------------------------------------------- */

/* r[i] dword j → r[j] dword i */
AI void tr8x8(__m256i r[8]) {
    __m256i t[8], u[8];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    _Pragma("GCC unroll 8")
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

/* 32 bytes at p[r] + off for each of the 8 rows → 8 ymm of [row][4 bytes] */
AI void pack32(const uint8_t *const p[PR], size_t off, uint8_t *dst) {
    __m256i r[8];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_si256((const __m256i *)(const void *)(p[i] + off));
    tr8x8(r);
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)(void *)(dst + 32 * j), r[j]);
}

static float h2f(const uint8_t *p) { return _cvtsh_ss(mm_rd16(p)); }

static void pack_q8_0(const uint8_t *const row[PR], int64_t b0, int64_t nb, uint8_t *dst) {
    int16_t st[PR][32] __attribute__((aligned(32)));
    for (int64_t b = b0; b < b0 + nb; b++, dst += 544) {
        const size_t off = (size_t)b * sizeof(block_q8_0);
        float *s = (float *)(void *)(dst + 512);
        for (int r = 0; r < PR; r++) {
            const __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)(row[r] + off + 2));
            const __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(row[r] + off + 18));
            _mm256_store_si256((__m256i *)(void *)st[r], _mm256_cvtepi8_epi16(lo));
            _mm256_store_si256((__m256i *)(void *)(st[r] + 16), _mm256_cvtepi8_epi16(hi));
            s[r] = h2f(row[r] + off);
        }
        const uint8_t *p[PR];
        for (int r = 0; r < PR; r++) p[r] = (const uint8_t *)st[r];
        pack32(p, 0, dst);
        pack32(p, 32, dst + 256);
    }
}

/* Q8_0 as packed ahead: the file's bytes transposed, 8 rows × 4 per ymm, and the
 * rows' f16 scales (272 bytes a unit: units are 16-byte aligned, loads unaligned) */
static void pack_q8_0_narrow(const uint8_t *const row[PR], int64_t nb, uint8_t *dst) {
    for (int64_t b = 0; b < nb; b++, dst += Q8_NARROW_UNIT) {
        const size_t off = (size_t)b * sizeof(block_q8_0);
        pack32(row, off + 2, dst);
        for (int r = 0; r < PR; r++) memcpy(dst + 256 + 2 * r, row[r] + off, 2);
    }
}

/* nu Q8_0 units packed ahead → the int16 units of pack_q8_0: a step's 8 rows × 4
 * bytes, widened, are rows 0-3 and 4-7 × 4 int16; the two pairs of each row are
 * gathered with shuffle_ps (row order 0 1 4 5 | 2 3 6 7) and put in order with a
 * 64-bit permute */
static void widen_q8_0(const uint8_t *src, int64_t nu, uint8_t *dst) {
    for (int64_t u = 0; u < nu; u++, src += Q8_NARROW_UNIT, dst += 544) {
        _Pragma("GCC unroll 2")
        for (int j = 0; j < 8; j++) {
            const __m256 lo = _mm256_castsi256_ps(
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(src + 32 * j))));
            const __m256 hi = _mm256_castsi256_ps(
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(src + 32 * j + 16))));
            const __m256i p0 = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
            const __m256i p1 = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
            _mm256_store_si256((__m256i *)(void *)(dst + 64 * j), _mm256_permute4x64_epi64(p0, 0xD8));
            _mm256_store_si256((__m256i *)(void *)(dst + 64 * j + 32), _mm256_permute4x64_epi64(p1, 0xD8));
        }
        _mm256_store_ps((float *)(void *)(dst + 512),
                        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + 256))));
    }
}

/* Block b of a row of a nibble type: its 16 bytes of nibbles (element l low, 16 + l
 * high) and its scale (Q4_0, IQ4_NL: d; MXFP4: 2^(e-128); IQ4_XS: sub-block b % 8 of
 * super-block b / 8, d·(ls - 32)). */
AI const uint8_t *nib_block(uint32_t type, const uint8_t *row, int64_t b, float *scale) {
    switch (type) {
    case QT_Q4_0:
    case QT_IQ4_NL: {
        const uint8_t *w = row + (size_t)b * (type == QT_Q4_0 ? sizeof(block_q4_0) : sizeof(block_iq4_nl));
        *scale = h2f(w);
        return w + 2;
    }
    case QT_MXFP4: {
        const uint8_t *w = row + (size_t)b * sizeof(block_mxfp4);
        *scale = e8m0_half_to_f32(w[0]);
        return w + 1;
    }
    default: { /* IQ4_XS */
        const uint8_t *w = row + (size_t)(b / 8) * sizeof(block_iq4_xs);
        const int j = (int)(b % 8);
        const int ls = iq4_xs_scale6(w, j) - 32;
        *scale = h2f(w) * (float)ls;
        return w + 8 + 16 * j;
    }
    }
}

/* Q4_0 (and, with AVX-VNNI, IQ4_NL, IQ4_XS, MXFP4): each block's nibble bytes as they
 * are, 8 rows × 4 bytes per ymm (low nibbles: step j, high: step 4 + j), then f32 s[8] */
static void pack_nib(uint32_t type, const uint8_t *const row[PR], int64_t b0, int64_t nb, uint8_t *dst) {
    for (int64_t b = b0; b < b0 + nb; b++, dst += 160) {
        float *s = (float *)(void *)(dst + 128);
        const uint8_t *q[PR];
        for (int r = 0; r < PR; r++) q[r] = nib_block(type, row[r], b, &s[r]);
        __m256i y[4];
        _Pragma("GCC unroll 8")
        for (int i = 0; i < 4; i++)
            y[i] = _mm256_loadu2_m128i((const __m128i *)(const void *)q[i + 4], (const __m128i *)(const void *)q[i]);
        const __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
        _mm256_store_si256((__m256i *)(void *)dst, _mm256_unpacklo_epi64(t0, t2));
        _mm256_store_si256((__m256i *)(void *)(dst + 32), _mm256_unpackhi_epi64(t0, t2));
        _mm256_store_si256((__m256i *)(void *)(dst + 64), _mm256_unpacklo_epi64(t1, t3));
        _mm256_store_si256((__m256i *)(void *)(dst + 96), _mm256_unpackhi_epi64(t1, t3));
    }
}

/* u0, nu: 64-element units (4 per super-block; multiples of 4) */
static void pack_q4_K(const uint8_t *const row[PR], int64_t u0, int64_t nu, uint8_t *dst) {
    for (int64_t sb = u0 / 4; sb < (u0 + nu) / 4; sb++) {
        const size_t off = (size_t)sb * sizeof(block_q4_K);
        float sc[8][PR], mn[8][PR]; /* per sub-block: d·sc and -dmin·m of each row */
        for (int r = 0; r < PR; r++) {
            const uint8_t *blk = row[r] + off;
            uint8_t sm[16];
            mm_q4k_scales(blk + 4, sm);
            const float d = h2f(blk), dmin = h2f(blk + 2);
            for (int j = 0; j < 8; j++) {
                sc[j][r] = d * (float)sm[j];
                mn[j][r] = -dmin * (float)sm[8 + j];
            }
        }
        for (int j = 0; j < 4; j++, dst += 384) {
            pack32(row, off + 16 + 32 * (size_t)j, dst);
            memcpy(dst + 256, sc[2 * j], 64);
            memcpy(dst + 320, mn[2 * j], 64);
        }
    }
}

/* u0, nu: 32-element sub-blocks (8 per super-block; multiples of 8); the 5-bit
 * values are unpacked per row (as the dot kernel does), then transposed */
static void pack_q5_K(const uint8_t *const row[PR], int64_t u0, int64_t nu, uint8_t *dst) {
    uint8_t st[PR][256] __attribute__((aligned(32)));
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t sb = u0 / 8; sb < (u0 + nu) / 8; sb++, dst += 8 * 320) {
        const size_t off = (size_t)sb * sizeof(block_q5_K);
        float sc[8][PR], mn[8][PR];
        for (int r = 0; r < PR; r++) {
            const uint8_t *blk = row[r] + off;
            uint8_t sm[16];
            mm_q4k_scales(blk + 4, sm);
            const float d = h2f(blk), dmin = h2f(blk + 2);
            for (int j = 0; j < 8; j++) {
                sc[j][r] = d * (float)sm[j];
                mn[j][r] = -dmin * (float)sm[8 + j];
            }
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 16));
            for (int j = 0; j < 4; j++) {
                const __m256i qw = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 48 + 32 * j));
                const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4);
                const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4);
                _mm256_store_si256((__m256i *)(void *)(st[r] + 64 * j), _mm256_or_si256(_mm256_and_si256(qw, m4), h0));
                _mm256_store_si256((__m256i *)(void *)(st[r] + 64 * j + 32),
                                   _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qw, 4), m4), h1));
            }
        }
        const uint8_t *p[PR];
        for (int r = 0; r < PR; r++) p[r] = st[r];
        for (int j = 0; j < 8; j++) {
            pack32(p, 32 * (size_t)j, dst + j * 320);
            memcpy(dst + j * 320 + 256, sc[j], 32);
            memcpy(dst + j * 320 + 288, mn[j], 32);
        }
    }
}

/* 256 6-bit values of one Q6_K block as u8 (0..63), in element order */
static void q6_K_unpack(const uint8_t *w, uint8_t out[256]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(w + 128 + 32 * h));
        const __m256i qa = _mm256_loadu_si256((const __m256i *)(const void *)(w + 64 * h));
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(const void *)(w + 64 * h + 32));
        __m256i *o = (__m256i *)(void *)(out + 128 * h);
        _mm256_storeu_si256(o, _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
        _mm256_storeu_si256(o + 1, _mm256_or_si256(_mm256_and_si256(qb, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
        _mm256_storeu_si256(o + 2, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), _mm256_and_si256(qh, m30)));
        _mm256_storeu_si256(o + 3, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
    }
}

/* Q2_K (hm NULL: u, 0..3) and Q3_K (u + 4 = low bits | hmask bit << 2, 0..7): the 256
 * values of one block as u8, in element order (element 128n + 32j + l: bits 2j of
 * qs[32n + l], bit 4n + j of hmask[l]) */
static void q23_K_unpack(const uint8_t *qs, const uint8_t *hm, uint8_t out[256]) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i h = hm ? _mm256_loadu_si256((const __m256i *)(const void *)hm) : _mm256_setzero_si256();
    for (int n = 0; n < 2; n++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * n));
        for (int j = 0; j < 4; j++) {
            __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
            if (hm) v = _mm256_or_si256(v, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4 * n + j), one), 2));
            _mm256_storeu_si256((__m256i *)(void *)(out + 128 * n + 32 * j), v);
        }
    }
}

/* Q6_K, Q3_K, Q2_K (16-group units, w_unit_bytes apart); g0, ng: 16-groups (16 per
 * super-block; g0 and ng multiples of 16) */
static void pack_k16(uint32_t type, const uint8_t *const row[PR], int64_t g0, int64_t ng, uint8_t *dst) {
    uint8_t st[PR][256] __attribute__((aligned(32)));
    float sc[PR][16] __attribute__((aligned(32)));
    float mn[PR][16] __attribute__((aligned(32)));
    const size_t ub = w_unit_bytes(type);
    const size_t bb = type == QT_Q6_K ? sizeof(block_q6_K) : type == QT_Q3_K ? sizeof(block_q3_K) : sizeof(block_q2_K);
    for (int64_t sb = g0 / 16; sb < (g0 + ng) / 16; sb++, dst += 16 * ub) {
        const size_t off = (size_t)sb * bb;
        for (int r = 0; r < PR; r++) {
            const uint8_t *blk = row[r] + off;
            if (type == QT_Q2_K) {
                const float d = h2f(blk + offsetof(block_q2_K, d)), dmin = h2f(blk + offsetof(block_q2_K, dmin));
                q23_K_unpack(blk + offsetof(block_q2_K, qs), NULL, st[r]);
                for (int g = 0; g < 16; g++) {
                    sc[r][g] = d * (float)(blk[g] & 0xf);
                    mn[r][g] = -dmin * (float)(blk[g] >> 4);
                }
                continue;
            }
            if (type == QT_Q3_K) {
                const float d = h2f(blk + offsetof(block_q3_K, d));
                const uint8_t *sbs = blk + offsetof(block_q3_K, scales);
                q23_K_unpack(blk + offsetof(block_q3_K, qs), blk + offsetof(block_q3_K, hmask), st[r]);
                for (int g = 0; g < 16; g++) {
                    const int lo = g < 8 ? sbs[g] & 0xf : sbs[g - 8] >> 4;
                    sc[r][g] = d * (float)((lo | ((sbs[8 + g % 4] >> (2 * (g / 4))) & 3) << 4) - 32);
                }
                continue;
            }
            q6_K_unpack(blk, st[r]);
            const __m256 d = _mm256_set1_ps(h2f(blk + 208));
            const __m128i s8 = _mm_loadu_si128((const __m128i *)(const void *)(blk + 192));
            _mm256_store_ps(sc[r], _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8))));
            _mm256_store_ps(sc[r] + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8)))));
        }
        /* 32 elements at a time: the 8 transposed vectors are steps 0-3 of group 2c
         * and steps 0-3 of group 2c + 1 */
        for (int c = 0; c < 8; c++) {
            __m256i v[8];
            _Pragma("GCC unroll 8")
            for (int r = 0; r < PR; r++) v[r] = _mm256_load_si256((const __m256i *)(const void *)(st[r] + 32 * c));
            tr8x8(v);
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++)
                _mm256_store_si256((__m256i *)(void *)(dst + (2 * c + k / 4) * ub + 32 * (k % 4)), v[k]);
        }
        /* scales (and Q2_K's mins): row r's 16 group values → group g's 8 row values */
        for (int h = 0; h < 2 * (type == QT_Q2_K ? 2 : 1); h++) {
            __m256i v[8];
            const float (*src)[16] = h < 2 ? sc : mn;
            _Pragma("GCC unroll 8")
            for (int r = 0; r < PR; r++) v[r] = _mm256_castps_si256(_mm256_load_ps(src[r] + 8 * (h & 1)));
            tr8x8(v);
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++)
                _mm256_store_si256((__m256i *)(void *)(dst + (8 * (h & 1) + k) * ub + 128 + 32 * (h >> 1)), v[k]);
        }
    }
}

/* ---- the other 32-block types, unpacked per row and transposed -------------------- */

/* the 16 nibbles of qs[16] as 32 bytes in element order (low nibbles: 0-15, high: 16-31) */
AI __m256i nib32(const uint8_t *qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}
/* bit j of the 4 bytes at qh as byte j: 0x10 where set (the fifth bit of Q5_0 / Q5_1) */
AI __m256i hbit32(const uint8_t *qh) {
    uint32_t x;
    memcpy(&x, qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i b = _mm256_or_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf),
                                      _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

/* The 16 levels of a lookup type (IQ4_NL and IQ4_XS: iq4nl_values; MXFP4's), as
 * signed bytes in both lanes, for a byte shuffle of the nibbles */
AI __m256i lut_levels(uint32_t type) {
    const int8_t *lv = type == QT_MXFP4 ? mxfp4_values : iq4nl_values;
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)lv));
}

/* Block b of a row of a lookup type as 32 signed values, and its scale. */
AI __m256i wide_block(uint32_t type, const uint8_t *row, int64_t b, float *scale) {
    return _mm256_shuffle_epi8(lut_levels(type), nib32(nib_block(type, row, b, scale)));
}

/* IQ4_NL, IQ4_XS, MXFP4 → Q8_0's int16 units (s16 w[16][8 rows][2], f32 s[8]) */
static void pack_wide(uint32_t type, const uint8_t *const row[PR], int64_t b0, int64_t nb, uint8_t *dst) {
    int16_t st[PR][32] __attribute__((aligned(32)));
    const uint8_t *p[PR];
    for (int r = 0; r < PR; r++) p[r] = (const uint8_t *)st[r];
    for (int64_t b = b0; b < b0 + nb; b++, dst += 544) {
        float *s = (float *)(void *)(dst + 512);
        for (int r = 0; r < PR; r++) {
            const __m256i v = wide_block(type, row[r], b, &s[r]);
            _mm256_store_si256((__m256i *)(void *)st[r], _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)));
            _mm256_store_si256((__m256i *)(void *)(st[r] + 16), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)));
        }
        pack32(p, 0, dst);
        pack32(p, 32, dst + 256);
    }
}

/* Q4_1, Q5_1 (d·u + m) → Q5_K's units (u8 u[8][8][4], f32 s[8] = d, m[8] = m): kern_q5_K
 * with the activations' d·Σq as the min's partner; Q5_0 (d·(u - 16)) → the same units
 * without m, for kern_q5_0 */
static void pack_u5(uint32_t type, const uint8_t *const row[PR], int64_t b0, int64_t nb, uint8_t *dst) {
    uint8_t st[PR][32] __attribute__((aligned(32)));
    const uint8_t *p[PR];
    for (int r = 0; r < PR; r++) p[r] = st[r];
    const size_t bb = type == QT_Q5_1 ? sizeof(block_q5_1) : type == QT_Q5_0 ? sizeof(block_q5_0) : sizeof(block_q4_1);
    for (int64_t b = b0; b < b0 + nb; b++, dst += 320) {
        float *s = (float *)(void *)(dst + 256), *mn = s + 8;
        for (int r = 0; r < PR; r++) {
            const uint8_t *w = row[r] + (size_t)b * bb;
            s[r] = h2f(w);
            mn[r] = type == QT_Q5_0 ? 0.0f : h2f(w + 2);
            const __m256i u = type == QT_Q5_1   ? _mm256_or_si256(nib32(w + 8), hbit32(w + 4))
                              : type == QT_Q5_0 ? _mm256_or_si256(nib32(w + 6), hbit32(w + 2))
                                                : nib32(w + 4);
            _mm256_store_si256((__m256i *)(void *)st[r], u);
        }
        pack32(p, 0, dst);
    }
}

/* The 8 rows of W from p0 for one panel (nvalid <= 8; missing rows repeat the last one). */
static void panel_rows(const mm_args *a, int64_t p0, int nvalid, const uint8_t *row[PR]) {
    for (int r = 0; r < PR; r++) row[r] = a->W + (size_t)(p0 + (r < nvalid ? r : nvalid - 1)) * a->w_stride;
}

/* Packs rows [p0, p0 + nvalid) of W, elements [k0, k0 + kn). */
static void pack_panel(const mm_args *a, int64_t p0, int nvalid, int64_t k0, int64_t kn, uint8_t *dst) {
    const uint8_t *row[PR];
    panel_rows(a, p0, nvalid, row);
    switch (a->type) {
    case QT_Q8_0: pack_q8_0(row, k0 / 32, kn / 32, dst); break;
    case QT_Q4_0: pack_nib(a->type, row, k0 / 32, kn / 32, dst); break;
    case QT_Q4_K: pack_q4_K(row, k0 / 64, kn / 64, dst); break;
    case QT_Q5_K: pack_q5_K(row, k0 / 32, kn / 32, dst); break;
    case QT_Q6_K: case QT_Q2_K: case QT_Q3_K: pack_k16(a->type, row, k0 / 16, kn / 16, dst); break;
    case QT_Q4_1: case QT_Q5_0: case QT_Q5_1: pack_u5(a->type, row, k0 / 32, kn / 32, dst); break;
    case QT_IQ4_NL: case QT_IQ4_XS: case QT_MXFP4:
        if (nib_type(a->type)) pack_nib(a->type, row, k0 / 32, kn / 32, dst);
        else pack_wide(a->type, row, k0 / 32, kn / 32, dst);
        break;
    default: break;
    }
}

/* ---- packing activations ------------------------------------------------------------ */

/* Group g's rows → per block int32 q[bs/4][XP], f32 d[XP], aux[XP] (rows beyond the
 * group zero). aux: Q4_0 -8·Σq (int), Q4_K and Q5_K d·Σq (float), Q6_K -32·Σq per
 * group (int). */
void mm_avx2_gemmq_pack_x(const mm_args *a, int64_t g, uint8_t *xp) {
    int64_t t0, t1;
    mm_avx2_gemmq_group(a->T, g, &t0, &t1);
    const int bs = x_bs(a->type), rx = (int)(t1 - t0);
    const int wide = q8_wide(a), dw = x_dw(a->type, wide), xs = x_stride(a, rx);
    const size_t xbs = x_blk_bytes_at(a->type, wide, xs);
    const int64_t n = a->n_in, nblk = n / bs;
    uint8_t *dst = xp + (size_t)g * xgroup_bytes(a->type, n, wide);
    memset(dst, 0, xgroup_bytes(a->type, n, wide));
    _Pragma("GCC unroll 8")
    for (int t = 0; t < rx; t++) {
        const mm_xrow r = mm_xrow_at(a->xq + (size_t)(t0 + t) * a->xq_stride, n);
        for (int64_t b = 0; b < nblk; b++) {
            uint8_t *db = dst + (size_t)b * xbs;
            int32_t *q = (int32_t *)(void *)db;
            if (dw == bs / 4)
                for (int k = 0; k < dw; k++) memcpy(&q[k * xs + t], r.q + b * bs + 4 * k, 4);
            else /* int16 pairs */
                for (int k = 0; k < dw; k++) {
                    const int16_t pair[2] = {r.q[b * bs + 2 * k], r.q[b * bs + 2 * k + 1]};
                    memcpy(&q[k * xs + t], pair, 4);
                }
            float *d = (float *)(void *)(db + (size_t)dw * xs * 4);
            d[t] = r.d[bs == 32 ? b : b / 2];
            int32_t *ai = (int32_t *)(void *)(d + xs);
            float *af = d + xs;
            switch (a->type) {
            case QT_Q4_0: ai[t] = r.ai[b] / 16; break;
            case QT_Q5_0: ai[t] = r.ai[b] / 8; break; /* -16·Σq */
            case QT_Q4_K:
            case QT_Q5_K:
            case QT_Q4_1:
            case QT_Q5_1: af[t] = r.af[b]; break;
            case QT_Q6_K: ai[t] = r.ai[b]; break;
            case QT_IQ4_NL: case QT_IQ4_XS: case QT_MXFP4: ai[t] = r.ai[b]; break; /* -128·Σq (nib) */
            case QT_Q3_K: ai[t] = -4 * r.ai[b]; break; /* u - 4 */
            case QT_Q2_K: af[t] = r.d[b / 2] * (float)r.ai[b]; break; /* d·Σq, for the min */
            default: break;
            }
        }
    }
}

/* ---- microkernels: 8 outputs (one panel) × rx activation rows over nu units ------ */

AI __m256i bx(const int32_t *p) { return _mm256_set1_epi32(*p); }

/* u8 × s8 sums: h += Σ of 4-byte products. Without VNNI, maddubs into int16 pairs
 * (each type keeps them in range, see the top) and isum32 widens them with madd; with
 * AVX-VNNI (matmul_avxvnni_gemm.c) one vpdpbusd into int32, isum32 then a no-op.
 * Both give the same exact integer sums, so the results are identical. */
#ifdef MM_AVX2_VNNI
AI __m256i acc_u8s8(__m256i h, __m256i w, __m256i x) { return _mm256_dpbusd_avx_epi32(h, w, x); }
AI __m256i isum32(__m256i h, __m256i ones) { (void)ones; return h; }
#else
AI __m256i acc_u8s8(__m256i h, __m256i w, __m256i x) { return _mm256_add_epi16(h, _mm256_maddubs_epi16(w, x)); }
AI __m256i isum32(__m256i h, __m256i ones) { return _mm256_madd_epi16(h, ones); }
#endif

AI void load_acc(__m256 *fa, const int rx, const float *y, int64_t ys, __m256i m, int accum) {
    _Pragma("GCC unroll 8")
    for (int t = 0; t < rx; t++) fa[t] = accum ? _mm256_maskload_ps(y + t * ys, m) : _mm256_setzero_ps();
}
AI void store_acc(const __m256 *fa, const int rx, float *y, int64_t ys, __m256i m) {
    _Pragma("GCC unroll 8")
    for (int t = 0; t < rx; t++) _mm256_maskstore_ps(y + t * ys, m, fa[t]);
}

/* *acc += madd(w, x), the sum kept in acc's register: written out because GCC
 * otherwise adds into the product's register and moves it back, one extra
 * instruction per product (measured: 70.0 -> 72.5 tokens/s from matmuls) */
AI void madd_into(__m256i *acc, __m256i w, __m256i x) {
    __m256i p;
    __asm__("vpmaddwd %2, %3, %1\n\tvpaddd %1, %0, %0" : "+x"(*acc), "=&x"(p) : "x"(w), "x"(x));
}

/* The float sums of the two-panel kernels (kern_q8_0, kern_nib), on the stack:
 * acc[t][h] holds row t's outputs of panel h (np panels; the second's outputs at
 * y + 8, masked by mv). */
AI void pair_acc_load(float acc[][2][8], const int np, const int rx, const float *y, int64_t ys, __m256i m, __m256i mv,
                      int accum) {
    _Pragma("GCC unroll 8")
    for (int t = 0; t < rx; t++) {
        _mm256_store_ps(acc[t][0], accum ? _mm256_maskload_ps(y + t * ys, m) : _mm256_setzero_ps());
        if (np == 2) _mm256_store_ps(acc[t][1], accum ? _mm256_maskload_ps(y + t * ys + 8, mv) : _mm256_setzero_ps());
    }
}
/* acc[t][h] += ia[t][h] · row t's scale xd[t] · the panel's 8 block scales at sh (h 0) or sv (h 1) */
AI void pair_acc_fold(float acc[][2][8], __m256i ia[][2], const int np, const int rx, const uint8_t *sh,
                      const uint8_t *sv, const float *xd) {
    _Pragma("GCC unroll 2")
    for (int h = 0; h < np; h++) {
        const __m256 s = _mm256_load_ps((const float *)(const void *)(h ? sv : sh));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) {
            const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(ia[t][h]), _mm256_set1_ps(xd[t]));
            _mm256_store_ps(acc[t][h], _mm256_fmadd_ps(f, s, _mm256_load_ps(acc[t][h])));
        }
    }
}
AI void pair_acc_store(float acc[][2][8], const int np, const int rx, float *y, int64_t ys, __m256i m, __m256i mv) {
    _Pragma("GCC unroll 8")
    for (int t = 0; t < rx; t++) {
        _mm256_maskstore_ps(y + t * ys, m, _mm256_load_ps(acc[t][0]));
        if (np == 2) _mm256_maskstore_ps(y + t * ys + 8, mv, _mm256_load_ps(acc[t][1]));
    }
}

/* Q8_0 over one panel (np = 1) or two (np = 2, 16 outputs; pv the second): each
 * activation broadcast then serves two weight vectors, and the broadcasts, not the
 * multiplies, bound the one-panel loop. The float sums live in acc on the stack (with
 * 2·rx int sums, two weight vectors and a broadcast the registers are full); every
 * output gets the same operations whichever way it is computed. */
AI void kern_q8_0(const uint8_t *pw, const uint8_t *pv, const int np, const uint8_t *px, int64_t nu, const int rx,
                  float *y, int64_t ys, __m256i m, __m256i mv, int accum) {
    const size_t xbs = x_blk_bytes(QT_Q8_0, 1);
    float acc[RXMAX][2][8] __attribute__((aligned(32)));
    pair_acc_load(acc, np, rx, y, ys, m, mv, accum);
    for (int64_t b = 0; b < nu; b++, pw += 544, pv += 544, px += xbs) {
        const int32_t *xi = (const int32_t *)(const void *)px;
        const float *xd = (const float *)(const void *)(px + 16 * XP * 4);
        __m256i ia[RXMAX][2];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) ia[t][0] = ia[t][1] = _mm256_setzero_si256();
        _Pragma(KUNROLL)
        for (int k = 0; k < 16; k++) {
            const __m256i w = _mm256_load_si256((const __m256i *)(const void *)(pw + 32 * k));
            const __m256i v = np == 2 ? _mm256_load_si256((const __m256i *)(const void *)(pv + 32 * k)) : w;
            _Pragma("GCC unroll 8")
            for (int t = 0; t < rx; t++) {
                const __m256i x = bx(xi + k * XP + t);
                madd_into(&ia[t][0], w, x);
                if (np == 2) madd_into(&ia[t][1], v, x);
            }
        }
        pair_acc_fold(acc, ia, np, rx, pw + 512, pv + 512, xd);
    }
    pair_acc_store(acc, np, rx, y, ys, m, mv);
}

#define Q8_0_RX(R) \
    (np == 2 ? kern_q8_0(pw, pv, 2, px, nu, R, y, ys, m, mv, accum) : kern_q8_0(pw, pv, 1, px, nu, R, y, ys, m, mv, accum))
static void run_q8_0(const uint8_t *pw, const uint8_t *pv, int np, const uint8_t *px, int64_t nu, int rx, float *y,
                     int64_t ys, __m256i m, __m256i mv, int accum) {
    switch (rx) {
    case 1: Q8_0_RX(1); break;
    case 2: Q8_0_RX(2); break;
    case 3: Q8_0_RX(3); break;
    default: Q8_0_RX(RXMAX); break;
    }
}
#undef Q8_0_RX

#ifdef MM_AVX2_VNNI
/* IQ4_NL, IQ4_XS, MXFP4 with AVX-VNNI, over one panel (np = 1) or two (np = 2, pv the
 * second, as kern_q8_0): per step one byte shuffle of the nibbles gives level + 128
 * (lut: the levels with the top bit flipped) as u8, and vpdpbusd (u8 × s8 into int32,
 * no saturation) adds 4 products per lane; the sums start at the activations'
 * -128·Σq, so each block's integer sum is exactly Σ level·q, the int16 path's. The
 * float sums live on the stack (2·rx int sums, the lut, two weight vectors and a
 * broadcast fill the registers). */
/* ia[t][h] += the 4-byte products of w against row t's broadcast at x[t], for rx rows */
AI void nib_step(__m256i ia[][2], const int h, const int rx, __m256i w, const int32_t *x) {
    _Pragma("GCC unroll 8")
    for (int t = 0; t < rx; t++) ia[t][h] = _mm256_dpbusd_avx_epi32(ia[t][h], w, bx(x + t));
}
AI void kern_nib(const uint8_t *pw, const uint8_t *pv, const int np, const uint8_t *px, int64_t nu, const int rx,
                 float *y, int64_t ys, __m256i m, __m256i mv, int accum, __m256i lut) {
    const size_t xbs = x_blk_bytes(QT_IQ4_NL, 0);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float acc[RXMAX][2][8] __attribute__((aligned(32)));
    pair_acc_load(acc, np, rx, y, ys, m, mv, accum);
    for (int64_t b = 0; b < nu; b++, pw += 160, pv += 160, px += xbs) {
        const int32_t *xi = (const int32_t *)(const void *)px;
        const float *xd = (const float *)(const void *)(px + 8 * XP * 4);
        __m256i ia[RXMAX][2];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) ia[t][0] = ia[t][1] = bx(xi + 9 * XP + t);
        _Pragma(KUNROLL)
        for (int j = 0; j < 4; j++) { /* vector j: step j in its low nibbles, 4 + j in its high */
            const __m256i w = _mm256_load_si256((const __m256i *)(const void *)(pw + 32 * j));
            const __m256i v = np == 2 ? _mm256_load_si256((const __m256i *)(const void *)(pv + 32 * j)) : w;
            nib_step(ia, 0, rx, _mm256_shuffle_epi8(lut, _mm256_and_si256(w, m4)), xi + j * XP);
            if (np == 2) nib_step(ia, 1, rx, _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4)), xi + j * XP);
            nib_step(ia, 0, rx, _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(w, 4), m4)), xi + (4 + j) * XP);
            if (np == 2)
                nib_step(ia, 1, rx, _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4)),
                         xi + (4 + j) * XP);
        }
        pair_acc_fold(acc, ia, np, rx, pw + 128, pv + 128, xd);
    }
    pair_acc_store(acc, np, rx, y, ys, m, mv);
}

#define NIB_RX(R)                                                                 \
    (np == 2 ? kern_nib(pw, pv, 2, px, nu, R, y, ys, m, mv, accum, lut)         \
             : kern_nib(pw, pv, 1, px, nu, R, y, ys, m, mv, accum, lut))
static void run_nib(const uint8_t *pw, const uint8_t *pv, int np, const uint8_t *px, int64_t nu, int rx, float *y,
                    int64_t ys, __m256i m, __m256i mv, int accum, __m256i lut) {
    switch (rx) {
    case 1: NIB_RX(1); break;
    case 2: NIB_RX(2); break;
    case 3: NIB_RX(3); break;
    default: NIB_RX(RXMAX); break;
    }
}
#undef NIB_RX
#endif

/* Q8_0 over one int8 panel packed ahead (few rows): |w| as u8 against sign(x, w)
 * (|x| <= 127, so a pair is <= 32512), madd to int32 after every step. The
 * activations are interleaved at the group's row count (x_stride), so one row's
 * stream is not spread over four times the cache lines. */
AI void kern_q8_0_narrow(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                  __m256i m, int accum) {
    const size_t xbs = x_blk_bytes_at(QT_Q8_0, 0, rx); /* interleaved at the group's rows */
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 fa[RXMAX];
    load_acc(fa, rx, y, ys, m, accum);
    for (int64_t b = 0; b < nu; b++, pw += Q8_NARROW_UNIT, px += xbs) {
        const int32_t *xi = (const int32_t *)(const void *)px;
        const float *xd = (const float *)(const void *)(px + 8 * rx * 4);
        __m256i ia[RXMAX];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) ia[t] = _mm256_setzero_si256();
        _Pragma(KUNROLL)
        for (int k = 0; k < 8; k++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(pw + 32 * k));
            const __m256i aw = _mm256_sign_epi8(w, w);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < rx; t++) {
                const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bx(xi + k * rx + t), w));
                ia[t] = _mm256_add_epi32(ia[t], _mm256_madd_epi16(p, ones));
            }
        }
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pw + 256)));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++)
            fa[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ia[t]), _mm256_set1_ps(xd[t])), s, fa[t]);
    }
    store_acc(fa, rx, y, ys, m);
}

AI void kern_q4_0(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                  __m256i m, int accum) {
    const size_t xbs = x_blk_bytes(QT_Q4_0, 0);
    const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
    __m256 fa[RXMAX];
    load_acc(fa, rx, y, ys, m, accum);
    for (int64_t b = 0; b < nu; b++, pw += 160, px += xbs) {
        const int32_t *xi = (const int32_t *)(const void *)px;
        const float *xd = (const float *)(const void *)(px + 8 * XP * 4);
        __m256i h[RXMAX];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) h[t] = _mm256_setzero_si256();
        _Pragma(KUNROLL)
        for (int j = 0; j < 4; j++) {
            const __m256i w = _mm256_load_si256((const __m256i *)(const void *)(pw + 32 * j));
            const __m256i lo = _mm256_and_si256(w, m4), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < rx; t++) {
                h[t] = acc_u8s8(h[t], lo, bx(xi + j * XP + t));
                h[t] = acc_u8s8(h[t], hi, bx(xi + (4 + j) * XP + t));
            }
        }
        const __m256 s = _mm256_load_ps((const float *)(const void *)(pw + 128));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) {
            const __m256i i = _mm256_add_epi32(isum32(h[t], ones), bx(xi + 9 * XP + t));
            fa[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(xd[t])), s, fa[t]);
        }
    }
    store_acc(fa, rx, y, ys, m);
}

/* Q4_K: each 64-element unit is two activation blocks (A, then B); one pass over the
 * unit's 8 nibble vectors per block keeps one int16 sum per row live. */
AI void kern_q4_K(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                  __m256i m, int accum) {
    const size_t xbs = x_blk_bytes(QT_Q4_K, 0);
    const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
    __m256 fa[RXMAX];
    load_acc(fa, rx, y, ys, m, accum);
    for (int64_t u = 0; u < nu; u++, pw += 384) {
        _Pragma("GCC unroll 1") /* (unrolled, the 8 weight vectors stay live and spill) */
        for (int half = 0; half < 2; half++, px += xbs) {
            const int32_t *xi = (const int32_t *)(const void *)px;
            const float *xd = (const float *)(const void *)(px + 8 * XP * 4);
            __m256i h[RXMAX];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < rx; t++) h[t] = _mm256_setzero_si256();
            _Pragma(KUNROLL)
            for (int k = 0; k < 8; k++) {
                __m256i w = _mm256_load_si256((const __m256i *)(const void *)(pw + 32 * k));
                if (half) w = _mm256_srli_epi16(w, 4);
                w = _mm256_and_si256(w, m4);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < rx; t++) h[t] = acc_u8s8(h[t], w, bx(xi + k * XP + t));
            }
            const __m256 s = _mm256_load_ps((const float *)(const void *)(pw + 256 + 32 * half));
            const __m256 mn = _mm256_load_ps((const float *)(const void *)(pw + 320 + 32 * half));
            _Pragma("GCC unroll 8")
            for (int t = 0; t < rx; t++) {
                const __m256 f = _mm256_cvtepi32_ps(isum32(h[t], ones));
                fa[t] = _mm256_fmadd_ps(_mm256_mul_ps(f, _mm256_set1_ps(xd[t])), s, fa[t]);
                fa[t] = _mm256_fmadd_ps(mn, _mm256_set1_ps(xd[XP + t]), fa[t]);
            }
        }
    }
    store_acc(fa, rx, y, ys, m);
}

/* Q5_K: 5-bit values (0..31), four maddubs added in int16 (<= 8·31·127 = 31496);
 * also Q4_1 and Q5_1 (their d·u + m as Q5_K's scale and min) and, with `offset`, Q5_0:
 * no min term, the -16·Σq of its u - 16 added to the exact integer sum instead */
AI void kern_u5(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                __m256i m, int accum, const int offset) {
    const size_t xbs = x_blk_bytes(QT_Q5_K, 0);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 fa[RXMAX];
    load_acc(fa, rx, y, ys, m, accum);
    for (int64_t b = 0; b < nu; b++, pw += 320, px += xbs) {
        const int32_t *xi = (const int32_t *)(const void *)px;
        const float *xd = (const float *)(const void *)(px + 8 * XP * 4);
        __m256i ia[RXMAX];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) ia[t] = _mm256_setzero_si256();
        _Pragma("GCC unroll 1")
        for (int q = 0; q < 2; q++) {
            __m256i h[RXMAX];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < rx; t++) h[t] = _mm256_setzero_si256();
            _Pragma(KUNROLL)
            for (int k = 4 * q; k < 4 * q + 4; k++) {
                const __m256i w = _mm256_load_si256((const __m256i *)(const void *)(pw + 32 * k));
                _Pragma("GCC unroll 8")
                for (int t = 0; t < rx; t++) h[t] = acc_u8s8(h[t], w, bx(xi + k * XP + t));
            }
            _Pragma("GCC unroll 8")
            for (int t = 0; t < rx; t++) ia[t] = _mm256_add_epi32(ia[t], isum32(h[t], ones));
        }
        const __m256 s = _mm256_load_ps((const float *)(const void *)(pw + 256));
        const __m256 mn = _mm256_load_ps((const float *)(const void *)(pw + 288));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) {
            if (offset) ia[t] = _mm256_add_epi32(ia[t], bx(xi + 9 * XP + t));
            fa[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ia[t]), _mm256_set1_ps(xd[t])), s, fa[t]);
            if (!offset) fa[t] = _mm256_fmadd_ps(mn, _mm256_set1_ps(xd[XP + t]), fa[t]);
        }
    }
    store_acc(fa, rx, y, ys, m);
}

AI void kern_q5_K(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                  __m256i m, int accum) {
    kern_u5(pw, px, nu, rx, y, ys, m, accum, 0);
}
AI void kern_q5_0(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                  __m256i m, int accum) {
    kern_u5(pw, px, nu, rx, y, ys, m, accum, 1);
}

/* Q6_K and Q3_K (aux: the offset added to the integer sum), Q2_K (`min`: one fma
 * with the group's -dmin·m against d·Σq) */
AI void kern_k16(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                 __m256i m, int accum, const int min) {
    const size_t xbs = x_blk_bytes(QT_Q6_K, 0), ub = min ? 192 : 160;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 fa[RXMAX];
    load_acc(fa, rx, y, ys, m, accum);
    for (int64_t g = 0; g < nu; g++, pw += ub, px += xbs) {
        const int32_t *xi = (const int32_t *)(const void *)px;
        const float *xd = (const float *)(const void *)(px + 4 * XP * 4);
        const __m256i w0 = _mm256_load_si256((const __m256i *)(const void *)pw);
        const __m256i w1 = _mm256_load_si256((const __m256i *)(const void *)(pw + 32));
        const __m256i w2 = _mm256_load_si256((const __m256i *)(const void *)(pw + 64));
        const __m256i w3 = _mm256_load_si256((const __m256i *)(const void *)(pw + 96));
        const __m256 s = _mm256_load_ps((const float *)(const void *)(pw + 128));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < rx; t++) {
            const __m256i z = _mm256_setzero_si256();
            const __m256i h0 = acc_u8s8(acc_u8s8(z, w0, bx(xi + t)), w1, bx(xi + XP + t));
            const __m256i h1 = acc_u8s8(acc_u8s8(z, w2, bx(xi + 2 * XP + t)), w3, bx(xi + 3 * XP + t));
            __m256i i = _mm256_add_epi32(isum32(h0, ones), isum32(h1, ones));
            if (!min) i = _mm256_add_epi32(i, bx(xi + 5 * XP + t));
            fa[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(xd[t])), s, fa[t]);
            if (min)
                fa[t] = _mm256_fmadd_ps(_mm256_load_ps((const float *)(const void *)(pw + 160)), _mm256_set1_ps(xd[XP + t]),
                                        fa[t]);
        }
    }
    store_acc(fa, rx, y, ys, m);
}
AI void kern_q6_K(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                  __m256i m, int accum) {
    kern_k16(pw, px, nu, rx, y, ys, m, accum, 0);
}
AI void kern_q2_K(const uint8_t *pw, const uint8_t *px, int64_t nu, const int rx, float *y, int64_t ys,
                  __m256i m, int accum) {
    kern_k16(pw, px, nu, rx, y, ys, m, accum, 1);
}

#define KERN_FN(NAME, KERN)                                                                          \
    static void NAME(const uint8_t *pw, const uint8_t *px, int64_t nu, int rx, float *y, int64_t ys, \
                     __m256i m, int accum) {                                                         \
        switch (rx) {                                                                                \
        case 1: KERN(pw, px, nu, 1, y, ys, m, accum); break;                                         \
        case 2: KERN(pw, px, nu, 2, y, ys, m, accum); break;                                         \
        case 3: KERN(pw, px, nu, 3, y, ys, m, accum); break;                                         \
        case 4: KERN(pw, px, nu, 4 < RXMAX ? 4 : RXMAX, y, ys, m, accum); break;                     \
        case 5: KERN(pw, px, nu, 5 < RXMAX ? 5 : RXMAX, y, ys, m, accum); break;                     \
        case 6: KERN(pw, px, nu, 6 < RXMAX ? 6 : RXMAX, y, ys, m, accum); break;                     \
        case 7: KERN(pw, px, nu, 7 < RXMAX ? 7 : RXMAX, y, ys, m, accum); break;                     \
        default: KERN(pw, px, nu, RXMAX, y, ys, m, accum); break;                                    \
        }                                                                                            \
    }
KERN_FN(run_q8_0_narrow, kern_q8_0_narrow)
KERN_FN(run_q4_0, kern_q4_0)
KERN_FN(run_q4_K, kern_q4_K)
KERN_FN(run_q5_K, kern_q5_K)
KERN_FN(run_q5_0, kern_q5_0)
KERN_FN(run_q6_K, kern_q6_K)
KERN_FN(run_q2_K, kern_q2_K)

/* ---- Q8_0 packed ahead: 8-row panel P's unit u at (P · n_in/32 + u) · Q8_NARROW_UNIT ---- */

size_t mm_avx2_gemmq_prepack_bytes(uint32_t type, int64_t n_in, int64_t n_out) {
    if (type != QT_Q8_0) return 0;
    return (size_t)((n_out + PR - 1) / PR) * (size_t)(n_in / 32) * Q8_NARROW_UNIT;
}

void mm_avx2_gemmq_prepack(const mm_args *a, int64_t p0, int64_t p1, uint8_t *wp) {
    const int64_t nb = a->n_in / 32;
    for (int64_t P = 2 * p0; P < 2 * p1 && P * PR < a->n_out; P++) { /* (p0, p1: 16-row units) */
        const int nvalid = (int)(a->n_out - P * PR < PR ? a->n_out - P * PR : PR);
        const uint8_t *row[PR];
        panel_rows(a, P * PR, nvalid, row);
        pack_q8_0_narrow(row, nb, wp + (size_t)(P * nb) * Q8_NARROW_UNIT);
    }
}

int mm_avx2_gemmq_rows_prepacked(uint32_t type, int64_t T) {
    return type == QT_Q8_0 && T >= 1 ? 2 * PR : mm_avx2_gemmq_rows(type, T);
}

/* ---- driver -------------------------------------------------------------------------- */

void mm_avx2_gemmq(const mm_args *a, int64_t o0, int64_t o1, void *scratch) {
    const uint32_t type = a->type;
    const int64_t rows = o1 - o0, np = (rows + PR - 1) / PR;
    const int bs = x_bs(type), wide = q8_wide(a), nib = nib_type(type);
#ifdef MM_AVX2_VNNI /* kern_nib's levels + 128 (the top bit flipped) */
    const __m256i lut = _mm256_xor_si256(lut_levels(type), _mm256_set1_epi8((char)0x80));
#endif
    /* int8 panels packed ahead are read in one pass over all of K: each panel is then
     * one sequential stretch (sliced, a slice's panels lie n_in/32 units apart, which
     * streamed at half the speed: 12 against 25 GB/s for 5632-wide rows) */
    const int64_t kc = a->wp && !wide ? a->n_in : kc_of(a->n_in), ng = mm_avx2_gemmq_groups(a->T);
    const size_t pbytes = panel_bytes(type, kc), gbytes = xgroup_bytes(type, a->n_in, wide);
    uint8_t *wbuf = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const size_t step = (size_t)(a->n_in / 32) * Q8_NARROW_UNIT; /* one Q8_0 panel packed ahead */
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);

    for (int64_t k0 = 0; k0 < a->n_in; k0 += kc) {
        const int64_t kn = a->n_in - k0 < kc ? a->n_in - k0 : kc, nu = kn / w_unit(type);
        /* Q8_0's panels packed ahead, this K-slice: panel p at ahead + p · step */
        const uint8_t *ahead = a->wp ? a->wp + (size_t)(o0 / PR) * step + (size_t)(k0 / 32) * Q8_NARROW_UNIT : NULL;
        if (!ahead || wide)
            for (int64_t p = 0; p < np; p++) {
                const int64_t p0 = o0 + p * PR;
                if (ahead) widen_q8_0(ahead + p * step, nu, wbuf + p * pbytes);
                else pack_panel(a, p0, (int)(o1 - p0 < PR ? o1 - p0 : PR), k0, kn, wbuf + p * pbytes);
            }
        const size_t xoff = (size_t)(k0 / bs) * x_blk_bytes(type, wide); /* this K-slice of a group */
        for (int64_t g = 0; g < ng; g++) {
            int64_t t0, t1;
            mm_avx2_gemmq_group(a->T, g, &t0, &t1);
            const int rx = (int)(t1 - t0);
            const uint8_t *px = a->xp + (size_t)g * gbytes + xoff;
            for (int64_t p = 0; p < np; p++) {
                const int64_t p0 = o0 + p * PR;
                const int nvalid = (int)(o1 - p0 < PR ? o1 - p0 : PR);
                const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(nvalid), lane);
                if (ahead && !wide) {
                    run_q8_0_narrow(ahead + p * step, px, nu, rx, a->Y + t0 * a->n_out + p0, a->n_out, m, k0 > 0);
                    continue;
                }
                if (wide || nib) { /* two panels per pass where there are two */
                    const int two = p + 1 < np;
                    const int nv = two ? (int)(o1 - p0 - PR < PR ? o1 - p0 - PR : PR) : 0;
                    const __m256i mv = _mm256_cmpgt_epi32(_mm256_set1_epi32(nv), lane);
                    const uint8_t *pw = wbuf + p * pbytes, *pv = wbuf + (p + two) * pbytes;
                    float *y = a->Y + t0 * a->n_out + p0;
                    if (wide) run_q8_0(pw, pv, 1 + two, px, nu, rx, y, a->n_out, m, mv, k0 > 0);
#ifdef MM_AVX2_VNNI
                    else run_nib(pw, pv, 1 + two, px, nu, rx, y, a->n_out, m, mv, k0 > 0, lut);
#endif
                    p += two;
                    continue;
                }
                float *y = a->Y + t0 * a->n_out + p0;
                const uint8_t *pw = wbuf + p * pbytes;
                switch (type) {
                case QT_Q4_0: run_q4_0(pw, px, nu, rx, y, a->n_out, m, k0 > 0); break;
                case QT_Q4_K: run_q4_K(pw, px, nu, rx, y, a->n_out, m, k0 > 0); break;
                case QT_Q5_K:
                case QT_Q4_1:
                case QT_Q5_1: run_q5_K(pw, px, nu, rx, y, a->n_out, m, k0 > 0); break;
                case QT_Q5_0: run_q5_0(pw, px, nu, rx, y, a->n_out, m, k0 > 0); break;
                case QT_Q6_K:
                case QT_Q3_K: run_q6_K(pw, px, nu, rx, y, a->n_out, m, k0 > 0); break;
                case QT_Q2_K: run_q2_K(pw, px, nu, rx, y, a->n_out, m, k0 > 0); break;
                default: break;
                }
            }
        }
    }
}

#pragma GCC pop_options

#endif
