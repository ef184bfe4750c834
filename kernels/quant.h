/* quant.h — tensor element types as stored in GGUF files: their ids and names,
 * block layouts (elements per block, bytes per block), scalar reference
 * dequantization, and reference quantization (used by the model generator and tests).
 *
 * Ids are ggml's `enum ggml_type` values, the ones written in GGUF tensor infos.
 * Every id ggml has assigned is known by name and size, so a file using one we do
 * not compute with loads its table fine and is reported by name ("TQ1_0 is not
 * supported") when a model wants to use the tensor. */
#ifndef LLC_QUANT_H
#define LLC_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum qtype {
    QT_F32 = 0,
    QT_F16 = 1,
    QT_Q4_0 = 2,
    QT_Q4_1 = 3,
    QT_Q5_0 = 6,
    QT_Q5_1 = 7,
    QT_Q8_0 = 8,
    QT_Q8_1 = 9,
    QT_Q2_K = 10,
    QT_Q3_K = 11,
    QT_Q4_K = 12,
    QT_Q5_K = 13,
    QT_Q6_K = 14,
    QT_Q8_K = 15,
    QT_IQ2_XXS = 16,
    QT_IQ2_XS = 17,
    QT_IQ3_XXS = 18,
    QT_IQ1_S = 19,
    QT_IQ4_NL = 20,
    QT_IQ3_S = 21,
    QT_IQ2_S = 22,
    QT_IQ4_XS = 23,
    QT_I8 = 24,
    QT_I16 = 25,
    QT_I32 = 26,
    QT_I64 = 27,
    QT_F64 = 28,
    QT_IQ1_M = 29,
    QT_BF16 = 30,
    QT_TQ1_0 = 34,
    QT_TQ2_0 = 35,
    QT_MXFP4 = 39,
    QT_COUNT = 40, /* one past the largest id */
} qtype;

/* Block layouts of the types we compute with (little-endian, packed). */
#define QK8_0 32
#define QK4_0 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef struct { uint16_t d; int8_t qs[QK8_0]; } block_q8_0;          /* 34 bytes */
typedef struct { uint16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;     /* 18 bytes */
typedef struct {                                                      /* 144 bytes */
    uint16_t d;                      /* super-block scale for the 6-bit scales */
    uint16_t dmin;                   /* super-block scale for the 6-bit mins */
    uint8_t scales[K_SCALE_SIZE];    /* 8 scales + 8 mins, 6 bits each */
    uint8_t qs[QK_K / 2];            /* 4-bit quants */
} block_q4_K;
typedef struct {                     /* 210 bytes */
    uint8_t ql[QK_K / 2];            /* low 4 bits of the 6-bit quants */
    uint8_t qh[QK_K / 4];            /* high 2 bits */
    int8_t scales[QK_K / 16];        /* 8-bit scales of 16-element groups */
    uint16_t d;                      /* super-block scale */
} block_q6_K;

/* The other common types (ggml-common.h). "u" below is the stored unsigned quant. */
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK4_NL 32
typedef struct { uint16_t d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;  /* 20 bytes: d*u + m */
typedef struct {                     /* 22 bytes: d*(u - 16), u 5 bits */
    uint16_t d;
    uint8_t qh[4];                   /* bit j: high bit of element j */
    uint8_t qs[QK5_0 / 2];           /* low nibbles: elements 0-15, high: 16-31 */
} block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1; /* 24: d*u + m */
typedef struct {                     /* 84 bytes: 16 groups of 16, d*sc*u - dmin*m, u 2 bits */
    uint8_t scales[QK_K / 16];       /* low nibble scale, high nibble min, per group */
    uint8_t qs[QK_K / 4];            /* 2-bit quants */
    uint16_t d, dmin;
} block_q2_K;
typedef struct {                     /* 110 bytes: 16 groups of 16, d*(sc - 32)*(u - 4), u 3 bits */
    uint8_t hmask[QK_K / 8];         /* high bits */
    uint8_t qs[QK_K / 4];            /* low 2 bits */
    uint8_t scales[12];              /* 16 six-bit scales */
    uint16_t d;
} block_q3_K;
typedef struct {                     /* 176 bytes: as Q4_K with 5-bit quants */
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];            /* byte l bit j: high bit of element 32j + l */
    uint8_t qs[QK_K / 2];
} block_q5_K;
typedef struct { uint16_t d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl; /* 18 bytes: d*kv[u] */
typedef struct {                     /* 136 bytes: 8 sub-blocks of 32, d*(ls - 32)*kv[u] */
    uint16_t d;
    uint16_t scales_h;               /* high 2 bits of the 8 six-bit scales */
    uint8_t scales_l[QK_K / 64];     /* low 4 bits, two per byte */
    uint8_t qs[QK_K / 2];            /* as IQ4_NL, 16 bytes per sub-block */
} block_iq4_xs;
/* IQ4_XS's six-bit scale of sub-block j of block b, as stored (+ 32: the scale is
 * this - 32): low four bits in scales_l, high two in scales_h */
static inline int iq4_xs_scale6(const uint8_t *b, int j) {
    const unsigned sh = b[offsetof(block_iq4_xs, scales_h)] | (unsigned)b[offsetof(block_iq4_xs, scales_h) + 1] << 8;
    return ((b[offsetof(block_iq4_xs, scales_l) + j / 2] >> (4 * (j & 1))) & 0xf) | ((sh >> (2 * j)) & 3) << 4;
}

#define QK_MXFP4 32
typedef struct {                     /* 17 bytes: 2^(e-128) * mxfp4_values[u] */
    uint8_t e;                       /* E8M0 scale: exponent only, bias 127 */
    uint8_t qs[QK_MXFP4 / 2];        /* 4-bit E2M1 codes, IQ4_NL's nibble order */
} block_mxfp4;

/* The i-quants (ggml-common.h; their grids and sign tables are in iq_tables.h).
 * All are superblocks of 256 = 8 sub-blocks of 32, each sub-block 4 groups of 8
 * elements taken from a grid entry ("idx": its index) with signs. d: fp16. */
typedef struct {                     /* 66 bytes: per sub-block two 32-bit words: */
    uint16_t d;                      /*   w0: 4 grid indices, one per byte (group l: byte l) */
    uint16_t qs[QK_K / 8];           /*   w1: 4 x 7-bit sign indices (group l: bits 7l..7l+6)
                                      *       and the 4-bit scale s (bits 28-31);
                                      *   value = d*(2s+1)/8 * iq2xxs_grid * sign */
} block_iq2_xxs;
typedef struct {                     /* 74 bytes */
    uint16_t d;
    uint16_t qs[QK_K / 8];           /* per group: 9-bit grid index | 7-bit sign index << 9 */
    uint8_t scales[QK_K / 32];       /* per sub-block: low nibble groups 0-1, high groups 2-3 */
} block_iq2_xs;                      /* value = d*(2s+1)/8 * iq2xs_grid * sign */
typedef struct {                     /* 82 bytes */
    uint16_t d;
    uint8_t qs[QK_K / 4];            /* [0, 32): low 8 bits of the group indices; [32, 64):
                                      * the groups' sign bytes (bit j: element j negative) */
    uint8_t qh[QK_K / 32];           /* per sub-block: bits 2l..2l+1 = index bits 8-9 of group l */
    uint8_t scales[QK_K / 32];       /* as IQ2_XS */
} block_iq2_s;                       /* value = d*(2s+1)/8 * iq2s_grid * sign */
typedef struct {                     /* 98 bytes */
    uint16_t d;
    uint8_t qs[3 * QK_K / 8];        /* [0, 64): per half-group of 4 a byte index into
                                      * iq3xxs_grid; [64, 96): per sub-block a 32-bit word
                                      * as IQ2_XXS's w1 */
} block_iq3_xxs;                     /* value = d*(2s+1)/4 * iq3xxs_grid * sign */
typedef struct {                     /* 110 bytes */
    uint16_t d;
    uint8_t qs[QK_K / 4];            /* per half-group k (of 4) of a sub-block: low 8 index bits */
    uint8_t qh[QK_K / 32];           /* per sub-block: bit k = index bit 8 of half-group k */
    uint8_t signs[QK_K / 8];         /* per group a sign byte, bit j: element j negative */
    uint8_t scales[QK_K / 64];       /* per sub-block pair: low nibble even, high odd */
} block_iq3_s;                       /* value = d*(2s+1) * iq3s_grid * sign */
typedef struct {                     /* 50 bytes */
    uint16_t d;
    uint8_t qs[QK_K / 8];            /* per group: low 8 bits of an 11-bit iq1s_grid index */
    uint16_t qh[QK_K / 32];          /* per sub-block: bits 3l..3l+2 index bits 8-10 of group
                                      * l, bits 12-14 scale s, bit 15 delta sign */
} block_iq1_s;                       /* value = d*(2s+1) * (grid ± 1/8), grid in {-1, 0, 1} */
typedef struct {                     /* 56 bytes */
    uint8_t qs[QK_K / 8];            /* as IQ1_S */
    uint8_t qh[QK_K / 16];           /* per group pair: low nibble group 2k, high 2k+1:
                                      * bits 0-2 index bits 8-10, bit 3 delta sign */
    uint8_t scales[QK_K / 32];       /* four 16-bit words: bits 12-15 of word k hold bits
                                      * 4k..4k+3 of d; bits 3m..3m+2 (m < 4) the 3-bit scale s
                                      * of elements 16(4k+m) .. 16(4k+m)+15 */
} block_iq1_m;                       /* value = d*(2s+1) * (grid ± 1/8) */

/* An i-quant superblock as integers: element e's value is
 *   d * mul[e / 16] * lv[e] / div
 * exactly as ggml's dequantization computes it (lv carries the grid value and sign;
 * for IQ1_S / IQ1_M it is 8·(grid ± 1/8), so div is 8 there). The scalar matmul
 * level multiplies lv with the activations as integers. */
typedef struct iq_unpacked {
    float d;          /* the superblock's scale */
    int div;          /* 8 (IQ2_*, IQ1_*), 4 (IQ3_XXS) or 1 (IQ3_S) */
    uint8_t mul[16];  /* per 16 elements: 2s+1 */
    int8_t lv[QK_K];  /* |lv| <= 62 */
} iq_unpacked;

/* Whether `type` is one of the seven i-quants iq_unpack decodes. */
bool qtype_is_iq(uint32_t type);
/* Decodes one superblock of an i-quant type (qtype_is_iq) at b (any alignment). */
void iq_unpack(uint32_t type, const uint8_t *b, iq_unpacked *u);

/* IQ4_NL / IQ4_XS's 16 non-uniform levels. */
extern const int8_t iq4nl_values[16];
/* MXFP4's E2M1 code values, doubled (ggml's kvalues_mxfp4): codes 0-7 are
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6 and 8-15 their negatives; stored doubled so they are
 * integers, with the block scale halved to match (e8m0_half_to_f32). */
extern const int8_t mxfp4_values[16];

/* Half of an E8M0 scale, 2^(e-127) / 2 = 2^(e-128), exactly (2^-128 and 2^-127 are
 * float subnormals); ggml's GGML_E8M0_TO_FP32_HALF. 255, NaN in the OCP spec, is
 * 2^127 here as in ggml. */
static inline float e8m0_half_to_f32(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

typedef struct qtype_info {
    const char *name;     /* "Q4_K"; NULL for ids ggml never assigned */
    uint32_t block_elems; /* elements per block */
    uint32_t block_bytes; /* bytes per block */
    bool supported;       /* we can dequantize / compute with it */
    bool quantizable;     /* quantize_row can write it (not the i-quants, whose
                             quantizers need an importance matrix) */
} qtype_info;

/* Info for a type id; NULL if the id is unknown (never assigned or out of range). */
const qtype_info *qtype_get(uint32_t type);
/* Name of a type id, or "unknown" for ids ggml never assigned. */
const char *qtype_name(uint32_t type);
/* Parses a name like "q4_k" or "F16" (case-insensitive); -1 if unknown. */
int qtype_from_name(const char *name);

/* Bytes needed for a row of n elements; 0 if n is not a multiple of the block size
 * or the type is unknown. */
size_t qtype_row_bytes(uint32_t type, int64_t n);

/* Scalar half/bfloat conversions (round-to-nearest-even on the way down). */
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

/* Reference dequantization of n elements (a multiple of the block size) from
 * `src` into `dst`. Returns 0, or a negative code for an unsupported type. */
int dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);

/* Reference quantization of n floats into `dst` (qtype_row_bytes(type, n) bytes).
 * Supported for the types marked quantizable (the float types, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4). Returns 0 or negative. */
int quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

#endif
