/* matmul_internal.h — what the matmul dispatcher (matmul.c) shares with the per-SIMD-
 * level kernel files: the call description, the quantized-activation row layout, and
 * the table of kernels each level provides. Not a public header. */
#ifndef LLC_CPU_MATMUL_INTERNAL_H
#define LLC_CPU_MATMUL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/cpu/matmul.h"

/* ---- quantized activations ----------------------------------------------------
 * For quantized weight types every X row is quantized once per call into an "xq row"
 * of n (a multiple of 32) elements, stored in one buffer of mm_xq_row_bytes(n):
 *   int8  q[n]          q_i = round(x_i / d_b), |q_i| <= 127
 *   float d[n/32]       d_b = max |x| over block b's span / 127 (NaN if the span has
 *                       a NaN); the span is the 32-block itself, or for K-quant
 *                       weights its 256-superblock (mm_act_span)
 *   aux[n/16]           4-byte words whose meaning depends on the weight type:
 *     Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS, MXFP4:
 *                 int32 aux[b] = -128 * sum of q over 32-block b   (b < n/32)
 *     Q4_K, Q5_K, Q4_1, Q5_1:
 *                 float aux[b] = d_b * sum of q over 32-block b    (b < n/32)
 *     Q6_K:       int32 aux[g] = -32 * sum of q over 16-group g    (g < n/16)
 *     Q2_K, Q3_K, the i-quants (IQ1_S .. IQ3_S, which do not read it):
 *                 int32 aux[g] = sum of q over 16-group g          (g < n/16)
 * The aux words are the bias corrections the kernels need: Q8_0 and Q4_0 weights
 * are fed to unsigned×signed byte products as w + 128 (Q5_0's offset of 16 is
 * aux/8), Q6_K's as w + 32, Q3_K's as w + 4 (-4·aux), and the min terms of Q4_K,
 * Q5_K, Q4_1, Q5_1 and Q2_K are the block (group) sums times the weights' min. */
typedef enum mm_aux_kind {
    MM_AUX_NONE,
    MM_AUX_NEG128_SUM32, /* int32 -128·Σq per 32-block */
    MM_AUX_DSUM32,       /* float d·Σq per 32-block */
    MM_AUX_NEG32_SUM16,  /* int32 -32·Σq per 16-group */
    MM_AUX_SUM16,        /* int32 Σq per 16-group */
} mm_aux_kind;

static inline mm_aux_kind mm_aux_of(uint32_t type) {
    switch (type) {
    case QT_Q8_0: case QT_Q4_0: case QT_Q5_0: case QT_IQ4_NL: case QT_IQ4_XS: case QT_MXFP4:
        return MM_AUX_NEG128_SUM32;
    case QT_Q4_K: case QT_Q5_K: case QT_Q4_1: case QT_Q5_1: return MM_AUX_DSUM32;
    case QT_Q6_K: return MM_AUX_NEG32_SUM16;
    case QT_Q2_K: case QT_Q3_K: return MM_AUX_SUM16;
    case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S: case QT_IQ3_XXS: case QT_IQ3_S: case QT_IQ1_S: case QT_IQ1_M:
        return MM_AUX_SUM16; /* (unread: the i-quant kernels need no correction) */
    default: return MM_AUX_NONE;
    }
}

/* The scale kept for an activation block. Against the weight types whose dot
 * partner in ggml is Q8_0 / Q8_1 (scales stored as fp16) the scale is rounded to
 * fp16 the same way, so the products, and greedy continuations, match the
 * reference (a float32 scale changed a Q8_0 model's tokens from the 5th on); the
 * q values still come from the exact scale, as there. Out-of-range scales stay. */
static inline float mm_act_scale(uint32_t type, float db) {
    switch (type) {
    case QT_Q8_0: case QT_Q4_0: case QT_Q4_1: case QT_Q5_0: case QT_Q5_1: case QT_IQ4_NL: case QT_MXFP4: {
        const float r = fp16_to_f32(f32_to_fp16(db));
        return r == r && r - r == 0 ? r : db; /* (inf or NaN: keep db) */
    }
    default: return db;
    }
}

/* Elements that share one activation scale: the 256 of a superblock for the
 * K-quant types, IQ4_XS and the other i-quants (as ggml's Q8_K partner of those
 * types), else one 32-block. d[] keeps one entry per 32-block either way; over a
 * 256-span all eight are the same value (NaN for the whole span if any element is
 * NaN, so a kernel may read d once per superblock, keep its integer sums across the
 * superblock and scale them once). */
static inline int mm_act_span(uint32_t type) {
    switch (type) {
    case QT_Q2_K: case QT_Q3_K: case QT_Q4_K: case QT_Q5_K: case QT_Q6_K: case QT_IQ4_XS: return 256;
    case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S: case QT_IQ3_XXS: case QT_IQ3_S: case QT_IQ1_S: case QT_IQ1_M:
        return 256; /* (ggml's partner of the i-quants is Q8_K too) */
    default: return 32;
    }
}

/* Stores block b's aux word(s) given its scale d_b and the sums s0, s1 of q over its
 * two 16-element halves (the same for every level). */
static inline void mm_store_aux(mm_aux_kind kind, int32_t *ai, float *af, int64_t b, float db, int s0, int s1) {
    switch (kind) {
    case MM_AUX_NEG128_SUM32: ai[b] = -128 * (s0 + s1); break;
    case MM_AUX_DSUM32: af[b] = db * (float)(s0 + s1); break;
    case MM_AUX_NEG32_SUM16:
        ai[2 * b] = -32 * s0;
        ai[2 * b + 1] = -32 * s1;
        break;
    case MM_AUX_SUM16:
        ai[2 * b] = s0;
        ai[2 * b + 1] = s1;
        break;
    default: break;
    }
}
#define MM_QB 32

static inline size_t mm_xq_row_bytes(int64_t n) {
    size_t b = (size_t)n + 4 * (size_t)(n / 32) + 4 * (size_t)(n / 16);
    return (b + 63) & ~(size_t)63;
}

typedef struct mm_xrow {
    const int8_t *q;
    const float *d;
    const int32_t *ai; /* aux as int32 */
    const float *af;   /* aux as float */
} mm_xrow;

static inline mm_xrow mm_xrow_at(const uint8_t *xq, int64_t n) {
    mm_xrow r;
    r.q = (const int8_t *)xq;
    r.d = (const float *)(const void *)(xq + n);
    r.ai = (const int32_t *)(const void *)(xq + n + 4 * (n / 32));
    r.af = (const float *)(const void *)r.ai;
    return r;
}

/* Weight types multiplied with int8 activations (xq rows). */
static inline int mm_type_is_quant(uint32_t type) { return mm_aux_of(type) != MM_AUX_NONE; }
/* Float weights (F32, F16, BF16): no activation quantization. */
static inline int mm_type_is_float(uint32_t type) { return type == QT_F32 || type == QT_F16 || type == QT_BF16; }

/* Quantized types the AVX-512 blocked GEMM (and its packing ahead) handles (the
 * AVX2 level packs ahead Q8_0 only, and checks the type itself); the
 * others go through the dot kernels at every T, or (the i-quants, T >= 4) through
 * matmul_iq_gemm.c, which decodes the rows per call. */
static inline int mm_type_has_gemmq(uint32_t type) {
    return type == QT_Q8_0 || type == QT_Q4_0 || type == QT_Q4_K || type == QT_Q6_K || type == QT_IQ4_XS ||
           type == QT_Q2_K || type == QT_Q3_K || type == QT_IQ4_NL;
}
/* (IQ4_NL's packed panels serve its few rows through a kernel that gives the dot
 * kernel's lanes, matmul_avx512_gemm.c's nl_rows_exact: unpacked or packed, IQ4_NL
 * computes the same at every T. Through the two-panel kernel one row was 0.6-0.9x
 * the dot kernel's speed: its 32-element units.) */

/* ---- one call ------------------------------------------------------------------- */
typedef struct mm_args {
    uint32_t type;
    const uint8_t *W;   /* n_out rows, w_stride bytes apart */
    size_t w_stride;    /* qtype_row_bytes(type, n_in) */
    int64_t n_in, n_out, T;
    const float *X;     /* T rows of n_in floats */
    const uint8_t *xq;  /* quantized X rows (quantized types), xq_stride bytes apart */
    size_t xq_stride;   /* mm_xq_row_bytes(n_in) */
    const uint8_t *xp;  /* GEMM: activations packed by gemm_pack_x (all groups) */
    const uint8_t *wp;  /* GEMM: all of W's panels packed ahead (gemm_prepack), or NULL */
    float *Y;           /* T rows of n_out floats */
} mm_args;

/* ---- the dot-product loop every level shares -------------------------------------
 * Y for outputs [o0, o1) and X rows [t0, t1), one weight row against one activation
 * row at a time, reading W in place: blocks of 16 weight rows stay in cache while
 * every activation row passes. `dot` is the level's kernel for one pair (x: the
 * float row; xr: its quantized form when a->xq is set). Each pair is computed the
 * same way whatever T is, so a batched row equals the row alone bit for bit. */
typedef float (*mm_pair_dot)(const mm_args *a, const uint8_t *w, const float *x, const mm_xrow *xr);

static inline void mm_dot_rows_blocked(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1,
                                       mm_pair_dot dot) {
    for (int64_t ob = o0; ob < o1; ob += 16) {
        const int64_t oe = ob + 16 < o1 ? ob + 16 : o1;
        for (int64_t t = t0; t < t1; t++) {
            const float *x = a->X + t * a->n_in;
            mm_xrow xr = {0};
            if (a->xq) xr = mm_xrow_at(a->xq + (size_t)t * a->xq_stride, a->n_in);
            float *y = a->Y + t * a->n_out;
            for (int64_t o = ob; o < oe; o++) y[o] = dot(a, a->W + (size_t)o * a->w_stride, x, &xr);
        }
    }
}

/* ---- the kernels of one SIMD level ------------------------------------------------ */
typedef struct mm_impl {
    const char *name;
    /* Quantizes n floats (n % 32 == 0) into one xq row for weight type `type`. */
    void (*quantize_x)(uint32_t type, const float *x, int64_t n, uint8_t *xq);
    /* Dot-product kernel: Y for outputs [o0, o1) and X rows [t0, t1), reading W rows
     * in place (GEMV; for T > 1 the rows of the chunk stay in cache across t). */
    void (*dot_rows)(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1);
    /* Optional blocked GEMM for T > 1 (NULL if the level has none).
     * gemm_rows(type, T): output rows are handed out in multiples of this; 0: no
     *   GEMM for this type and batch size (dot_rows does it);
     * gemm_groups(type, T), gemm_group(type, T, g, &t0, &t1): the activation rows
     *   are cut into groups, group g being rows [t0, t1);
     * gemm_xp_bytes(type, n_in, T): size of the packed activations;
     * gemm_pack_x(a, g, xp): packs group g (from a->X, or a->xq once quantized);
     * gemm_scratch(a, rows): per-thread scratch bytes for a chunk of `rows` of call a
     *   (its type, n_in, T and whether a->wp is set);
     * gemm(a, o0, o1, n0, n1, scratch): Y for outputs [o0, o1) (o0 a multiple of
     *   gemm_rows) and all T rows, from a->xp; [n0, n1) are the rows this thread
     *   does next (empty if none), for prefetching. */
    int (*gemm_rows)(uint32_t type, int64_t T);
    int64_t (*gemm_groups)(uint32_t type, int64_t T);
    void (*gemm_group)(uint32_t type, int64_t T, int64_t g, int64_t *t0, int64_t *t1);
    size_t (*gemm_xp_bytes)(uint32_t type, int64_t n_in, int64_t T);
    void (*gemm_pack_x)(const mm_args *a, int64_t g, uint8_t *xp);
    size_t (*gemm_scratch)(const mm_args *a, int64_t rows);
    void (*gemm)(const mm_args *a, int64_t o0, int64_t o1, int64_t n0, int64_t n1, void *scratch);
    /* Optional: W's panels packed once ahead of the calls (quantized types).
     * gemm_prepack_bytes(type, n_in, n_out): bytes of the packed matrix (0: no);
     * gemm_prepack(a, p0, p1, wp): packs rows [16·p0, 16·p1) of a->W into wp;
     * gemm_rows_prepacked(type, T): as gemm_rows, when a->wp is set. */
    size_t (*gemm_prepack_bytes)(uint32_t type, int64_t n_in, int64_t n_out);
    void (*gemm_prepack)(const mm_args *a, int64_t p0, int64_t p1, uint8_t *wp);
    int (*gemm_rows_prepacked)(uint32_t type, int64_t T);
} mm_impl;

extern const mm_impl mm_impl_scalar;

/* Bytes ahead in a weight row that the dot kernels prefetch (MM_PF_DIST): set when
 * the SIMD level is first asked for, from the CPU's vendor (AMD: 0, the hardware
 * prefetcher alone; others: 4096), or from LLC_PREFETCH (bytes, 0-65536). */
extern size_t mm_pf_dist;
/* Whether the CPU has AVX-VNNI (set with the level; defined in matmul_avx2_gemm.c):
 * the AVX2 GEMM's integer sums then take vpdpbusd (matmul_avxvnni_gemm.c), and
 * IQ4_NL, IQ4_XS, MXFP4 its nibble panels, with identical results. */
extern int mm_avx_vnni;
/* Whether the CPU has AVX512_BF16 (set with the level, only where the AVX-512 level
 * is available): the AVX-512 level then multiplies BF16 weights with vdpbf16ps
 * (matmul_avx512_bf16.c). */
extern int mm_avx512_bf16;

#if defined(__x86_64__)
extern const mm_impl mm_impl_avx2;
extern const mm_impl mm_impl_avx512;
#elif defined(__aarch64__)
extern const mm_impl mm_impl_neon;
#endif

/* Q4_K's 12 scale bytes → 8 six-bit scales (out[0..7]) and 8 mins (out[8..15]). */
static inline void mm_q4k_scales(const uint8_t *s, uint8_t out[16]) {
    for (int j = 0; j < 4; j++) {
        out[j] = s[j] & 63;
        out[8 + j] = s[j + 4] & 63;
        out[4 + j] = (uint8_t)((s[j + 8] & 0xf) | ((s[j] >> 6) << 4));
        out[12 + j] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

/* The same as four little-endian words: [0] scales 0-3, [1] scales 4-7, [2] mins 0-3,
 * [3] mins 4-7, one per byte (ggml's bit trick; x86 only, so little-endian). */
static inline void mm_q4k_scales_u32(const uint8_t *s, uint32_t out[4]) {
    uint32_t u[3];
    memcpy(u, s, 12);
    out[0] = u[0] & 0x3f3f3f3fu;
    out[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    out[2] = u[1] & 0x3f3f3f3fu;
    out[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
}

static inline uint16_t mm_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

#endif
