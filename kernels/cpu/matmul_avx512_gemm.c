/* matmul_avx512_gemm.c — the AVX-512 blocked GEMM for quantized weights (Q8_0, Q4_0,
 * Q2_K, Q3_K, Q4_K, Q6_K, IQ4_NL, IQ4_XS): a chunk of output rows is repacked, one K-slice at a time, into
 * panels laid out for an outer-product microkernel (or the panels were packed once
 * ahead, gemm_prepack, and then serve every row count from one row on), and every
 * activation row then passes over them. IQ4_NL's panels packed ahead serve its
 * 1-3 rows through nl_rows_exact instead, which gives the 256-bit dot kernel's
 * results bit for bit (so IQ4_NL computes the same packed or not).
 *
 * Panels are 16 rows interleaved so one zmm holds 4 consecutive weights of each of
 * the 16 rows; vpdpbusd against a broadcast of 4 activation bytes gives 16 outputs
 * × 4 products. Q8_0 and Q4_0 panels hold unsigned bytes (w + 128); the K-quants'
 * panels stay about as small as the file (Q4_K: the nibbles as gathered, two blocks
 * to a byte; Q6_K: a four-bit and a two-bit plane; both with their six-/eight-bit
 * scales as bytes) and are unpacked in registers, once per pass for all its rows;
 * IQ4_NL and IQ4_XS keep the file's nibbles as gathered too (IQ4_XS's six-bit scales
 * as int8 ls - 32), turned into level + 128 by one byte shuffle per step, so they run
 * Q8_0's arithmetic (accumulators from -128·Σq, one scale per 32-block).
 * Q2_K and Q3_K run Q6_K's 16-group units: their 2-bit planes (and Q3_K's high-bit
 * mask) stay as gathered and are unpacked by a shift and a mask per step; Q2_K's
 * min term is one fma per group against d·Σq (converted when the activations are
 * packed), Q3_K's values enter as u + 4 (0..7) with the accumulators at -4·Σq.
 * The integer sums of one unit (a 32-block; Q6_K's 16-group) are scaled once per
 * unit: 8 (4) vpdpbusd then cvt, mul, fma. The kernel (kern_i8_pair) takes two
 * panels per call for up to 12 activation rows, which halves the broadcasts and
 * keeps enough independent sums in flight that a few rows cost little more than one
 * (for Q8_0 and Q4_0; the K-quants' unpacking and per-unit scaling make them
 * compute-bound from ~4 rows on). Packed weights are prefetched PF_DIST ahead, as
 * they stream from memory once per call. Weights enter as w + 128 (Q8_0, Q4_0) or
 * w + 32 (Q6_K), the accumulators starting at the matching -128·Σq / -32·Σq of the
 * activations; Q4_K's nibbles are used as they are and its min term is one extra fma
 * per unit. Panels are filled with gathers (one dword from each of 16 rows).
 *
 * The quantized activations are interleaved once per call, per group of rx rows
 * ([k/4][rx] dwords per unit, then the unit's scales and sums), so every broadcast
 * is a constant offset from one pointer and a few rows take a few cache lines. Y is
 * written per K-slice (accumulated after the first); every output's arithmetic is
 * fixed by the shapes alone, the same at every row count. */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")

#include <immintrin.h>

#include "kernels/cpu/matmul_avx512_gemm.h"
#include "kernels/cpu/matmul_avx512_util.h"

enum {
    RXMAX = 12,   /* activation rows per microkernel call */
    XP = 16,      /* room per group of packed activations (rows; RXMAX at most) */
    KC_I8 = 2048, /* K-slice (multiple of 256) */
    PR_I8 = 16,   /* rows per panel */
};
#ifndef PF_DIST
#define PF_DIST 4096 /* bytes of packed weights prefetched ahead (into L2) */
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T1
#endif

typedef enum { KIND_INIT32, KIND_MIN32, KIND_INIT16, KIND_NL32, KIND_XS32, KIND_Q2K16, KIND_Q3K16 } i8_kind;

/* A panel is a run of super-blocks: one 32-block (Q8_0, Q4_0) or 256 elements
 * (the K-quants) of its 16 rows, each made of units (32-blocks; Q6_K's 16-groups)
 * that share one scale per row. Bytes of a super-block: */
enum {
    SBW_I32 = 32 * 16 + 64,                     /* u8[8][16][4] (w + 128), f32 s[16] */
    SBW_Q4K = 128 + 256 + 4 * 512,              /* 2432, the file's 2304 */
    SBW_Q6K = 64 + 256 + 8 * (256 + 128),       /* 3392, the file's 3360 */
    SBW_NL = 256 + 64,                          /* 320, the file's 288 */
    SBW_XS = 64 + 128 + 8 * 256,                /* 2240, the file's 2176 */
    SBW_Q2K = 64 + 64 + 256 + 1024,             /* 1408, the file's 1344 */
    SBW_Q3K = 64 + 256 + 512 + 1024,            /* 1856, the file's 1760 */
};
#define KIND_16(kind) ((kind) == KIND_INIT16 || (kind) == KIND_Q2K16 || (kind) == KIND_Q3K16)
#define SB_UNITS(kind) ((kind) == KIND_INIT32 || (kind) == KIND_NL32 ? 1 : KIND_16(kind) ? 16 : 8)
#define SB_BYTES(kind)                                                                                   \
    ((size_t)((kind) == KIND_INIT32 ? SBW_I32 : (kind) == KIND_MIN32 ? SBW_Q4K : (kind) == KIND_INIT16 ? SBW_Q6K \
              : (kind) == KIND_NL32 ? SBW_NL : (kind) == KIND_Q2K16 ? SBW_Q2K : (kind) == KIND_Q3K16 ? SBW_Q3K : SBW_XS))

static int i8_bs(uint32_t t) { return t == QT_Q6_K || t == QT_Q2_K || t == QT_Q3_K ? 16 : 32; }
static i8_kind i8_kind_of(uint32_t t) {
    switch (t) {
    case QT_Q6_K: return KIND_INIT16;
    case QT_Q2_K: return KIND_Q2K16;
    case QT_Q3_K: return KIND_Q3K16;
    case QT_Q4_K: return KIND_MIN32;
    case QT_IQ4_NL: return KIND_NL32;
    case QT_IQ4_XS: return KIND_XS32;
    default: return KIND_INIT32;
    }
}
/* elements of one super-block */
static int64_t i8_sbe(uint32_t t) { return (int64_t)i8_bs(t) * SB_UNITS(i8_kind_of(t)); }
/* bytes of one packed activation block of a group of rx rows: int32 q[bs/4][rx],
 * f32 d[rx], aux[rx] (rows side by side, so a few rows take a few cache lines) */
static size_t i8_xbs(int bs, int rx) { return (size_t)(bs / 4 + 2) * (size_t)rx * 4; }

static int64_t kc_of(int64_t n_in) { return n_in < KC_I8 ? n_in : KC_I8; }
static int64_t n_slices(int64_t n_in) { return (n_in + kc_of(n_in) - 1) / kc_of(n_in); }

static size_t panel_bytes(uint32_t type, int64_t kc) { return (size_t)(kc / i8_sbe(type)) * SB_BYTES(i8_kind_of(type)); }
/* A panel packed ahead: its K-slices end to end, the last one as short as its
 * elements (n_in a multiple of the super-block), so slice s starts at
 * s·panel_bytes(kc) and the matrix holds no gaps. */
static size_t packed_panel_bytes(uint32_t type, int64_t n_in) { return panel_bytes(type, n_in); }

/* bytes set aside for one group's packed activations over all of n_in */
static size_t xgroup_bytes(uint32_t type, int64_t n_in) {
    return (size_t)(n_in / i8_bs(type)) * i8_xbs(i8_bs(type), XP);
}

int64_t mm_avx512_gemmq_groups(int64_t T) { return (T + RXMAX - 1) / RXMAX; }

/* group g of ng: rows [g*T/ng, (g+1)*T/ng), sizes differ by at most one */
void mm_avx512_gemmq_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1) {
    const int64_t ng = mm_avx512_gemmq_groups(T);
    *t0 = g * T / ng;
    *t1 = (g + 1) * T / ng;
}

size_t mm_avx512_gemmq_xp_bytes(uint32_t type, int64_t n_in, int64_t T) {
    return (size_t)mm_avx512_gemmq_groups(T) * xgroup_bytes(type, n_in);
}

size_t mm_avx512_gemmq_scratch(uint32_t type, int64_t n_in, int64_t rows) {
    return (size_t)((rows + PR_I8 - 1) / PR_I8) * panel_bytes(type, kc_of(n_in)) + 64;
}

/* ---- packing quantized weights: one 16-row panel, blocks [b0, b0 + nb) ---------------- */

#define GATHER(m, vidx, p) _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), (m), (vidx), (const void *)(p), 1)

/* fp16 in the low (shift 0) or high (shift 16) half of each dword → f32 */
static inline __m512 half_to_ps(__m512i v, int hi) {
    if (hi) v = _mm512_srli_epi32(v, 16);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

static void pack_q8_0(const uint8_t *base, __m512i vidx, __mmask16 m, int64_t nb, uint8_t *dst) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; b++, base += sizeof(block_q8_0), dst += 32 * 16 + 64) {
        for (int k = 0; k < 8; k++)
            _mm512_store_si512(dst + 64 * k, _mm512_xor_si512(GATHER(m, vidx, base + 2 + 4 * k), bias));
        _mm512_store_ps(dst + 512, half_to_ps(GATHER(m, vidx, base), 0));
    }
}

static void pack_q4_0(const uint8_t *base, __m512i vidx, __mmask16 m, int64_t nb, uint8_t *dst) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), bias = _mm512_set1_epi8(120); /* u-8+128 */
    for (int64_t b = 0; b < nb; b++, base += sizeof(block_q4_0), dst += 32 * 16 + 64) {
        for (int j = 0; j < 4; j++) {
            const __m512i g = GATHER(m, vidx, base + 2 + 4 * j);
            _mm512_store_si512(dst + 64 * j, _mm512_add_epi8(_mm512_and_si512(g, m4), bias));
            _mm512_store_si512(dst + 64 * (4 + j),
                               _mm512_add_epi8(_mm512_and_si512(_mm512_srli_epi32(g, 4), m4), bias));
        }
        _mm512_store_ps(dst + 512, half_to_ps(GATHER(m, vidx, base), 0));
    }
}

/* Q4_K, per super-block: f32 d[16], f32 -dmin[16], u8 sc[8][16], u8 mn[8][16] (the
 * six-bit scales and mins of its 8 blocks), then the 128 nibble bytes of each row as
 * gathered: 4 runs of u8[8][16][4], run r holding block 2r in its low and block
 * 2r + 1 in its high nibbles. nb counts 32-blocks (a multiple of 8). */
static void pack_q4_K(const uint8_t *base, __m512i vidx, __mmask16 m, int64_t nb, uint8_t *dst) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi8(0x3f), m2 = _mm512_set1_epi8(0x03);
    for (int64_t sb = 0; sb < nb / 8; sb++, base += sizeof(block_q4_K), dst += SBW_Q4K) {
        const __m512i dd = GATHER(m, vidx, base);
        _mm512_store_ps(dst, half_to_ps(dd, 0));
        _mm512_store_ps(dst + 64, _mm512_sub_ps(_mm512_setzero_ps(), half_to_ps(dd, 1)));
        const __m512i u0 = GATHER(m, vidx, base + 4), u1 = GATHER(m, vidx, base + 8);
        const __m512i u2 = GATHER(m, vidx, base + 12);
        __m512i sc[2], mn[2]; /* bytes: scales 0-3 / 4-7, mins 0-3 / 4-7 of each row */
        sc[0] = _mm512_and_si512(u0, m6);
        sc[1] = _mm512_or_si512(_mm512_and_si512(u2, m4),
                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), m2), 4));
        mn[0] = _mm512_and_si512(u1, m6);
        mn[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m4),
                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), m2), 4));
        for (int j = 0; j < 8; j++) {
            const int sh = 8 * (j & 3);
            _mm_store_si128((__m128i *)(void *)(dst + 128 + 16 * j),
                            _mm512_cvtepi32_epi8(_mm512_srli_epi32(sc[j >> 2], sh)));
            _mm_store_si128((__m128i *)(void *)(dst + 256 + 16 * j),
                            _mm512_cvtepi32_epi8(_mm512_srli_epi32(mn[j >> 2], sh)));
        }
        for (int r = 0; r < 4; r++)
            for (int k = 0; k < 8; k++)
                _mm512_store_si512(dst + 384 + 512 * r + 64 * k, GATHER(m, vidx, base + 16 + 32 * r + 4 * k));
    }
}

/* Q6_K, per super-block: f32 d[16], i8 sc[16][16] (group g's scale of each row), then
 * the 16-groups in pairs (2r, 2r + 1), 384 bytes each: u8[4][16][4] of the low four
 * bits (group 2r in the low, 2r + 1 in the high nibbles), then for each of the two
 * groups u8[16][4] of the high two bits (step k at bits 2k, 2k + 1). Values are
 * w + 32 (0..63). nb counts 16-groups (a multiple of 16). */
static void pack_q6_K(const uint8_t *base, __m512i vidx, __mmask16 m, int64_t nb, uint8_t *dst) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03);
    for (int64_t sb = 0; sb < nb / 16; sb++, base += sizeof(block_q6_K), dst += SBW_Q6K) {
        /* d sits at bytes 208-209, the block's end: read the dword at 206 */
        _mm512_store_ps(dst, half_to_ps(GATHER(m, vidx, base + 206), 1));
        for (int q = 0; q < 4; q++) {
            const __m512i sw = GATHER(m, vidx, base + 192 + 4 * q);
            for (int j = 0; j < 4; j++)
                _mm_store_si128((__m128i *)(void *)(dst + 64 + 16 * (4 * q + j)),
                                _mm512_cvtepi32_epi8(_mm512_srli_epi32(sw, 8 * j)));
        }
        __m512i u[16][4]; /* group g, step k: 16 rows × 4 six-bit values */
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 8; i++) {
                const __m512i A = GATHER(m, vidx, base + 64 * h + 4 * i);
                const __m512i B = GATHER(m, vidx, base + 64 * h + 32 + 4 * i);
                const __m512i Q = GATHER(m, vidx, base + 128 + 32 * h + 4 * i);
                for (int c = 0; c < 4; c++) {
                    __m512i nib = (c & 1) ? B : A;
                    if (c >> 1) nib = _mm512_srli_epi32(nib, 4);
                    const __m512i hb = _mm512_and_si512(_mm512_srli_epi32(Q, 2 * c), m2);
                    u[8 * h + 2 * c + (i >> 2)][i & 3] =
                        _mm512_or_si512(_mm512_and_si512(nib, m4), _mm512_slli_epi32(hb, 4));
                }
            }
        for (int r = 0; r < 8; r++) {
            uint8_t *o = dst + 320 + 384 * r;
            for (int k = 0; k < 4; k++)
                _mm512_store_si512(o + 64 * k, _mm512_or_si512(_mm512_and_si512(u[2 * r][k], m4),
                                                               _mm512_slli_epi16(_mm512_and_si512(u[2 * r + 1][k], m4), 4)));
            for (int j = 0; j < 2; j++) {
                __m512i hi = _mm512_setzero_si512();
                for (int k = 0; k < 4; k++)
                    hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(u[2 * r + j][k], 4), m2), 2 * k));
                _mm512_store_si512(o + 256 + 64 * j, hi);
            }
        }
    }
}

/* IQ4_NL, per 32-block: the 16 nibble bytes of each row as gathered, u8[4][16][4] (dword
 * j: elements 4j..4j+3 in the low nibbles, 16+4j.. in the high), then f32 d[16]; the
 * levels are looked up in registers (a byte shuffle) */
static void pack_iq4_nl(const uint8_t *base, __m512i vidx, __mmask16 m, int64_t nb, uint8_t *dst) {
    for (int64_t b = 0; b < nb; b++, base += sizeof(block_iq4_nl), dst += SBW_NL) {
        for (int j = 0; j < 4; j++) _mm512_store_si512(dst + 64 * j, GATHER(m, vidx, base + 2 + 4 * j));
        _mm512_store_ps(dst + 256, half_to_ps(GATHER(m, vidx, base), 0));
    }
}

/* IQ4_XS, per super-block: f32 d[16], i8 sc[8][16] (ls - 32 of sub-block j of each row),
 * then each sub-block's nibbles as IQ4_NL's. nb counts 32-blocks (a multiple of 8). */
static void pack_iq4_xs(const uint8_t *base, __m512i vidx, __mmask16 m, int64_t nb, uint8_t *dst) {
    const __m512i m4 = _mm512_set1_epi32(0xf), m2 = _mm512_set1_epi32(3), b32 = _mm512_set1_epi32(32);
    for (int64_t sb = 0; sb < nb / 8; sb++, base += sizeof(block_iq4_xs), dst += SBW_XS) {
        const __m512i dh = GATHER(m, vidx, base), sl = GATHER(m, vidx, base + 4);
        _mm512_store_ps(dst, half_to_ps(dh, 0));
        const __m512i sh = _mm512_srli_epi32(dh, 16);
        for (int j = 0; j < 8; j++) {
            const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, 4 * j), m4); /* byte j/2, nibble j&1 */
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * j), m2);
            const __m512i ls = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), b32);
            _mm_store_si128((__m128i *)(void *)(dst + 64 + 16 * j), _mm512_cvtepi32_epi8(ls));
            for (int k = 0; k < 4; k++)
                _mm512_store_si512(dst + 192 + 256 * j + 64 * k, GATHER(m, vidx, base + 8 + 16 * j + 4 * k));
        }
    }
}

/* Q2_K, per super-block: f32 d[16], f32 -dmin[16], the 16 scale bytes of each row as
 * gathered, u8[4][16][4] (dword q: groups 4q..4q+3, scale in the low and min in the
 * high nibble), then the 64 bytes of 2-bit quants as gathered, u8[16][16][4]: dword
 * 8n + 4h + k at shift 2j holds elements 4k..4k+3 of 16-group 8n + 2j + h (the file's
 * order). Values are u (0..3), the min term one extra fma per group. nb counts
 * 16-groups (a multiple of 16). */
static void pack_q2_K(const uint8_t *base, __m512i vidx, __mmask16 m, int64_t nb, uint8_t *dst) {
    for (int64_t sb = 0; sb < nb / 16; sb++, base += sizeof(block_q2_K), dst += SBW_Q2K) {
        const __m512i dd = GATHER(m, vidx, base + offsetof(block_q2_K, d));
        _mm512_store_ps(dst, half_to_ps(dd, 0));
        _mm512_store_ps(dst + 64, _mm512_sub_ps(_mm512_setzero_ps(), half_to_ps(dd, 1)));
        for (int q = 0; q < 4; q++)
            _mm512_store_si512(dst + 128 + 64 * q, GATHER(m, vidx, base + offsetof(block_q2_K, scales) + 4 * q));
        for (int s = 0; s < 16; s++)
            _mm512_store_si512(dst + 384 + 64 * s, GATHER(m, vidx, base + offsetof(block_q2_K, qs) + 4 * s));
    }
}

/* Q3_K, per super-block: f32 d[16], i8 sc[16][16] (sc - 32 of group g of each row),
 * the 32 hmask bytes as gathered, u8[8][16][4] (dword 4h + k, bit 4n + j: elements
 * 4k..4k+3 of group 8n + 2j + h), then the 2-bit quants as Q2_K's. Values are u + 4
 * (0..7); the accumulators start at -4·Σq. nb counts 16-groups (a multiple of 16). */
static void pack_q3_K(const uint8_t *base, __m512i vidx, __mmask16 m, int64_t nb, uint8_t *dst) {
    const __m512i k2 = _mm512_set1_epi32(0x0f0f0f0f), k1 = _mm512_set1_epi32(0x03030303);
    const __m512i b32 = _mm512_set1_epi8(32);
    for (int64_t sb = 0; sb < nb / 16; sb++, base += sizeof(block_q3_K), dst += SBW_Q3K) {
        /* d sits at bytes 108-109, the block's end: read the dword at 106 */
        _mm512_store_ps(dst, half_to_ps(GATHER(m, vidx, base + 106), 1));
        const uint8_t *scp = base + offsetof(block_q3_K, scales);
        const __m512i a0 = GATHER(m, vidx, scp), a1 = GATHER(m, vidx, scp + 4), t = GATHER(m, vidx, scp + 8);
        __m512i sc[4]; /* bytes: scales 4q..4q+3 of each row (ggml's bit trick) */
        sc[0] = _mm512_or_si512(_mm512_and_si512(a0, k2), _mm512_slli_epi32(_mm512_and_si512(t, k1), 4));
        sc[1] = _mm512_or_si512(_mm512_and_si512(a1, k2),
                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t, 2), k1), 4));
        sc[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a0, 4), k2),
                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t, 4), k1), 4));
        sc[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a1, 4), k2),
                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t, 6), k1), 4));
        for (int g = 0; g < 16; g++)
            _mm_store_si128((__m128i *)(void *)(dst + 64 + 16 * g),
                            _mm512_cvtepi32_epi8(_mm512_srli_epi32(_mm512_sub_epi8(sc[g >> 2], b32), 8 * (g & 3))));
        for (int s = 0; s < 8; s++)
            _mm512_store_si512(dst + 320 + 64 * s, GATHER(m, vidx, base + offsetof(block_q3_K, hmask) + 4 * s));
        for (int s = 0; s < 16; s++)
            _mm512_store_si512(dst + 832 + 64 * s, GATHER(m, vidx, base + offsetof(block_q3_K, qs) + 4 * s));
    }
}

/* Packs rows [p0, p0 + nvalid) (nvalid <= 16) of quantized W, elements [k0, k0 + kn). */
static void pack_i8_panel(const mm_args *a, int64_t p0, int nvalid, int64_t k0, int64_t kn, uint8_t *dst) {
    const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)a->w_stride));
    const __mmask16 m = row_mask(nvalid);
    const uint8_t *row0 = a->W + (size_t)p0 * a->w_stride;
    switch (a->type) {
    case QT_Q8_0: pack_q8_0(row0 + (size_t)(k0 / 32) * sizeof(block_q8_0), vidx, m, kn / 32, dst); break;
    case QT_Q4_0: pack_q4_0(row0 + (size_t)(k0 / 32) * sizeof(block_q4_0), vidx, m, kn / 32, dst); break;
    case QT_Q4_K: pack_q4_K(row0 + (size_t)(k0 / 256) * sizeof(block_q4_K), vidx, m, kn / 32, dst); break;
    case QT_Q6_K: pack_q6_K(row0 + (size_t)(k0 / 256) * sizeof(block_q6_K), vidx, m, kn / 16, dst); break;
    case QT_IQ4_NL: pack_iq4_nl(row0 + (size_t)(k0 / 32) * sizeof(block_iq4_nl), vidx, m, kn / 32, dst); break;
    case QT_IQ4_XS: pack_iq4_xs(row0 + (size_t)(k0 / 256) * sizeof(block_iq4_xs), vidx, m, kn / 32, dst); break;
    case QT_Q2_K: pack_q2_K(row0 + (size_t)(k0 / 256) * sizeof(block_q2_K), vidx, m, kn / 16, dst); break;
    case QT_Q3_K: pack_q3_K(row0 + (size_t)(k0 / 256) * sizeof(block_q3_K), vidx, m, kn / 16, dst); break;
    default: break;
    }
}

/* ---- packing activations ------------------------------------------------------------ */

/* Quantized: rows [t0, t0 + rx), elements [k0, k0 + kn) (multiples of 64) → per block
 * int32 q[bs/4][rx], f32 d[rx], aux[rx]. */
static void pack_x_i8(const mm_args *a, int64_t t0, int rx, int64_t k0, int64_t kn, int bs, uint8_t *dst) {
    const size_t xbs = i8_xbs(bs, rx);
    const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)a->xq_stride));
    const __mmask16 m = row_mask(rx);
    const uint8_t *x0 = a->xq + (size_t)t0 * a->xq_stride;
    const int64_t n = a->n_in;
    /* q: 64 elements (16 dwords) of each row at a time, transposed */
    for (int64_t k = 0; k < kn; k += 64) {
        const int nd = kn - k < 64 ? (int)(kn - k) / 4 : 16; /* 8 at a 32-element tail */
        const __mmask16 dm = row_mask(nd);
        __m512 r[16];
        for (int t = 0; t < 16; t++)
            r[t] = t < rx ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(dm, x0 + (size_t)t * a->xq_stride + k0 + k))
                          : _mm512_setzero_ps();
        tr16(r);
        /* dword j of the 64 elements is k4 = j % (bs/4) of block j / (bs/4) */
        for (int j = 0; j < nd; j++) {
            const int64_t blk = (k + 4 * j) / bs, k4 = j % (bs / 4);
            _mm512_mask_storeu_ps(dst + blk * xbs + k4 * rx * 4, m, r[j]);
        }
    }
    /* d (per 32) and aux (per block) */
    const int64_t nblk = kn / bs, b0 = k0 / bs;
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t gb = b0 + b;
        uint8_t *db = dst + b * xbs + (size_t)(bs / 4) * rx * 4;
        const int64_t di = bs == 32 ? gb : gb / 2;
        const __m512i dv = GATHER(m, vidx, x0 + n + 4 * di);
        __m512i av = GATHER(m, vidx, x0 + n + 4 * (n / 32) + 4 * gb);
        if (a->type == QT_Q2_K) /* Σq → d·Σq, for the min term's fma */
            av = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(av), _mm512_castsi512_ps(dv)));
        else if (a->type == QT_Q3_K) /* Σq → -4·Σq, the accumulators' start for u + 4 */
            av = _mm512_mullo_epi32(av, _mm512_set1_epi32(-4));
        _mm512_mask_storeu_epi32(db, m, dv);
        _mm512_mask_storeu_epi32(db + rx * 4, m, av);
    }
}

void mm_avx512_gemmq_pack_x(const mm_args *a, int64_t g, uint8_t *xp) {
    int64_t t0, t1;
    mm_avx512_gemmq_group(a->T, g, &t0, &t1);
    uint8_t *dst = xp + (size_t)g * xgroup_bytes(a->type, a->n_in);
    pack_x_i8(a, t0, (int)(t1 - t0), 0, a->n_in, i8_bs(a->type), dst);
}

/* ---- microkernels -------------------------------------------------------------------- */

/* Step k (4 elements of each of the 16 rows) of unit 2·pair + odd of a super-block,
 * as unsigned bytes for vpdpbusd. */
MM_AI __m512i unit_w(const uint8_t *sb, const i8_kind kind, int pair, const int odd, const int k) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    if (kind == KIND_INIT32) return _mm512_load_si512(sb + 64 * k);
    if (kind == KIND_NL32 || kind == KIND_XS32) { /* IQ4: the level + 128 of each nibble */
        const uint8_t *nb = kind == KIND_NL32 ? sb : sb + 192 + 256 * (2 * pair + odd);
        const __m512i g = _mm512_load_si512(nb + 64 * (k & 3));
        const __m512i lut = _mm512_broadcast_i32x4(_mm_xor_si128(
            _mm_loadu_si128((const __m128i *)(const void *)iq4nl_values), _mm_set1_epi8((char)0x80)));
        return _mm512_shuffle_epi8(lut, _mm512_and_si512(k >= 4 ? _mm512_srli_epi16(g, 4) : g, m4));
    }
    if (kind == KIND_MIN32) {
        const __m512i g = _mm512_load_si512(sb + 384 + 512 * pair + 64 * k);
        return _mm512_and_si512(odd ? _mm512_srli_epi16(g, 4) : g, m4);
    }
    if (kind == KIND_Q2K16 || kind == KIND_Q3K16) { /* group 8n + 2j + h */
        const int u = 2 * pair + odd, n = u >> 3, j = (u >> 1) & 3, h = u & 1;
        const __m512i q = _mm512_load_si512(sb + (kind == KIND_Q2K16 ? 384 : 832) + 64 * (8 * n + 4 * h + k));
        const __m512i lo = _mm512_and_si512(j ? _mm512_srli_epi16(q, 2 * j) : q, _mm512_set1_epi8(3));
        if (kind == KIND_Q2K16) return lo;
        const __m512i hm = _mm512_load_si512(sb + 320 + 64 * (4 * h + k));
        const int sh = 4 * n + j; /* the bit, moved to bit 2 */
        const __m512i hb = sh > 2 ? _mm512_srli_epi16(hm, sh - 2) : sh < 2 ? _mm512_slli_epi16(hm, 2 - sh) : hm;
        return _mm512_or_si512(lo, _mm512_and_si512(hb, _mm512_set1_epi8(4)));
    }
    const uint8_t *pr = sb + 320 + 384 * pair;
    const __m512i n = _mm512_load_si512(pr + 64 * k), h = _mm512_load_si512(pr + 256 + 64 * odd);
    const __m512i lo = _mm512_and_si512(odd ? _mm512_srli_epi16(n, 4) : n, m4);
    const __m512i hs = k == 0 ? _mm512_slli_epi16(h, 4)
                     : k == 1 ? _mm512_slli_epi16(h, 2)
                     : k == 2 ? h
                              : _mm512_srli_epi16(h, 2);
    return _mm512_or_si512(lo, _mm512_and_si512(hs, _mm512_set1_epi8(0x30)));
}

/* Unit u's per-row scale (and, Q4_K, -dmin·min) as floats. */
MM_AI __m512 unit_scale(const uint8_t *sb, const i8_kind kind, int u, __m512 *mn) {
    if (kind == KIND_INIT32) return _mm512_load_ps(sb + 512);
    if (kind == KIND_NL32) return _mm512_load_ps(sb + 256);
    if (kind == KIND_XS32)
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(const void *)(sb + 64 + 16 * u)))),
                             _mm512_load_ps(sb));
    if (kind == KIND_Q2K16) { /* scale and min nibbles of group u */
        const __m512i v = _mm512_srli_epi32(_mm512_load_si512(sb + 128 + 64 * (u >> 2)), 8 * (u & 3));
        const __m512i m4 = _mm512_set1_epi32(0xf);
        *mn = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 4), m4)), _mm512_load_ps(sb + 64));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, m4)), _mm512_load_ps(sb));
    }
    if (kind == KIND_MIN32) {
        *mn = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(const void *)(sb + 256 + 16 * u)))),
                            _mm512_load_ps(sb + 64));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(const void *)(sb + 128 + 16 * u)))),
                             _mm512_load_ps(sb));
    }
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(const void *)(sb + 64 + 16 * u)))),
                         _mm512_load_ps(sb));
}

#define RX_SWITCH(rx, CALL)                                                               \
    switch (rx) {                                                                        \
    case 1: CALL(1); break;  case 2: CALL(2); break;   case 3: CALL(3); break;           \
    case 4: CALL(4); break;  case 5: CALL(5); break;   case 6: CALL(6); break;           \
    case 7: CALL(7); break;  case 8: CALL(8); break;   case 9: CALL(9); break;           \
    case 10: CALL(10); break; case 11: CALL(11); break; default: CALL(12); break;        \
    }

/* Two panels (32 outputs) × rx activation rows (up to RXMAX) over nsb super-blocks,
 * for every weight kind and row count: every activation broadcast feeds two
 * vpdpbusd, and each unpacked weight vector (the K-quants' nibbles and high bits)
 * serves all the rows of a pass. Up to 8 rows (4 for Q8_0 and Q4_0), the 2·rx float
 * sums stay in registers and the integer sums are taken four rows at a time (the
 * second four re-read the unit's weights from L1); beyond that all 2·rx integer sums are in
 * registers, enough independent chains to cover vpdpbusd's latency, and the float
 * sums go to an L1 buffer once per unit. A row's arithmetic is the same at every rx,
 * so a batched row equals the row alone bit for bit. pw1 may equal pw0 with m1 = 0
 * (an odd last panel): its lanes are computed, never stored. */
MM_AI void kern_i8_pair(const uint8_t *pw0, const uint8_t *pw1, const uint8_t *px, int64_t nsb, const int rx,
                        const i8_kind kind, float *y, int64_t ys, __mmask16 m0, __mmask16 m1, int accum) {
    enum { RG = 4 };
    const int bs = KIND_16(kind) ? 16 : 32, nk = bs / 4, nu = SB_UNITS(kind);
    const int nu2 = kind == KIND_INIT32 || kind == KIND_NL32 ? 1 : 2; /* units taken together (sharing bytes) */
    const size_t sbw = SB_BYTES(kind), xbs = (size_t)(nk + 2) * rx * 4;
    const int pf_lines = (int)((sbw / 64 + (size_t)nu - 1) / (size_t)nu); /* lines prefetched per unit */
    /* Q8_0 and Q4_0 from 5 rows on: one pass with the float sums in L1 beats
     * loading the weights twice (8 rows: 1.25 vs 1.4x one row); the K-quants'
     * heavier passes gain nothing from it */
    const int in_regs = rx <= (kind == KIND_INIT32 || kind == KIND_NL32 ? 4 : 8), rg_max = in_regs ? RG : rx;
    __m512 f0[8], f1[8];
    float fm[RXMAX][32] __attribute__((aligned(64)));
    _Pragma("GCC unroll 16")
    for (int t = 0; t < rx; t++) {
        const __m512 a0 = accum ? _mm512_maskz_loadu_ps(m0, y + t * ys) : _mm512_setzero_ps();
        const __m512 a1 = accum ? _mm512_maskz_loadu_ps(m1, y + t * ys + 16) : _mm512_setzero_ps();
        if (in_regs) {
            f0[t & 7] = a0;
            f1[t & 7] = a1;
        } else {
            _mm512_store_ps(fm[t], a0);
            _mm512_store_ps(fm[t] + 16, a1);
        }
    }
    for (int64_t b = 0; b < nsb; b++, pw0 += sbw, pw1 += sbw) {
        for (int u2 = 0; u2 < nu; u2 += nu2) {
            _Pragma("GCC unroll 2")
            for (int odd = 0; odd < nu2; odd++) {
                const int u = u2 + odd;
                /* packed weights are read once, in address order: keep the stream ahead */
                _Pragma("GCC unroll 16")
                for (int l = 0; l < pf_lines; l++) {
                    _mm_prefetch((const char *)pw0 + PF_DIST + 64 * (u * pf_lines + l), PF_HINT);
                    _mm_prefetch((const char *)pw1 + PF_DIST + 64 * (u * pf_lines + l), PF_HINT);
                }
                const int32_t *xi = (const int32_t *)(const void *)px;
                const float *xf = (const float *)(const void *)px;
                px += xbs;
                __m512 mn0 = _mm512_setzero_ps(), mn1 = _mm512_setzero_ps();
                const __m512 s0 = unit_scale(pw0, kind, u, &mn0), s1 = unit_scale(pw1, kind, u, &mn1);
                _Pragma("GCC unroll 16")
                for (int g = 0; g < rx; g += rg_max) {
                    const int rg = rx - g < rg_max ? rx - g : rg_max;
                    __m512i i0[RXMAX], i1[RXMAX];
                    _Pragma("GCC unroll 16")
                    for (int t = 0; t < rg; t++)
                        i0[t] = i1[t] = kind == KIND_MIN32 || kind == KIND_Q2K16 ? _mm512_setzero_si512()
                                                           : _mm512_set1_epi32(xi[(nk + 1) * rx + g + t]);
                    _Pragma("GCC unroll 8")
                    for (int k = 0; k < nk; k++) {
                        const __m512i w0 = unit_w(pw0, kind, u2 >> 1, odd, k), w1 = unit_w(pw1, kind, u2 >> 1, odd, k);
                        _Pragma("GCC unroll 16")
                        for (int t = 0; t < rg; t++) {
                            const __m512i xb = _mm512_set1_epi32(xi[k * rx + g + t]);
                            i0[t] = _mm512_dpbusd_epi32(i0[t], w0, xb);
                            i1[t] = _mm512_dpbusd_epi32(i1[t], w1, xb);
                        }
                    }
                    _Pragma("GCC unroll 16")
                    for (int t = 0; t < rg; t++) {
                        const __m512 dx = _mm512_set1_ps(xf[nk * rx + g + t]);
                        __m512 a0 = in_regs ? f0[(g + t) & 7] : _mm512_load_ps(fm[g + t]);
                        __m512 a1 = in_regs ? f1[(g + t) & 7] : _mm512_load_ps(fm[g + t] + 16);
                        a0 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(i0[t]), dx), s0, a0);
                        a1 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(i1[t]), dx), s1, a1);
                        if (kind == KIND_MIN32 || kind == KIND_Q2K16) {
                            const __m512 xs = _mm512_set1_ps(xf[(nk + 1) * rx + g + t]);
                            a0 = _mm512_fmadd_ps(mn0, xs, a0);
                            a1 = _mm512_fmadd_ps(mn1, xs, a1);
                        }
                        if (in_regs) {
                            f0[(g + t) & 7] = a0;
                            f1[(g + t) & 7] = a1;
                        } else {
                            _mm512_store_ps(fm[g + t], a0);
                            _mm512_store_ps(fm[g + t] + 16, a1);
                        }
                    }
                }
            }
        }
    }
    _Pragma("GCC unroll 16")
    for (int t = 0; t < rx; t++) {
        _mm512_mask_storeu_ps(y + t * ys, m0, in_regs ? f0[t & 7] : _mm512_load_ps(fm[t]));
        _mm512_mask_storeu_ps(y + t * ys + 16, m1, in_regs ? f1[t & 7] : _mm512_load_ps(fm[t] + 16));
    }
}

#define KERN_OF(NAME, KIND)                                                                          \
    static void NAME(const uint8_t *pw0, const uint8_t *pw1, const uint8_t *px, int64_t nsb, int rx, \
                     float *y, int64_t ys, __mmask16 m0, __mmask16 m1, int accum) {                  \
        RX_SWITCH(rx, KERN_CALL_##KIND)                                                              \
    }
#define KERN_CALL_KIND_INIT32(R) kern_i8_pair(pw0, pw1, px, nsb, R, KIND_INIT32, y, ys, m0, m1, accum)
#define KERN_CALL_KIND_MIN32(R) kern_i8_pair(pw0, pw1, px, nsb, R, KIND_MIN32, y, ys, m0, m1, accum)
#define KERN_CALL_KIND_INIT16(R) kern_i8_pair(pw0, pw1, px, nsb, R, KIND_INIT16, y, ys, m0, m1, accum)
#define KERN_CALL_KIND_NL32(R) kern_i8_pair(pw0, pw1, px, nsb, R, KIND_NL32, y, ys, m0, m1, accum)
#define KERN_CALL_KIND_XS32(R) kern_i8_pair(pw0, pw1, px, nsb, R, KIND_XS32, y, ys, m0, m1, accum)
#define KERN_CALL_KIND_Q2K16(R) kern_i8_pair(pw0, pw1, px, nsb, R, KIND_Q2K16, y, ys, m0, m1, accum)
#define KERN_CALL_KIND_Q3K16(R) kern_i8_pair(pw0, pw1, px, nsb, R, KIND_Q3K16, y, ys, m0, m1, accum)
KERN_OF(kern_pair_init32, KIND_INIT32)
KERN_OF(kern_pair_min32, KIND_MIN32)
KERN_OF(kern_pair_init16, KIND_INIT16)
KERN_OF(kern_pair_nl32, KIND_NL32)
KERN_OF(kern_pair_xs32, KIND_XS32)
KERN_OF(kern_pair_q2k16, KIND_Q2K16)
KERN_OF(kern_pair_q3k16, KIND_Q3K16)

/* ---- IQ4_NL's few rows over prepacked panels: the dot kernel's lanes -------------------
 * Below MM_AVX512_NL_GEMM_MIN_T rows, IQ4_NL is what the 256-bit dot kernel
 * (dot_iq4_nl, matmul_dot256.h) computes, bit for bit, so packing ahead changes no
 * result: that kernel keeps, per row, 8 int32 lanes per 32-block (lane j: elements
 * 4j..4j+3, the low nibbles of dword j for j < 4, the high ones of dword j - 4 above),
 * each converted and fma'd with f16(d)·d_x into accumulator lane j of the even or odd
 * blocks, then adds the two and sums the 8 lanes as hsum8 does. Here each zmm holds one
 * such lane of the panel's 16 rows: the 16 accumulators of one panel fill half the
 * registers, and a panel's 32-block is 8 vpdpbusd (level + 128 against the activation
 * dword, from -128·Σ of its 4 bytes: exactly Σ level·q) where the dot kernel spends
 * ~16 instructions per row. A panel's slices lie end to end, so block b is at
 * SBW_NL·b whatever the K-slice. */
static inline __m512 nl_lane_acc(const uint8_t *blk, int dw, const __m512i lut, const int32_t *xd, const int32_t *cd,
                                 __m512 dd, __m512 acc) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i g = _mm512_load_si512(blk + 64 * (dw & 3));
    const __m512i u = _mm512_shuffle_epi8(lut, _mm512_and_si512(dw >= 4 ? _mm512_srli_epi16(g, 4) : g, m4));
    const __m512i s = _mm512_dpbusd_epi32(_mm512_set1_epi32(cd[dw]), u, _mm512_set1_epi32(xd[dw]));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dd, acc);
}

/* One 32-block b of a panel against one row into the 8 lanes acc[0..7]; cd: the
 * -128·Σ of each activation dword of the block */
MM_AI void nl_block(const uint8_t *pw, int64_t b, const mm_xrow *x, const __m512i lut, __m512 acc[8]) {
    const uint8_t *blk = pw + (size_t)b * SBW_NL;
    for (int l = 0; l < SBW_NL / 64; l++) _mm_prefetch((const char *)blk + PF_DIST + 64 * l, PF_HINT);
    const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(x->q + 32 * b));
    int32_t cd[8] __attribute__((aligned(32)));
    _mm256_store_si256((__m256i *)(void *)cd,
                       _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                                                                     _mm256_set1_epi8((char)0x80), q)));
    const int32_t *xd = (const int32_t *)(const void *)(x->q + 32 * b);
    const __m512 dd = _mm512_mul_ps(_mm512_load_ps(blk + 256), _mm512_set1_ps(x->d[b]));
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) acc[j] = nl_lane_acc(blk, j, lut, xd, cd, dd, acc[j]);
}

/* The 16 rows of panel pw (nb blocks) against one row: y[r] for the rows in m */
static void nl_panel_row(const uint8_t *pw, int64_t nb, const mm_xrow *x, float *y, __mmask16 m) {
    const __m512i lut = _mm512_broadcast_i32x4(
        _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)iq4nl_values), _mm_set1_epi8((char)0x80)));
    __m512 a0[8], a1[8]; /* lanes of the even and of the odd blocks */
    for (int j = 0; j < 8; j++) a0[j] = a1[j] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        nl_block(pw, b, x, lut, a0);
        nl_block(pw, b + 1, x, lut, a1);
    }
    if (b < nb) nl_block(pw, b, x, lut, a0);
    /* hsum8(a0 + a1): (l0+l4 + l2+l6) + (l1+l5 + l3+l7) */
    __m512 e[8];
    for (int j = 0; j < 8; j++) e[j] = _mm512_add_ps(a0[j], a1[j]);
    for (int j = 0; j < 4; j++) e[j] = _mm512_add_ps(e[j], e[j + 4]);
    _mm512_mask_storeu_ps(y, m, _mm512_add_ps(_mm512_add_ps(e[0], e[2]), _mm512_add_ps(e[1], e[3])));
}

/* Outputs [o0, o1) (o0 a multiple of PR_I8) for all a->T rows, from the quantized rows */
static void nl_rows_exact(const mm_args *a, int64_t o0, int64_t o1) {
    const int64_t nb = a->n_in / 32;
    const size_t pstride = packed_panel_bytes(a->type, a->n_in);
    for (int64_t p0 = o0; p0 < o1; p0 += PR_I8) {
        const uint8_t *pw = a->wp + (size_t)(p0 / PR_I8) * pstride;
        const __mmask16 m = row_mask((int)(o1 - p0 < PR_I8 ? o1 - p0 : PR_I8));
        for (int64_t t = 0; t < a->T; t++) {
            const mm_xrow x = mm_xrow_at(a->xq + (size_t)t * a->xq_stride, a->n_in);
            nl_panel_row(pw, nb, &x, a->Y + t * a->n_out + p0, m);
        }
    }
}

/* ---- prepacked weights: panel P, K-slice s at P·packed_panel_bytes + s·panel_bytes(kc) ---- */

size_t mm_avx512_gemmq_prepack_bytes(uint32_t type, int64_t n_in, int64_t n_out) {
    if (!mm_type_has_gemmq(type)) return 0;
    return (size_t)((n_out + PR_I8 - 1) / PR_I8) * packed_panel_bytes(type, n_in);
}

void mm_avx512_gemmq_prepack(const mm_args *a, int64_t p0, int64_t p1, uint8_t *wp) {
    const int64_t kc = kc_of(a->n_in), ns = n_slices(a->n_in);
    const size_t pbytes = panel_bytes(a->type, kc);
    for (int64_t P = p0; P < p1; P++) {
        const int64_t r0 = P * PR_I8;
        const int nvalid = (int)(a->n_out - r0 < PR_I8 ? a->n_out - r0 : PR_I8);
        for (int64_t s = 0; s < ns; s++) {
            const int64_t k0 = s * kc, kn = a->n_in - k0 < kc ? a->n_in - k0 : kc;
            pack_i8_panel(a, r0, nvalid, k0, kn, wp + (size_t)P * packed_panel_bytes(a->type, a->n_in) + (size_t)s * pbytes);
        }
    }
}

/* ---- driver -------------------------------------------------------------------------- */

void mm_avx512_gemmq(const mm_args *a, int64_t o0, int64_t o1, void *scratch) {
    const uint32_t type = a->type;
    const int64_t rows = o1 - o0, np = (rows + PR_I8 - 1) / PR_I8;
    const int64_t kc = kc_of(a->n_in), ng = mm_avx512_gemmq_groups(a->T);
    const int bs = i8_bs(type);
    const size_t pbytes = panel_bytes(type, kc), gbytes = xgroup_bytes(type, a->n_in);
    uint8_t *wbuf = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    if (a->wp && type == QT_IQ4_NL && a->T < MM_AVX512_NL_GEMM_MIN_T) {
        nl_rows_exact(a, o0, o1);
        return;
    }

    for (int64_t k0 = 0; k0 < a->n_in; k0 += kc) {
        const int64_t kn = a->n_in - k0 < kc ? a->n_in - k0 : kc;
        const int64_t slice = k0 / kc;
        if (!a->wp)
            for (int64_t p = 0; p < np; p++) {
                const int64_t p0 = o0 + p * PR_I8;
                pack_i8_panel(a, p0, (int)(o1 - p0 < PR_I8 ? o1 - p0 : PR_I8), k0, kn, wbuf + p * pbytes);
            }
        for (int64_t g = 0; g < ng; g++) {
            int64_t t0, t1;
            mm_avx512_gemmq_group(a->T, g, &t0, &t1);
            const int rx = (int)(t1 - t0);
            /* this K-slice of the group */
            const uint8_t *px = a->xp + (size_t)g * gbytes + (size_t)(k0 / bs) * i8_xbs(bs, rx);
            /* the panel after panel p: ns slices on when packed ahead */
            const size_t pstep = a->wp ? packed_panel_bytes(type, a->n_in) : pbytes;
            const i8_kind kind = i8_kind_of(type);
            const int64_t nsb = kn / i8_sbe(type);
            for (int64_t p = 0; p < np; p += 2) {
                const int64_t p0 = o0 + p * PR_I8;
                const __mmask16 m = row_mask((int)(o1 - p0 < PR_I8 ? o1 - p0 : PR_I8));
                float *y = a->Y + t0 * a->n_out + p0;
                const uint8_t *pw = a->wp ? a->wp + (size_t)(p0 / PR_I8) * pstep + (size_t)slice * pbytes
                                          : wbuf + p * pbytes;
                const int two = p + 1 < np;
                const __mmask16 m1 = two ? row_mask((int)(o1 - p0 - PR_I8)) : 0;
                const uint8_t *pw1 = two ? pw + pstep : pw;
                if (kind == KIND_INIT32) kern_pair_init32(pw, pw1, px, nsb, rx, y, a->n_out, m, m1, k0 > 0);
                else if (kind == KIND_MIN32) kern_pair_min32(pw, pw1, px, nsb, rx, y, a->n_out, m, m1, k0 > 0);
                else if (kind == KIND_NL32) kern_pair_nl32(pw, pw1, px, nsb, rx, y, a->n_out, m, m1, k0 > 0);
                else if (kind == KIND_XS32) kern_pair_xs32(pw, pw1, px, nsb, rx, y, a->n_out, m, m1, k0 > 0);
                else if (kind == KIND_Q2K16) kern_pair_q2k16(pw, pw1, px, nsb, rx, y, a->n_out, m, m1, k0 > 0);
                else if (kind == KIND_Q3K16) kern_pair_q3k16(pw, pw1, px, nsb, rx, y, a->n_out, m, m1, k0 > 0);
                else kern_pair_init16(pw, pw1, px, nsb, rx, y, a->n_out, m, m1, k0 > 0);
            }
        }
    }
}

#pragma GCC pop_options

#endif
