/* quant.c — the tensor type table, half/bfloat conversion, and scalar reference
 * dequantization/quantization for the types llmchat computes with.
 *
 * Block layouts and dequantization follow ggml (ggml-common.h, ggml-quants.c)
 * exactly, since these decode GGUF files written by llama.cpp's quantizer.
 * Blocks are read and written byte-wise (little-endian), so rows may sit at any
 * address. The quantizers follow ggml's reference algorithms (IQ4_NL / IQ4_XS: a
 * small search for the best-fitting scale) but quantize against the fp16-rounded
 * scales actually stored, so they are not bit-identical to ggml. */
#include "quant.h"

#include "common.h"
#include "iq_tables.h"

#include <math.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* sup: dequantize_row and the matmul take it; q: quantize_row writes it */
#define T(id, nm, be, bb, sup) [id] = {nm, be, bb, sup, sup}
#define TNOQ(id, nm, be, bb) [id] = {nm, be, bb, true, false}
static const qtype_info g_types[QT_COUNT] = {
    T(QT_F32, "F32", 1, 4, true),
    T(QT_F16, "F16", 1, 2, true),
    T(QT_Q4_0, "Q4_0", 32, 18, true),
    T(QT_Q4_1, "Q4_1", 32, 20, true),
    T(QT_Q5_0, "Q5_0", 32, 22, true),
    T(QT_Q5_1, "Q5_1", 32, 24, true),
    T(QT_Q8_0, "Q8_0", 32, 34, true),
    T(QT_Q8_1, "Q8_1", 32, 36, false),
    T(QT_Q2_K, "Q2_K", 256, 84, true),
    T(QT_Q3_K, "Q3_K", 256, 110, true),
    T(QT_Q4_K, "Q4_K", 256, 144, true),
    T(QT_Q5_K, "Q5_K", 256, 176, true),
    T(QT_Q6_K, "Q6_K", 256, 210, true),
    T(QT_Q8_K, "Q8_K", 256, 292, false),
    TNOQ(QT_IQ2_XXS, "IQ2_XXS", 256, 66),
    TNOQ(QT_IQ2_XS, "IQ2_XS", 256, 74),
    TNOQ(QT_IQ3_XXS, "IQ3_XXS", 256, 98),
    TNOQ(QT_IQ1_S, "IQ1_S", 256, 50),
    T(QT_IQ4_NL, "IQ4_NL", 32, 18, true),
    TNOQ(QT_IQ3_S, "IQ3_S", 256, 110),
    TNOQ(QT_IQ2_S, "IQ2_S", 256, 82),
    T(QT_IQ4_XS, "IQ4_XS", 256, 136, true),
    T(QT_I8, "I8", 1, 1, false),
    T(QT_I16, "I16", 1, 2, false),
    T(QT_I32, "I32", 1, 4, false),
    T(QT_I64, "I64", 1, 8, false),
    T(QT_F64, "F64", 1, 8, false),
    TNOQ(QT_IQ1_M, "IQ1_M", 256, 56),
    T(QT_BF16, "BF16", 1, 2, true),
    T(QT_TQ1_0, "TQ1_0", 256, 54, false),
    T(QT_TQ2_0, "TQ2_0", 256, 66, false),
    T(QT_MXFP4, "MXFP4", 32, 17, true),
};
#undef T
#undef TNOQ

_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs layout");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 layout");
_Static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs layout");
_Static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs layout");
_Static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s layout");
_Static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs layout");
_Static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s layout");
_Static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s layout");
_Static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m layout");

const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

const qtype_info *qtype_get(uint32_t type) {
    if (type >= QT_COUNT || !g_types[type].name) return NULL;
    return &g_types[type];
}

const char *qtype_name(uint32_t type) {
    const qtype_info *t = qtype_get(type);
    return t ? t->name : "unknown";
}

int qtype_from_name(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < QT_COUNT; i++)
        if (g_types[i].name && strcasecmp(g_types[i].name, name) == 0) return i;
    return -1;
}

size_t qtype_row_bytes(uint32_t type, int64_t n) {
    const qtype_info *t = qtype_get(type);
    if (!t || n < 0 || n % t->block_elems) return 0;
    return (size_t)(n / t->block_elems) * t->block_bytes;
}

/* ---- half / bfloat ---------------------------------------------------------- */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13)); /* inf, NaN */
    if (exp == 0) {                              /* zero or subnormal: mant * 2^-24 */
        float v = (float)mant * 0x1p-24f;        /* exact */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_fp16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: keep the top payload bits, force quiet (never inf) */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a >= 0x38800000u) {                                   /* normal half */
        a += 0xfffu + ((a >> 13) & 1u);                       /* round to nearest even */
        return (uint16_t)(sign | ((a - 0x38000000u) >> 13));  /* rebias 127 -> 15 */
    }
    /* Subnormal half (or zero): round |f| * 2^24 to an integer, ties to even. */
    uint32_t e = a >> 23;
    if (e < 102) return sign; /* |f| < 2^-25 rounds to zero */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* |f| * 2^24 = m * 2^-shift, shift in 14..24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) q++;
    return (uint16_t)(sign | q); /* q may reach 0x400, the smallest normal: correct */
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries to inf */
    return (uint16_t)(u >> 16);
}

/* ---- byte access ------------------------------------------------------------- */

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline float rdf16(const uint8_t *p) { return fp16_to_f32(rd16(p)); }

/* Rounds v to the nearest integer (ties to even) and clamps to [lo, hi]; never
 * undefined, even for huge, infinite or NaN v (NaN gives hi). */
static inline int round_clamp(float v, int lo, int hi) {
    v = fminf(v, (float)hi);
    v = fmaxf(v, (float)lo);
    return (int)nearbyintf(v);
}

/* Stores a scale as fp16, rounded away from zero so that |stored| >= |v| (the
 * block's extreme values then never fall outside the grid), and returns the value
 * actually stored. At most one fp16 ulp larger than v; v beyond fp16 range gives inf. */
static inline float store_f16(uint8_t *p, float v) {
    uint16_t h = f32_to_fp16(v);
    if (fabsf(fp16_to_f32(h)) < fabsf(v) && (h & 0x7fffu) < 0x7c00u) h++;
    wr16(p, h);
    return fp16_to_f32(h);
}

enum {
    Q8_0_D = offsetof(block_q8_0, d), Q8_0_QS = offsetof(block_q8_0, qs),
    Q4_0_D = offsetof(block_q4_0, d), Q4_0_QS = offsetof(block_q4_0, qs),
    Q4_K_D = offsetof(block_q4_K, d), Q4_K_DMIN = offsetof(block_q4_K, dmin),
    Q4_K_SC = offsetof(block_q4_K, scales), Q4_K_QS = offsetof(block_q4_K, qs),
    Q6_K_QL = offsetof(block_q6_K, ql), Q6_K_QH = offsetof(block_q6_K, qh),
    Q6_K_SC = offsetof(block_q6_K, scales), Q6_K_D = offsetof(block_q6_K, d),
    Q4_1_D = offsetof(block_q4_1, d), Q4_1_M = offsetof(block_q4_1, m), Q4_1_QS = offsetof(block_q4_1, qs),
    Q5_0_D = offsetof(block_q5_0, d), Q5_0_QH = offsetof(block_q5_0, qh), Q5_0_QS = offsetof(block_q5_0, qs),
    Q5_1_D = offsetof(block_q5_1, d), Q5_1_M = offsetof(block_q5_1, m),
    Q5_1_QH = offsetof(block_q5_1, qh), Q5_1_QS = offsetof(block_q5_1, qs),
    Q2_K_SC = offsetof(block_q2_K, scales), Q2_K_QS = offsetof(block_q2_K, qs),
    Q2_K_D = offsetof(block_q2_K, d), Q2_K_DMIN = offsetof(block_q2_K, dmin),
    Q3_K_HM = offsetof(block_q3_K, hmask), Q3_K_QS = offsetof(block_q3_K, qs),
    Q3_K_SC = offsetof(block_q3_K, scales), Q3_K_D = offsetof(block_q3_K, d),
    Q5_K_D = offsetof(block_q5_K, d), Q5_K_DMIN = offsetof(block_q5_K, dmin),
    Q5_K_SC = offsetof(block_q5_K, scales), Q5_K_QH = offsetof(block_q5_K, qh), Q5_K_QS = offsetof(block_q5_K, qs),
    IQ4_NL_D = offsetof(block_iq4_nl, d), IQ4_NL_QS = offsetof(block_iq4_nl, qs),
    IQ4_XS_D = offsetof(block_iq4_xs, d), IQ4_XS_SH = offsetof(block_iq4_xs, scales_h),
    IQ4_XS_SL = offsetof(block_iq4_xs, scales_l), IQ4_XS_QS = offsetof(block_iq4_xs, qs),
};

static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- dequantization ------------------------------------------------------------ */

static void dequant_q8_0(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_q8_0), y += QK8_0) {
        const float d = rdf16(b + Q8_0_D);
        const uint8_t *qs = b + Q8_0_QS;
        for (int j = 0; j < QK8_0; j++) y[j] = (float)(int8_t)qs[j] * d;
    }
}

/* Q4_0: byte j holds element j in its low nibble and element j+16 in its high one;
 * value = (nibble - 8) * d. */
static void dequant_q4_0(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_q4_0), y += QK4_0) {
        const float d = rdf16(b + Q4_0_D);
        const uint8_t *qs = b + Q4_0_QS;
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((qs[j] & 0xf) - 8) * d;
            y[j + QK4_0 / 2] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

/* Q4_K's 12 scale bytes hold 8 six-bit scales and 8 six-bit mins:
 *   j < 4:  scale = q[j] & 63, min = q[j+4] & 63
 *   j >= 4: scale = (q[j+4] & 15) | (q[j-4] >> 6) << 4, min = (q[j+4] >> 4) | (q[j] >> 6) << 4 */
static inline void q4k_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K: 8 sub-blocks of 32; value = d*scale*q - dmin*min. The 128 quant bytes come in
 * 4 runs of 32: run r's low nibbles are sub-block 2r, its high nibbles sub-block 2r+1. */
static void dequant_q4_K(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_q4_K)) {
        const float d = rdf16(b + Q4_K_D);
        const float dmin = rdf16(b + Q4_K_DMIN);
        const uint8_t *sc = b + Q4_K_SC;
        const uint8_t *q = b + Q4_K_QS;
        for (int r = 0; r < 4; r++, q += 32) {
            int s0, m0, s1, m1;
            q4k_scale_min(2 * r, sc, &s0, &m0);
            q4k_scale_min(2 * r + 1, sc, &s1, &m1);
            const float d0 = d * (float)s0, mm0 = dmin * (float)m0;
            const float d1 = d * (float)s1, mm1 = dmin * (float)m1;
            for (int l = 0; l < 32; l++) *y++ = d0 * (float)(q[l] & 0xf) - mm0;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] >> 4) - mm1;
        }
    }
}

/* Q6_K: 16 groups of 16 with int8 scales; value = d * scale * (q - 32), q 6 bits.
 * Each 128-element half h uses ql[64h..64h+63], qh[32h..32h+31]; for l < 32:
 *   element l:      ql[l] low nibble,    qh[l] bits 0-1
 *   element l + 32: ql[l+32] low nibble, qh[l] bits 2-3
 *   element l + 64: ql[l] high nibble,   qh[l] bits 4-5
 *   element l + 96: ql[l+32] high nibble, qh[l] bits 6-7 */
static void dequant_q6_K(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_q6_K)) {
        const float d = rdf16(b + Q6_K_D);
        const uint8_t *ql = b + Q6_K_QL;
        const uint8_t *qh = b + Q6_K_QH;
        const int8_t *sc = (const int8_t *)(b + Q6_K_SC);
        for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int g = l / 16;
                const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[g] * (float)q1;
                y[l + 32] = d * (float)sc[g + 2] * (float)q2;
                y[l + 64] = d * (float)sc[g + 4] * (float)q3;
                y[l + 96] = d * (float)sc[g + 6] * (float)q4;
            }
        }
    }
}

/* Q4_1: as Q4_0's nibble order; value = d*u + m. */
static void dequant_q4_1(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_q4_1), y += QK4_1) {
        const float d = rdf16(b + Q4_1_D), m = rdf16(b + Q4_1_M);
        const uint8_t *qs = b + Q4_1_QS;
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)(qs[j] & 0xf) + m;
            y[j + 16] = d * (float)(qs[j] >> 4) + m;
        }
    }
}

/* Q5_0 / Q5_1: as Q4_0 / Q4_1 plus a fifth bit, bit j of the 32-bit qh for element j;
 * value = d*(u - 16) (Q5_0) or d*u + m (Q5_1). */
static void dequant_q5(const uint8_t *b, float *y, int64_t nb, int with_min) {
    const size_t bb = with_min ? sizeof(block_q5_1) : sizeof(block_q5_0);
    const int qh_off = with_min ? Q5_1_QH : Q5_0_QH, qs_off = with_min ? Q5_1_QS : Q5_0_QS;
    for (int64_t i = 0; i < nb; i++, b += bb, y += 32) {
        const float d = rdf16(b);
        const float m = with_min ? rdf16(b + Q5_1_M) : -16.0f * d;
        const uint32_t qh = rd32(b + qh_off);
        const uint8_t *qs = b + qs_off;
        for (int j = 0; j < 16; j++) {
            const int u0 = (qs[j] & 0xf) | (int)((qh >> j) & 1) << 4;
            const int u1 = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            if (with_min) {
                y[j] = d * (float)u0 + m;
                y[j + 16] = d * (float)u1 + m;
            } else {
                y[j] = d * (float)(u0 - 16);
                y[j + 16] = d * (float)(u1 - 16);
            }
        }
    }
}

/* Q2_K: element e of the super-block, with n = e/128, j = (e%128)/32, l = e%32, is
 * bits 2j..2j+1 of qs[32n + l]; group g = e/16 has scale byte (min << 4 | scale).
 * value = d*scale*u - dmin*min. */
static void dequant_q2_K(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_q2_K), y += QK_K) {
        const float d = rdf16(b + Q2_K_D), dmin = rdf16(b + Q2_K_DMIN);
        const uint8_t *sc = b + Q2_K_SC, *qs = b + Q2_K_QS;
        for (int e = 0; e < QK_K; e++) {
            const int n = e / 128, j = (e % 128) / 32, l = e % 32, g = e / 16;
            const int u = (qs[32 * n + l] >> (2 * j)) & 3;
            y[e] = d * (float)(sc[g] & 0xf) * (float)u - dmin * (float)(sc[g] >> 4);
        }
    }
}

/* Q3_K's 12 scale bytes → 16 six-bit scales (stored + 32): low 4 bits of scale i are
 * byte i's low nibble (i < 8) or byte i-8's high nibble; its high 2 bits are bits
 * 2(i/4)..2(i/4)+1 of byte 8 + i%4. */
static inline int q3k_scale(const uint8_t *s, int i) {
    const int lo = i < 8 ? s[i] & 0xf : s[i - 8] >> 4;
    return lo | ((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4;
}

/* Q3_K: as Q2_K's 2-bit layout, plus the third bit of element e in hmask[l], bit
 * 4n + j; value = d*(scale - 32)*(u - 4). */
static void dequant_q3_K(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_q3_K), y += QK_K) {
        const float d = rdf16(b + Q3_K_D);
        const uint8_t *hm = b + Q3_K_HM, *qs = b + Q3_K_QS, *sc = b + Q3_K_SC;
        for (int e = 0; e < QK_K; e++) {
            const int n = e / 128, j = (e % 128) / 32, l = e % 32;
            const int u = ((qs[32 * n + l] >> (2 * j)) & 3) | ((hm[l] >> (4 * n + j)) & 1) << 2;
            y[e] = d * (float)(q3k_scale(sc, e / 16) - 32) * (float)(u - 4);
        }
    }
}

/* Q5_K: Q4_K's scales and nibbles, plus the fifth bit of element 32j + l in qh[l], bit j. */
static void dequant_q5_K(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_q5_K)) {
        const float d = rdf16(b + Q5_K_D), dmin = rdf16(b + Q5_K_DMIN);
        const uint8_t *sc = b + Q5_K_SC, *qh = b + Q5_K_QH, *qs = b + Q5_K_QS;
        for (int j = 0; j < 8; j++) {
            int s, m;
            q4k_scale_min(j, sc, &s, &m);
            const float dj = d * (float)s, mj = dmin * (float)m;
            const uint8_t *q = qs + 32 * (j / 2);
            for (int l = 0; l < 32; l++) {
                const int u = ((q[l] >> (4 * (j & 1))) & 0xf) | ((qh[l] >> j) & 1) << 4;
                *y++ = dj * (float)u - mj;
            }
        }
    }
}

/* IQ4_NL: Q4_0's nibble order, value = d * iq4nl_values[u]. */
static void dequant_iq4_nl(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_iq4_nl), y += QK4_NL) {
        const float d = rdf16(b + IQ4_NL_D);
        const uint8_t *qs = b + IQ4_NL_QS;
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)iq4nl_values[qs[j] & 0xf];
            y[j + 16] = d * (float)iq4nl_values[qs[j] >> 4];
        }
    }
}

/* IQ4_XS: 8 sub-blocks of 32, each laid out as an IQ4_NL block without its own d;
 * value = d*(scale - 32)*iq4nl_values[u]. */
static void dequant_iq4_xs(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_iq4_xs)) {
        const float d = rdf16(b + IQ4_XS_D);
        for (int j = 0; j < 8; j++, y += 32) {
            const float dl = d * (float)(iq4_xs_scale6(b, j) - 32);
            const uint8_t *qs = b + IQ4_XS_QS + 16 * j;
            for (int l = 0; l < 16; l++) {
                y[l] = dl * (float)iq4nl_values[qs[l] & 0xf];
                y[l + 16] = dl * (float)iq4nl_values[qs[l] >> 4];
            }
        }
    }
}

/* MXFP4: IQ4_NL's nibble order; value = 2^(e-128) * mxfp4_values[u] (the doubled
 * E2M1 values against half the E8M0 scale, as ggml). */
static void dequant_mxfp4(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += sizeof(block_mxfp4), y += QK_MXFP4) {
        const float d = e8m0_half_to_f32(b[0]);
        const uint8_t *qs = b + 1;
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)mxfp4_values[qs[j] & 0xf];
            y[j + 16] = d * (float)mxfp4_values[qs[j] >> 4];
        }
    }
}

/* ---- the i-quants ----------------------------------------------------------------
 * Each decoder fills an iq_unpacked (quant.h): lv[e] = grid value × sign (IQ1: 8 ×
 * (grid ± 1/8)), mul[g] = 2s+1 per 16 elements. Grid entries hold element j of a
 * group in byte j. */

static inline int grid_byte(uint64_t entry, int j) { return (int)((entry >> (8 * j)) & 0xff); }

/* 8 elements from a grid entry and a sign byte (bit j set: element j negative). */
static inline void iq_put8(int8_t *lv, uint64_t entry, unsigned signs) {
    for (int j = 0; j < 8; j++) {
        const int v = grid_byte(entry, j);
        lv[j] = (int8_t)(signs >> j & 1 ? -v : v);
    }
}

static void unpack_iq2_xxs(const uint8_t *b, iq_unpacked *u) {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *p = b + 2 + 8 * ib;
        const uint32_t w1 = rd32(p + 4);
        u->mul[2 * ib] = u->mul[2 * ib + 1] = (uint8_t)(2 * (w1 >> 28) + 1);
        for (int l = 0; l < 4; l++)
            iq_put8(u->lv + 32 * ib + 8 * l, iq2xxs_grid[p[l]], ksigns_iq2xs[(w1 >> (7 * l)) & 127]);
    }
}

static void unpack_iq2_xs(const uint8_t *b, iq_unpacked *u) {
    const uint8_t *sc = b + offsetof(block_iq2_xs, scales);
    for (int ib = 0; ib < 8; ib++) {
        u->mul[2 * ib] = (uint8_t)(2 * (sc[ib] & 0xf) + 1);
        u->mul[2 * ib + 1] = (uint8_t)(2 * (sc[ib] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            const uint16_t q = rd16(b + 2 + 2 * (4 * ib + l));
            iq_put8(u->lv + 32 * ib + 8 * l, iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9]);
        }
    }
}

static void unpack_iq2_s(const uint8_t *b, iq_unpacked *u) {
    const uint8_t *qs = b + offsetof(block_iq2_s, qs), *signs = qs + QK_K / 8;
    const uint8_t *qh = b + offsetof(block_iq2_s, qh), *sc = b + offsetof(block_iq2_s, scales);
    for (int ib = 0; ib < 8; ib++) {
        u->mul[2 * ib] = (uint8_t)(2 * (sc[ib] & 0xf) + 1);
        u->mul[2 * ib + 1] = (uint8_t)(2 * (sc[ib] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            const int idx = qs[4 * ib + l] | ((qh[ib] >> (2 * l)) & 3) << 8;
            iq_put8(u->lv + 32 * ib + 8 * l, iq2s_grid[idx], signs[4 * ib + l]);
        }
    }
}

static void unpack_iq3_xxs(const uint8_t *b, iq_unpacked *u) {
    const uint8_t *qs = b + 2, *ss = b + 2 + QK_K / 4;
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t w = rd32(ss + 4 * ib);
        u->mul[2 * ib] = u->mul[2 * ib + 1] = (uint8_t)(2 * (w >> 28) + 1);
        for (int l = 0; l < 4; l++) {
            const uint64_t entry = iq3xxs_grid[qs[8 * ib + 2 * l]] | (uint64_t)iq3xxs_grid[qs[8 * ib + 2 * l + 1]] << 32;
            iq_put8(u->lv + 32 * ib + 8 * l, entry, ksigns_iq2xs[(w >> (7 * l)) & 127]);
        }
    }
}

static void unpack_iq3_s(const uint8_t *b, iq_unpacked *u) {
    const uint8_t *qs = b + offsetof(block_iq3_s, qs), *qh = b + offsetof(block_iq3_s, qh);
    const uint8_t *signs = b + offsetof(block_iq3_s, signs), *sc = b + offsetof(block_iq3_s, scales);
    for (int ib = 0; ib < 8; ib++) {
        u->mul[2 * ib] = u->mul[2 * ib + 1] = (uint8_t)(2 * ((sc[ib / 2] >> (4 * (ib & 1))) & 0xf) + 1);
        for (int l = 0; l < 4; l++) {
            const int k0 = 2 * l, k1 = 2 * l + 1; /* the group's two halves */
            const uint32_t g0 = iq3s_grid[qs[8 * ib + k0] | ((qh[ib] >> k0) & 1) << 8];
            const uint32_t g1 = iq3s_grid[qs[8 * ib + k1] | ((qh[ib] >> k1) & 1) << 8];
            iq_put8(u->lv + 32 * ib + 8 * l, g0 | (uint64_t)g1 << 32, signs[4 * ib + l]);
        }
    }
}

/* IQ1: lv = 8·grid ± 1 (the ± 1/8 delta, scaled by div = 8). */
static inline void iq1_put8(int8_t *lv, uint64_t entry, int negative_delta) {
    for (int j = 0; j < 8; j++) lv[j] = (int8_t)(8 * (int8_t)grid_byte(entry, j) + (negative_delta ? -1 : 1));
}

static void unpack_iq1_s(const uint8_t *b, iq_unpacked *u) {
    const uint8_t *qs = b + offsetof(block_iq1_s, qs), *qh = b + offsetof(block_iq1_s, qh);
    for (int ib = 0; ib < 8; ib++) {
        const unsigned h = rd16(qh + 2 * ib);
        u->mul[2 * ib] = u->mul[2 * ib + 1] = (uint8_t)(2 * ((h >> 12) & 7) + 1);
        for (int l = 0; l < 4; l++)
            iq1_put8(u->lv + 32 * ib + 8 * l, iq1s_grid[qs[4 * ib + l] | ((h >> (3 * l)) & 7) << 8], h >> 15);
    }
}

/* IQ1_M's fp16 scale, from the top nibbles of its four scale words. */
static inline uint16_t iq1m_d_bits(const uint8_t *sc) {
    return (uint16_t)((rd16(sc) >> 12) | (rd16(sc + 2) >> 8 & 0x00f0) | (rd16(sc + 4) >> 4 & 0x0f00) |
                      (rd16(sc + 6) & 0xf000));
}

static void unpack_iq1_m(const uint8_t *b, iq_unpacked *u) {
    const uint8_t *qs = b + offsetof(block_iq1_m, qs), *qh = b + offsetof(block_iq1_m, qh);
    const uint8_t *sc = b + offsetof(block_iq1_m, scales);
    for (int g = 0; g < 16; g++) u->mul[g] = (uint8_t)(2 * ((rd16(sc + 2 * (g / 4)) >> (3 * (g % 4))) & 7) + 1);
    for (int k = 0; k < 32; k++) { /* group k of 8: nibble k%2 of qh[k/2] */
        const int nib = (qh[k / 2] >> (4 * (k & 1))) & 0xf;
        iq1_put8(u->lv + 8 * k, iq1s_grid[qs[k] | (nib & 7) << 8], nib & 8);
    }
}

bool qtype_is_iq(uint32_t type) {
    switch (type) {
    case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S: case QT_IQ3_XXS: case QT_IQ3_S: case QT_IQ1_S: case QT_IQ1_M:
        return true;
    default: return false;
    }
}

void iq_unpack(uint32_t type, const uint8_t *b, iq_unpacked *u) {
    u->div = 8;
    u->d = type == QT_IQ1_M ? fp16_to_f32(iq1m_d_bits(b + offsetof(block_iq1_m, scales))) : rdf16(b);
    switch (type) {
    case QT_IQ2_XXS: unpack_iq2_xxs(b, u); break;
    case QT_IQ2_XS: unpack_iq2_xs(b, u); break;
    case QT_IQ2_S: unpack_iq2_s(b, u); break;
    case QT_IQ3_XXS: unpack_iq3_xxs(b, u), u->div = 4; break;
    case QT_IQ3_S: unpack_iq3_s(b, u), u->div = 1; break;
    case QT_IQ1_S: unpack_iq1_s(b, u); break;
    case QT_IQ1_M: unpack_iq1_m(b, u); break;
    default: LLC_ASSERT(!"iq_unpack: not an i-quant"); break;
    }
}

/* value = (d·mul)/div · lv: the same roundings as ggml's d·(0.5 + s)·0.25 · grid (one
 * for the scale, one for the product; the factors of two are exact). */
static void dequant_iq(uint32_t type, const uint8_t *b, float *y, int64_t nb) {
    const size_t bb = qtype_get(type)->block_bytes;
    iq_unpacked u;
    for (int64_t i = 0; i < nb; i++, b += bb, y += QK_K) {
        iq_unpack(type, b, &u);
        for (int g = 0; g < 16; g++) {
            const float dl = u.d * (float)u.mul[g] / (float)u.div;
            for (int l = 0; l < 16; l++) y[16 * g + l] = dl * (float)u.lv[16 * g + l];
        }
    }
}

int dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const qtype_info *t = qtype_get(type);
    if (!t || !t->supported) return LLC_ERR_UNSUPPORTED;
    if (n < 0 || n % t->block_elems) return LLC_ERR_RANGE;
    const uint8_t *b = src;
    const int64_t nb = n / t->block_elems;
    switch (type) {
    case QT_F32: if (n) memcpy(dst, src, (size_t)n * sizeof(float)); return 0;
    case QT_F16: for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_f32(rd16(b + 2 * i)); return 0;
    case QT_BF16: for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(rd16(b + 2 * i)); return 0;
    case QT_Q8_0: dequant_q8_0(b, dst, nb); return 0;
    case QT_Q4_0: dequant_q4_0(b, dst, nb); return 0;
    case QT_Q4_K: dequant_q4_K(b, dst, nb); return 0;
    case QT_Q6_K: dequant_q6_K(b, dst, nb); return 0;
    case QT_Q4_1: dequant_q4_1(b, dst, nb); return 0;
    case QT_Q5_0: dequant_q5(b, dst, nb, 0); return 0;
    case QT_Q5_1: dequant_q5(b, dst, nb, 1); return 0;
    case QT_Q2_K: dequant_q2_K(b, dst, nb); return 0;
    case QT_Q3_K: dequant_q3_K(b, dst, nb); return 0;
    case QT_Q5_K: dequant_q5_K(b, dst, nb); return 0;
    case QT_IQ4_NL: dequant_iq4_nl(b, dst, nb); return 0;
    case QT_IQ4_XS: dequant_iq4_xs(b, dst, nb); return 0;
    case QT_MXFP4: dequant_mxfp4(b, dst, nb); return 0;
    case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S: case QT_IQ3_XXS: case QT_IQ3_S: case QT_IQ1_S:
    case QT_IQ1_M: dequant_iq(type, b, dst, nb); return 0;
    default: return LLC_ERR_UNSUPPORTED;
    }
}

/* ---- quantization ----------------------------------------------------------------- */

/* Q8_0: d = absmax/127 (stored as fp16); q = round(x / d). */
static void quant_q8_0(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK8_0, b += sizeof(block_q8_0)) {
        float amax = 0;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = store_f16(b + Q8_0_D, amax / 127.0f);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK8_0; j++)
            b[Q8_0_QS + j] = (uint8_t)(int8_t)round_clamp(x[j] * id, -127, 127);
    }
}

/* Q4_0 (ggml's reference scheme): the element of largest magnitude, `max`, maps to
 * level -8 exactly (d = max / -8), the rest round to the nearest of -8..7. */
static void quant_q4_0(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK4_0, b += sizeof(block_q4_0)) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK4_0; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = store_f16(b + Q4_0_D, max / -8.0f);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0 = round_clamp(x[j] * id, -8, 7) + 8;
            const int q1 = round_clamp(x[j + QK4_0 / 2] * id, -8, 7) + 8;
            b[Q4_0_QS + j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Fits x[i] ~ scale * L[i] - the_min with L in 0..nmax, minimising the weighted squared
 * error over a few candidate grids (ggml's make_qkx2_quants); the min is kept <= 0
 * (the_min >= 0). Returns the scale. */
static float fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L,
                        float *the_min, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0], sum_w = 0, sum_x = 0;
    for (int i = 0; i < n; i++) {
        min = fminf(min, x[i]);
        max = fmaxf(max, x[i]);
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (!(max > min)) { /* constant zero / all equal non-positive / NaN */
        memset(L, 0, (size_t)n);
        *the_min = min == min ? -min : 0;
        return 0;
    }
    float iscale = (float)nmax / (max - min);
    float scale = (max - min) / (float)nmax;
    float best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)round_clamp(iscale * (x[i] - min), 0, nmax);
        const float diff = scale * L[i] + min - x[i];
        best += w[i] * diff * diff;
    }
    uint8_t Laux[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = round_clamp(iscale * (x[i] - min), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)(l * l);
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * Laux[i] + this_min - x[i];
            err += w[i] * diff * diff;
        }
        if (err < best) {
            memcpy(L, Laux, (size_t)n);
            best = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* Q4_K / Q5_K's common part: per 32-element sub-block an affine fit with levels
 * 0..nmax (weights rms + |x| as in ggml), then the 8 scales and 8 mins quantized to
 * 6 bits against fp16 super-scales, written into the header at b (d, dmin, the 12
 * scale bytes), then every element re-rounded against the stored grid into L. */
static void fit_k_affine(const float *x, uint8_t *b, int nmax, uint8_t L[QK_K]) {
    float w[32], scales[8], mins[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_affine(32, nmax, xs, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20);
        max_scale = fmaxf(max_scale, scales[j]);
        max_min = fmaxf(max_min, mins[j]);
    }
    /* 6-bit scales and mins, rounded against the fp16 super-scales as stored */
    const float d = store_f16(b, max_scale / 63.0f);
    const float dmin = store_f16(b + 2, max_min / 63.0f);
    const float inv_scale = d > 0 ? 1.0f / d : 0.0f;
    const float inv_min = dmin > 0 ? 1.0f / dmin : 0.0f;
    uint8_t *sc = b + 4;
    memset(sc, 0, K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        const int ls = round_clamp(inv_scale * scales[j], 0, 63);
        const int lm = round_clamp(inv_min * mins[j], 0, 63);
        if (j < 4) {
            sc[j] = (uint8_t)ls;
            sc[j + 4] = (uint8_t)lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 0xf) | ((lm & 0xf) << 4));
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    for (int j = 0; j < 8; j++) {
        int s, m;
        q4k_scale_min(j, sc, &s, &m);
        const float ds = d * (float)s;
        if (ds == 0) continue;
        const float dm = dmin * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)round_clamp((x[32 * j + l] + dm) / ds, 0, nmax);
    }
}

/* Q4_K: the 4-bit fit; runs r of 32 bytes hold sub-block 2r low, 2r+1 high. */
static void quant_q4_K(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K, b += sizeof(block_q4_K)) {
        uint8_t L[QK_K];
        fit_k_affine(x, b, 15, L);
        uint8_t *q = b + Q4_K_QS;
        for (int r = 0; r < 4; r++, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[64 * r + l] | (L[64 * r + 32 + l] << 4));
    }
}

/* Q5_K: the 5-bit fit; Q4_K's nibble layout plus the fifth bits in qh. */
static void quant_q5_K(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K, b += sizeof(block_q5_K)) {
        uint8_t L[QK_K];
        fit_k_affine(x, b, 31, L);
        uint8_t *q = b + Q5_K_QS, *qh = b + Q5_K_QH;
        memset(qh, 0, QK_K / 8);
        for (int r = 0; r < 4; r++, q += 32)
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * r + l], hi = L[64 * r + 32 + l];
                q[l] = (uint8_t)((lo & 0xf) | ((hi & 0xf) << 4));
                qh[l] |= (uint8_t)(((lo >> 4) << (2 * r)) | ((hi >> 4) << (2 * r + 1)));
            }
    }
}

/* Symmetric fit x[i] ~ scale * (L[i] - nmax), L in 0..2*nmax-1, weights x^2: starts
 * from the grid that maps the largest-magnitude element to -nmax and tries 18 nearby
 * grids, keeping the best least-squares fit (ggml's make_qx_quants, rmse_type 1).
 * Works on x / amax so the cubic sums cannot overflow. Returns the (signed) scale. */
static float fit_symmetric(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (!(amax >= 1e-15f) || isinf(amax)) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float xn[32];
    for (int i = 0; i < n; i++) xn[i] = x[i] / amax;
    const float maxn = max / amax; /* +-1 */
    float iscale = -(float)nmax / maxn;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = round_clamp(iscale * xn[i], -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = xn[i] * xn[i];
        sumlx += w * xn[i] * (float)l;
        suml2 += w * (float)(l * l);
    }
    float scale = suml2 > 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / maxn;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = round_clamp(iscale * xn[i], -nmax, nmax - 1);
            const float w = xn[i] * xn[i];
            sumlx += w * xn[i] * (float)l;
            suml2 += w * (float)(l * l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(round_clamp(iscale * xn[i], -nmax, nmax - 1) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale * amax;
}

/* Q6_K: per 16-element group a symmetric 6-bit fit, group scales quantized to int8
 * against an fp16 super-scale (largest-magnitude scale maps to -128), then every
 * element re-rounded against the stored grid. */
static void quant_q6_K(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K, b += sizeof(block_q6_K)) {
        int8_t Ls[QK_K];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_symmetric(16, 32, x + 16 * g, Ls + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(b, 0, sizeof(block_q6_K));
        if (!(max_abs_scale >= 1e-15f)) {
            /* all-zero block: quants 32 (value 0) would be tidier, but ggml writes
             * zeros too and d = 0 makes every value 0 either way */
            continue;
        }
        /* the largest-magnitude scale maps to -128; round against the stored d */
        const float d = store_f16(b + Q6_K_D, max_scale / -128.0f);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        int8_t *sc = (int8_t *)(b + Q6_K_SC);
        for (int g = 0; g < 16; g++) sc[g] = (int8_t)round_clamp(scales[g] * id, -128, 127);
        uint8_t L[QK_K];
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)sc[g];
            for (int l = 0; l < 16; l++) {
                const int k = 16 * g + l;
                L[k] = dg != 0 ? (uint8_t)(round_clamp(x[k] / dg, -32, 31) + 32)
                               : (uint8_t)Ls[k];
            }
        }
        uint8_t *ql = b + Q6_K_QL, *qh = b + Q6_K_QH;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
            const uint8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xf) | ((Lh[l + 64] & 0xf) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xf) | ((Lh[l + 96] & 0xf) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

/* Q5_0: as Q4_0 with 32 levels: the largest-magnitude element maps to -16. */
static void quant_q5_0(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK5_0, b += sizeof(block_q5_0)) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK5_0; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = store_f16(b + Q5_0_D, max / -16.0f);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const int q0 = round_clamp(x[j] * id, -16, 15) + 16;
            const int q1 = round_clamp(x[j + 16] * id, -16, 15) + 16;
            b[Q5_0_QS + j] = (uint8_t)((q0 & 0xf) | ((q1 & 0xf) << 4));
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        for (int k = 0; k < 4; k++) b[Q5_0_QH + k] = (uint8_t)(qh >> (8 * k));
    }
}

/* Q4_1 / Q5_1: min and max of the block span levels 0..nmax; the min is stored as
 * fp16 and the elements rounded against the stored min and scale. */
static void quant_affine32(const float *x, uint8_t *b, int64_t nb, int nmax) {
    const size_t bb = nmax == 15 ? sizeof(block_q4_1) : sizeof(block_q5_1);
    for (int64_t i = 0; i < nb; i++, x += 32, b += bb) {
        float mn = x[0], mx = x[0];
        for (int j = 1; j < 32; j++) {
            mn = fminf(mn, x[j]);
            mx = fmaxf(mx, x[j]);
        }
        const float d = store_f16(b, (mx - mn) / (float)nmax);
        wr16(b + 2, f32_to_fp16(mn));
        const float m = rdf16(b + 2);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        uint8_t L[32];
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)round_clamp((x[j] - m) * id, 0, nmax);
        uint8_t *qs = b + (nmax == 15 ? Q4_1_QS : Q5_1_QS);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            qs[j] = (uint8_t)((L[j] & 0xf) | ((L[j + 16] & 0xf) << 4));
            qh |= (uint32_t)(L[j] >> 4) << j | (uint32_t)(L[j + 16] >> 4) << (j + 16);
        }
        if (nmax == 31)
            for (int k = 0; k < 4; k++) b[Q5_1_QH + k] = (uint8_t)(qh >> (8 * k));
    }
}

/* Q2_K: per 16-element group an affine fit with levels 0..3 (weights |x|, as ggml),
 * group scales and mins quantized to 4 bits against fp16 super-scales, elements
 * re-rounded against the stored grid. */
static void quant_q2_K(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K, b += sizeof(block_q2_K)) {
        uint8_t L[QK_K];
        float w[16], scales[16], mins[16], max_scale = 0, max_min = 0;
        for (int g = 0; g < 16; g++) {
            const float *xs = x + 16 * g;
            for (int l = 0; l < 16; l++) w[l] = fabsf(xs[l]);
            scales[g] = fit_affine(16, 3, xs, w, L + 16 * g, &mins[g], -0.5f, 0.1f, 15);
            max_scale = fmaxf(max_scale, scales[g]);
            max_min = fmaxf(max_min, mins[g]);
        }
        const float d = store_f16(b + Q2_K_D, max_scale / 15.0f);
        const float dmin = store_f16(b + Q2_K_DMIN, max_min / 15.0f);
        const float inv_scale = d > 0 ? 1.0f / d : 0.0f, inv_min = dmin > 0 ? 1.0f / dmin : 0.0f;
        for (int g = 0; g < 16; g++) {
            const int ls = round_clamp(inv_scale * scales[g], 0, 15);
            const int lm = round_clamp(inv_min * mins[g], 0, 15);
            b[Q2_K_SC + g] = (uint8_t)(ls | (lm << 4));
            const float ds = d * (float)ls, dm = dmin * (float)lm;
            if (ds == 0) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)round_clamp((x[16 * g + l] + dm) / ds, 0, 3);
        }
        uint8_t *qs = b + Q2_K_QS;
        memset(qs, 0, QK_K / 4);
        for (int e = 0; e < QK_K; e++)
            qs[32 * (e / 128) + e % 32] |= (uint8_t)((L[e] & 3) << (2 * ((e % 128) / 32)));
    }
}

/* Q3_K: per 16-element group a symmetric fit with levels -4..3, the group scales
 * quantized to 6 bits (-32..31) against an fp16 super-scale (the largest-magnitude
 * scale maps to -32), elements re-rounded against the stored grid. */
static void quant_q3_K(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K, b += sizeof(block_q3_K)) {
        int8_t Ls[QK_K];
        float scales[16], max_scale = 0, max_abs = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_symmetric(16, 4, x + 16 * g, Ls + 16 * g);
            if (fabsf(scales[g]) > max_abs) {
                max_abs = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(b, 0, sizeof(block_q3_K));
        const float d = max_abs >= 1e-15f ? store_f16(b + Q3_K_D, max_scale / -32.0f) : 0.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        uint8_t *sc = b + Q3_K_SC, *qs = b + Q3_K_QS, *hm = b + Q3_K_HM;
        for (int g = 0; g < 16; g++) {
            const int ls = round_clamp(scales[g] * id, -32, 31);
            const int v = ls + 32;
            if (g < 8) sc[g] |= (uint8_t)(v & 0xf);
            else sc[g - 8] |= (uint8_t)((v & 0xf) << 4);
            sc[8 + g % 4] |= (uint8_t)((v >> 4) << (2 * (g / 4)));
            const float dl = d * (float)ls;
            for (int l = 0; l < 16; l++) {
                const int e = 16 * g + l;
                const int u = dl != 0 ? round_clamp(x[e] / dl, -4, 3) + 4 : 4;
                const int n = e / 128, j = (e % 128) / 32, k = e % 32;
                qs[32 * n + k] |= (uint8_t)((u & 3) << (2 * j));
                hm[k] |= (uint8_t)((u >> 2) << (4 * n + j));
            }
        }
    }
}

/* Index of the IQ4_NL level nearest to v (the lower one on a tie; 0 for NaN): the
 * number of midpoints between neighbouring levels that v lies above. */
static int iq4_nearest(float v) {
    static const float mid[15] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f,
                                  7.0f,    19.0f,  31.5f,  45.5f,  61.0f,  79.0f,  101.0f};
    int k = 0;
    for (int i = 0; i < 15; i++) k += v > mid[i];
    return k;
}

/* Best scale s for x ~ s * iq4nl_values[u] over n elements: tries grids mapping the
 * largest-magnitude element near the outermost level and keeps the least-squares
 * scale of the one with the smallest squared error. 0 for an all-zero (or non-finite)
 * block. */
static float fit_iq4(const float *x, int n) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (!(amax >= 1e-15f) || isinf(amax)) return 0;
    float best_s = max / (float)iq4nl_values[0], best_err = INFINITY;
    for (int k = -8; k <= 8; k++) {
        const float id = ((float)iq4nl_values[0] + (float)k) / max;
        double sxl = 0, sll = 0, sxx = 0;
        for (int i = 0; i < n; i++) {
            const float l = (float)iq4nl_values[iq4_nearest(x[i] * id)];
            sxl += (double)x[i] * l;
            sll += (double)l * l;
            sxx += (double)x[i] * x[i];
        }
        if (!(sll > 0)) continue;
        const double s = sxl / sll, err = sxx - s * sxl;
        if (err < best_err) {
            best_err = (float)err;
            best_s = (float)s;
        }
    }
    return best_s;
}

/* IQ4_NL: the best-fit scale stored as fp16, each element the nearest level under it. */
static void quant_iq4_nl(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK4_NL, b += sizeof(block_iq4_nl)) {
        wr16(b + IQ4_NL_D, f32_to_fp16(fit_iq4(x, QK4_NL)));
        const float d = rdf16(b + IQ4_NL_D);
        const float id = d != 0 && isfinite(d) ? 1.0f / d : 0.0f;
        for (int j = 0; j < 16; j++)
            b[IQ4_NL_QS + j] = (uint8_t)(iq4_nearest(x[j] * id) | iq4_nearest(x[j + 16] * id) << 4);
    }
}

/* IQ4_XS: a best-fit scale per 32-element sub-block, quantized to 6 bits (-32..31)
 * against an fp16 super-scale, each element the nearest level under the stored scale. */
static void quant_iq4_xs(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K, b += sizeof(block_iq4_xs)) {
        float scales[8], max_scale = 0, max_abs = 0;
        for (int j = 0; j < 8; j++) {
            scales[j] = fit_iq4(x + 32 * j, 32);
            if (fabsf(scales[j]) > max_abs) {
                max_abs = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(b, 0, sizeof(block_iq4_xs));
        const float d = max_abs > 0 ? store_f16(b + IQ4_XS_D, max_scale / -32.0f) : 0.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        uint16_t sh = 0;
        for (int j = 0; j < 8; j++) {
            const int ls = round_clamp(scales[j] * id, -32, 31);
            const int v = ls + 32;
            b[IQ4_XS_SL + j / 2] |= (uint8_t)((v & 0xf) << (4 * (j & 1)));
            sh |= (uint16_t)((v >> 4) << (2 * j));
            const float dl = d * (float)ls;
            const float il = dl != 0 && isfinite(dl) ? 1.0f / dl : 0.0f;
            const float *xs = x + 32 * j;
            uint8_t *qs = b + IQ4_XS_QS + 16 * j;
            for (int l = 0; l < 16; l++)
                qs[l] = (uint8_t)(iq4_nearest(xs[l] * il) | iq4_nearest(xs[l + 16] * il) << 4);
        }
        wr16(b + IQ4_XS_SH, sh);
    }
}

/* Index of the MXFP4 code nearest to v / d (the first on a tie, so 0 for zero; 0 for
 * NaN too). */
static int mxfp4_nearest(float v, float d) {
    int best = 0;
    float best_err = fabsf(v);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)mxfp4_values[i] * d - v);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* MXFP4 (ggml's quantize_row_mxfp4_ref): for the block's largest magnitude amax in
 * [2^k, 2^(k+1)) the scale is 2^(k-2) (e = k - 2 + 127, clamped to 0..254), so the
 * largest code, 6 * 2^(k-2), is 1.5 * 2^k: like ggml (and the OCP spec) magnitudes
 * above that clip to it. k comes from frexpf (exact, where ggml's log2f can round a
 * value just below a power of two up). Each element takes its nearest code. */
static void quant_mxfp4(const float *x, uint8_t *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_MXFP4, b += sizeof(block_mxfp4)) {
        float amax = 0;
        for (int j = 0; j < QK_MXFP4; j++) amax = fmaxf(amax, fabsf(x[j])); /* (NaN ignored) */
        int e = 0;
        if (amax > 0 && isfinite(amax)) {
            int k;
            frexpf(amax, &k); /* amax = m * 2^k, m in [0.5, 1): floor(log2(amax)) = k - 1 */
            e = k - 1 - 2 + 127;
            e = e < 0 ? 0 : e > 254 ? 254 : e;
        } else if (isinf(amax)) {
            e = 254;
        }
        b[0] = (uint8_t)e;
        const float d = e8m0_half_to_f32((uint8_t)e);
        for (int j = 0; j < 16; j++)
            b[1 + j] = (uint8_t)(mxfp4_nearest(x[j], d) | mxfp4_nearest(x[j + 16], d) << 4);
    }
}

int quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    const qtype_info *t = qtype_get(type);
    if (!t || !t->quantizable) return LLC_ERR_UNSUPPORTED;
    if (n < 0 || n % t->block_elems) return LLC_ERR_RANGE;
    uint8_t *b = dst;
    const int64_t nb = n / t->block_elems;
    switch (type) {
    case QT_F32: if (n) memcpy(dst, src, (size_t)n * sizeof(float)); return 0;
    case QT_F16: for (int64_t i = 0; i < n; i++) wr16(b + 2 * i, f32_to_fp16(src[i])); return 0;
    case QT_BF16: for (int64_t i = 0; i < n; i++) wr16(b + 2 * i, f32_to_bf16(src[i])); return 0;
    case QT_Q8_0: quant_q8_0(src, b, nb); return 0;
    case QT_Q4_0: quant_q4_0(src, b, nb); return 0;
    case QT_Q4_K: quant_q4_K(src, b, nb); return 0;
    case QT_Q6_K: quant_q6_K(src, b, nb); return 0;
    case QT_Q4_1: quant_affine32(src, b, nb, 15); return 0;
    case QT_Q5_0: quant_q5_0(src, b, nb); return 0;
    case QT_Q5_1: quant_affine32(src, b, nb, 31); return 0;
    case QT_Q2_K: quant_q2_K(src, b, nb); return 0;
    case QT_Q3_K: quant_q3_K(src, b, nb); return 0;
    case QT_Q5_K: quant_q5_K(src, b, nb); return 0;
    case QT_IQ4_NL: quant_iq4_nl(src, b, nb); return 0;
    case QT_IQ4_XS: quant_iq4_xs(src, b, nb); return 0;
    case QT_MXFP4: quant_mxfp4(src, b, nb); return 0;
    default: return LLC_ERR_UNSUPPORTED;
    }
}
