/* matmul_neon.c — the NEON matmul level of aarch64 (baseline ARMv8.0 Advanced
 * SIMD, no dot-product extension needed): F32, F16, BF16, Q8_0, Q4_0 and Q4_K
 * weight rows against the same quantized activation rows (matmul_internal.h) as
 * every other level. The activations are quantized by the scalar code, and weight
 * types without a NEON kernel here go to the scalar level's dot_rows for the whole
 * chunk, so every type the scalar level knows works on aarch64.
 *
 * Integer products: 8 signed bytes × 8 signed bytes widen to 16-bit lanes
 * (vmull_s8) and pairwise-add into 32-bit lanes (vpadalq_s16); |w|,|x| <= 128 keep
 * each 16-bit product in range. Sums of a block are exact integers, so the result
 * does not depend on the order of the lanes; one float accumulator per row in a
 * fixed order keeps a batched row bit-identical to the row alone. */
#if defined(__aarch64__)

#include <arm_neon.h>
#include <string.h>

#include "kernels/cpu/matmul_internal.h"

static inline float f16(const uint8_t *p) { return fp16_to_f32(mm_rd16(p)); }

/* Σ a[i]·b[i] over 32 signed bytes, as 4 int32 lanes */
static inline int32x4_t dot32_s8(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
    int32x4_t acc = vdupq_n_s32(0);
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a0), vget_low_s8(b0)));
    acc = vpadalq_s16(acc, vmull_s8(vget_high_s8(a0), vget_high_s8(b0)));
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a1), vget_low_s8(b1)));
    acc = vpadalq_s16(acc, vmull_s8(vget_high_s8(a1), vget_high_s8(b1)));
    return acc;
}

/* ---- float weights ----------------------------------------------------------------- */

static float dot_f32(const uint8_t *w, const float *x, int64_t n) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float *wf = (const float *)(const void *)(w + 4 * i);
        a0 = vfmaq_f32(a0, vreinterpretq_f32_u8(vld1q_u8((const uint8_t *)wf)), vld1q_f32(x + i));
        a1 = vfmaq_f32(a1, vreinterpretq_f32_u8(vld1q_u8((const uint8_t *)(wf + 4))), vld1q_f32(x + i + 4));
        a2 = vfmaq_f32(a2, vreinterpretq_f32_u8(vld1q_u8((const uint8_t *)(wf + 8))), vld1q_f32(x + i + 8));
        a3 = vfmaq_f32(a3, vreinterpretq_f32_u8(vld1q_u8((const uint8_t *)(wf + 12))), vld1q_f32(x + i + 12));
    }
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) {
        float v;
        memcpy(&v, w + 4 * i, 4);
        s += v * x[i];
    }
    return s;
}

/* 8 halves or bfloats → two float32x4 */
static inline void load_f16x8(const uint8_t *p, float32x4_t *lo, float32x4_t *hi) {
    const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
    *lo = vcvt_f32_f16(vget_low_f16(h));
    *hi = vcvt_high_f32_f16(h);
}
static inline void load_bf16x8(const uint8_t *p, float32x4_t *lo, float32x4_t *hi) {
    const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(p));
    *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    *hi = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16));
}

#define DOT_HALF(NAME, LOAD, SCALAR)                                                  \
    static float NAME(const uint8_t *w, const float *x, int64_t n) {                 \
        float32x4_t a0 = vdupq_n_f32(0), a1 = a0;                                      \
        int64_t i = 0;                                                               \
        for (; i + 8 <= n; i += 8) {                                                  \
            float32x4_t lo, hi;                                                      \
            LOAD(w + 2 * i, &lo, &hi);                                                \
            a0 = vfmaq_f32(a0, lo, vld1q_f32(x + i));                                 \
            a1 = vfmaq_f32(a1, hi, vld1q_f32(x + i + 4));                             \
        }                                                                            \
        float s = vaddvq_f32(vaddq_f32(a0, a1));                                      \
        for (; i < n; i++) s += SCALAR(mm_rd16(w + 2 * i)) * x[i];                   \
        return s;                                                                    \
    }
DOT_HALF(dot_f16, load_f16x8, fp16_to_f32)
DOT_HALF(dot_bf16, load_bf16x8, bf16_to_f32)

/* ---- quantized weights -------------------------------------------------------------- */

static float dot_q8_0(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t b = 0; b < n / QK8_0; b++, w += sizeof(block_q8_0)) {
        const int8_t *qw = (const int8_t *)(w + offsetof(block_q8_0, qs));
        const int8_t *qx = x->q + b * QK8_0;
        const int32x4_t s = dot32_s8(vld1q_s8(qw), vld1q_s8(qw + 16), vld1q_s8(qx), vld1q_s8(qx + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), f16(w) * x->d[b]);
    }
    return vaddvq_f32(acc);
}

/* Q4_0: nibbles minus 8 (low nibbles are elements 0-15, high ones 16-31) */
static float dot_q4_0(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    for (int64_t b = 0; b < n / QK4_0; b++, w += sizeof(block_q4_0)) {
        const uint8x16_t v = vld1q_u8(w + offsetof(block_q4_0, qs));
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m4)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
        const int8_t *qx = x->q + b * QK4_0;
        const int32x4_t s = dot32_s8(lo, hi, vld1q_s8(qx), vld1q_s8(qx + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), f16(w) * x->d[b]);
    }
    return vaddvq_f32(acc);
}

/* Q4_K: per 32-block j, d·sc_j·d_x·Σ(u·q) − dmin·m_j·aux_j, u the 4-bit quant */
static float dot_q4_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0);
    float mins = 0;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q4_K)) {
        const float d = f16(w + offsetof(block_q4_K, d)), dmin = f16(w + offsetof(block_q4_K, dmin));
        uint8_t sm[16];
        mm_q4k_scales(w + offsetof(block_q4_K, scales), sm);
        const uint8_t *qs = w + offsetof(block_q4_K, qs);
        for (int r = 0; r < 4; r++) { /* 32 bytes: block 2r in the low nibbles, 2r+1 in the high */
            const uint8x16_t v0 = vld1q_u8(qs + 32 * r), v1 = vld1q_u8(qs + 32 * r + 16);
            const int8_t *qx = x->q + (i * 8 + 2 * r) * 32;
            const int32x4_t s_lo = dot32_s8(vreinterpretq_s8_u8(vandq_u8(v0, m4)), vreinterpretq_s8_u8(vandq_u8(v1, m4)),
                                            vld1q_s8(qx), vld1q_s8(qx + 16));
            const int32x4_t s_hi = dot32_s8(vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(v1, 4)),
                                            vld1q_s8(qx + 32), vld1q_s8(qx + 48));
            const int64_t b = i * 8 + 2 * r;
            acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s_lo), d * (float)sm[2 * r] * x->d[b]);
            acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s_hi), d * (float)sm[2 * r + 1] * x->d[b + 1]);
        }
        for (int j = 0; j < 8; j++) mins += dmin * (float)sm[8 + j] * x->af[i * 8 + j];
    }
    return vaddvq_f32(acc) - mins;
}

static float dot_pair_neon(const mm_args *a, const uint8_t *w, const float *x, const mm_xrow *xr) {
    const int64_t n = a->n_in;
    switch (a->type) {
    case QT_F32: return dot_f32(w, x, n);
    case QT_F16: return dot_f16(w, x, n);
    case QT_BF16: return dot_bf16(w, x, n);
    case QT_Q8_0: return dot_q8_0(w, xr, n);
    case QT_Q4_0: return dot_q4_0(w, xr, n);
    case QT_Q4_K: return dot_q4_K(w, xr, n);
    default: return 0;
    }
}

static void dot_rows_neon(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    switch (a->type) {
    case QT_F32: case QT_F16: case QT_BF16: case QT_Q8_0: case QT_Q4_0: case QT_Q4_K: break;
    default: mm_impl_scalar.dot_rows(a, o0, o1, t0, t1); return; /* no NEON kernel yet */
    }
    mm_dot_rows_blocked(a, o0, o1, t0, t1, dot_pair_neon);
}

static void quantize_x_neon(uint32_t type, const float *x, int64_t n, uint8_t *xq) {
    mm_impl_scalar.quantize_x(type, x, n, xq); /* the same layout for every kernel */
}

const mm_impl mm_impl_neon = {
    .name = "neon",
    .quantize_x = quantize_x_neon,
    .dot_rows = dot_rows_neon,
};

#endif
