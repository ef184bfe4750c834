/* matmul_scalar.c — the plain-C matmul level, always available: activation
 * quantization (the xq row layout of matmul_internal.h) and a dot-product kernel per
 * weight type. Quantized types use integer dot products on the int8 activations,
 * exactly like the SIMD levels, so this is also their readable specification. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/matmul_internal.h"

/* Rounds to nearest (ties to even) and clamps to ±127; NaN gives 127, never UB. */
static inline int8_t q8_round(float v) {
    v = fminf(fmaxf(v, -127.0f), 127.0f);
    return (int8_t)(int)nearbyintf(v);
}

static void quantize_x_scalar(uint32_t type, const float *x, int64_t n, uint8_t *xq) {
    int8_t *q = (int8_t *)xq;
    float *d = (float *)(void *)(xq + n);
    int32_t *ai = (int32_t *)(void *)(xq + n + 4 * (n / 32));
    float *af = (float *)(void *)ai;
    const mm_aux_kind kind = mm_aux_of(type);
    const int64_t span = mm_act_span(type);
    for (int64_t s0 = 0; s0 < n; s0 += span) {
        const int64_t len = n - s0 < span ? n - s0 : span;
        float amax = 0;
        int nan = 0;
        for (int64_t i = s0; i < s0 + len; i++) {
            amax = fmaxf(amax, fabsf(x[i]));
            nan |= x[i] != x[i];
        }
        const float db = amax / 127.0f;
        const float id = db > 0 ? 1.0f / db : 0.0f;
        const int finite = !nan && !isinf(db); /* else q = 0, so d·q is NaN */
        for (int64_t b = s0 / MM_QB; b < (s0 + len) / MM_QB; b++) {
            const float *xb = x + b * MM_QB;
            int8_t *qb = q + b * MM_QB;
            int s[2] = {0, 0};
            for (int i = 0; i < MM_QB; i++) {
                qb[i] = finite ? q8_round(xb[i] * id) : 0;
                s[i / 16] += qb[i];
            }
            d[b] = nan ? NAN : finite ? mm_act_scale(type, db) : db;
            mm_store_aux(kind, ai, af, b, d[b], s[0], s[1]);
        }
    }
}

/* ---- dot products of one weight row with one activation row ----------------------- */

static float dot_f32(const uint8_t *w, const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, w + 4 * i, 4);
        s += v * x[i];
    }
    return s;
}

static float dot_f16(const uint8_t *w, const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += fp16_to_f32(mm_rd16(w + 2 * i)) * x[i];
    return s;
}

/* the activations rounded to bf16, as at every level (and in ggml: BF16 weights'
 * vec_dot_type is BF16), so each product is exact and the SIMD levels differ from
 * this only by the order of the f32 sums */
static float dot_bf16(const uint8_t *w, const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += bf16_to_f32(mm_rd16(w + 2 * i)) * bf16_to_f32(f32_to_bf16(x[i]));
    return s;
}

static float dot_q8_0(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t b = 0; b < n / QK8_0; b++, w += sizeof(block_q8_0)) {
        const int8_t *qw = (const int8_t *)(w + offsetof(block_q8_0, qs));
        const int8_t *qx = x->q + b * QK8_0;
        int32_t acc = 0;
        for (int i = 0; i < QK8_0; i++) acc += qw[i] * qx[i];
        s += fp16_to_f32(mm_rd16(w)) * x->d[b] * (float)acc;
    }
    return s;
}

static float dot_q4_0(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t b = 0; b < n / QK4_0; b++, w += sizeof(block_q4_0)) {
        const uint8_t *qw = w + offsetof(block_q4_0, qs);
        const int8_t *qx = x->q + b * QK4_0;
        int32_t acc = 0;
        for (int i = 0; i < QK4_0 / 2; i++)
            acc += ((qw[i] & 0xf) - 8) * qx[i] + ((qw[i] >> 4) - 8) * qx[i + 16];
        s += fp16_to_f32(mm_rd16(w)) * x->d[b] * (float)acc;
    }
    return s;
}

/* Q4_K: value = d*sc_j*u - dmin*m_j per 32-block j, so the block contributes
 * d*sc_j * d_x * sum(u*q) - dmin*m_j * d_x * sum(q); the last factor is aux. */
static float dot_q4_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q4_K)) {
        const float d = fp16_to_f32(mm_rd16(w + offsetof(block_q4_K, d)));
        const float dmin = fp16_to_f32(mm_rd16(w + offsetof(block_q4_K, dmin)));
        uint8_t sm[16];
        mm_q4k_scales(w + offsetof(block_q4_K, scales), sm);
        const uint8_t *qs = w + offsetof(block_q4_K, qs);
        for (int j = 0; j < 8; j++) {
            const int64_t b = i * 8 + j;
            const int8_t *qx = x->q + b * 32;
            const uint8_t *qr = qs + 32 * (j / 2);
            const int sh = 4 * (j & 1);
            int32_t acc = 0;
            for (int l = 0; l < 32; l++) acc += ((qr[l] >> sh) & 0xf) * qx[l];
            s += d * (float)sm[j] * x->d[b] * (float)acc - dmin * (float)sm[8 + j] * x->af[b];
        }
    }
    return s;
}

/* Q6_K: value = d*sc_g*(u - 32) per 16-group g; aux[g] = -32 * sum(q). */
static float dot_q6_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q6_K)) {
        const float d = fp16_to_f32(mm_rd16(w + offsetof(block_q6_K, d)));
        const int8_t *sc = (const int8_t *)(w + offsetof(block_q6_K, scales));
        uint8_t u[QK_K];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w + offsetof(block_q6_K, ql) + 64 * h;
            const uint8_t *qh = w + offsetof(block_q6_K, qh) + 32 * h;
            uint8_t *uh = u + 128 * h;
            for (int l = 0; l < 32; l++) {
                uh[l] = (uint8_t)((ql[l] & 0xf) | ((qh[l] & 3) << 4));
                uh[l + 32] = (uint8_t)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4));
                uh[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                uh[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
        }
        for (int g = 0; g < 16; g++) {
            const int64_t gg = i * 16 + g;
            const int8_t *qx = x->q + gg * 16;
            int32_t acc = x->ai[gg];
            for (int l = 0; l < 16; l++) acc += u[16 * g + l] * qx[l];
            s += d * (float)sc[g] * x->d[gg / 2] * (float)acc;
        }
    }
    return s;
}

/* Q4_1: value = d*u + m, so the block contributes d·d_x·Σ(u·q) + m·(d_x·Σq); the
 * last factor is aux. */
static float dot_q4_1(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t b = 0; b < n / QK4_1; b++, w += sizeof(block_q4_1)) {
        const uint8_t *qw = w + offsetof(block_q4_1, qs);
        const int8_t *qx = x->q + b * 32;
        int32_t acc = 0;
        for (int i = 0; i < 16; i++) acc += (qw[i] & 0xf) * qx[i] + (qw[i] >> 4) * qx[i + 16];
        s += fp16_to_f32(mm_rd16(w)) * x->d[b] * (float)acc + fp16_to_f32(mm_rd16(w + 2)) * x->af[b];
    }
    return s;
}

/* Q5_0 / Q5_1: u = nibble | (bit j of qh) << 4. Q5_0's -16 offset is aux/8
 * (-16·Σq); Q5_1's min term as Q4_1's. */
static float dot_q5(const uint8_t *w, const mm_xrow *x, int64_t n, int with_min) {
    const size_t bb = with_min ? sizeof(block_q5_1) : sizeof(block_q5_0);
    const size_t qh_off = with_min ? offsetof(block_q5_1, qh) : offsetof(block_q5_0, qh);
    float s = 0;
    for (int64_t b = 0; b < n / 32; b++, w += bb) {
        const uint8_t *qh = w + qh_off, *qw = w + qh_off + 4;
        const uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
        const int8_t *qx = x->q + b * 32;
        int32_t acc = with_min ? 0 : x->ai[b] / 8;
        for (int i = 0; i < 16; i++) {
            acc += ((qw[i] & 0xf) | (int)((h >> i) & 1) << 4) * qx[i];
            acc += ((qw[i] >> 4) | (int)((h >> (i + 16)) & 1) << 4) * qx[i + 16];
        }
        s += fp16_to_f32(mm_rd16(w)) * x->d[b] * (float)acc;
        if (with_min) s += fp16_to_f32(mm_rd16(w + 2)) * x->af[b];
    }
    return s;
}

/* Q2_K: per 16-group g, d·sc_g·d_x·Σ(u·q) - dmin·m_g·d_x·Σq, Σq being aux[g]. */
static float dot_q2_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q2_K)) {
        const float d = fp16_to_f32(mm_rd16(w + offsetof(block_q2_K, d)));
        const float dmin = fp16_to_f32(mm_rd16(w + offsetof(block_q2_K, dmin)));
        const uint8_t *sc = w + offsetof(block_q2_K, scales), *qs = w + offsetof(block_q2_K, qs);
        for (int g = 0; g < 16; g++) {
            const int64_t gg = i * 16 + g;
            const int8_t *qx = x->q + gg * 16;
            const int nh = g / 8, j = (g % 8) / 2, l0 = 16 * (g & 1);
            int32_t acc = 0;
            for (int l = 0; l < 16; l++) acc += ((qs[32 * nh + l0 + l] >> (2 * j)) & 3) * qx[l];
            const float dx = x->d[gg / 2];
            s += d * (float)(sc[g] & 0xf) * dx * (float)acc - dmin * (float)(sc[g] >> 4) * dx * (float)x->ai[gg];
        }
    }
    return s;
}

/* Q3_K: u = 2 low bits | hmask bit << 2 (0..7); per 16-group
 * d·(sc_g - 32)·d_x·(Σ(u·q) - 4·Σq), Σq being aux[g]. */
static float dot_q3_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q3_K)) {
        const float d = fp16_to_f32(mm_rd16(w + offsetof(block_q3_K, d)));
        const uint8_t *hm = w + offsetof(block_q3_K, hmask), *qs = w + offsetof(block_q3_K, qs);
        const uint8_t *sb = w + offsetof(block_q3_K, scales);
        for (int g = 0; g < 16; g++) {
            const int64_t gg = i * 16 + g;
            const int8_t *qx = x->q + gg * 16;
            const int nh = g / 8, j = (g % 8) / 2, l0 = 16 * (g & 1);
            int32_t acc = -4 * x->ai[gg];
            for (int l = 0; l < 16; l++) {
                const int k = l0 + l;
                const int u = ((qs[32 * nh + k] >> (2 * j)) & 3) | ((hm[k] >> (4 * nh + j)) & 1) << 2;
                acc += u * qx[l];
            }
            const int lo = g < 8 ? sb[g] & 0xf : sb[g - 8] >> 4;
            const int sc = (lo | ((sb[8 + g % 4] >> (2 * (g / 4))) & 3) << 4) - 32;
            s += d * (float)sc * x->d[gg / 2] * (float)acc;
        }
    }
    return s;
}

/* Q5_K: Q4_K with u = nibble | (bit j of qh[l]) << 4. */
static float dot_q5_K(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_q5_K)) {
        const float d = fp16_to_f32(mm_rd16(w + offsetof(block_q5_K, d)));
        const float dmin = fp16_to_f32(mm_rd16(w + offsetof(block_q5_K, dmin)));
        uint8_t sm[16];
        mm_q4k_scales(w + offsetof(block_q5_K, scales), sm);
        const uint8_t *qh = w + offsetof(block_q5_K, qh), *qs = w + offsetof(block_q5_K, qs);
        for (int j = 0; j < 8; j++) {
            const int64_t b = i * 8 + j;
            const int8_t *qx = x->q + b * 32;
            const uint8_t *qr = qs + 32 * (j / 2);
            const int sh = 4 * (j & 1);
            int32_t acc = 0;
            for (int l = 0; l < 32; l++) acc += (((qr[l] >> sh) & 0xf) | ((qh[l] >> j) & 1) << 4) * qx[l];
            s += d * (float)sm[j] * x->d[b] * (float)acc - dmin * (float)sm[8 + j] * x->af[b];
        }
    }
    return s;
}

/* IQ4_NL: signed levels straight into the integer sum. */
static float dot_iq4_nl(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t b = 0; b < n / QK4_NL; b++, w += sizeof(block_iq4_nl)) {
        const uint8_t *qw = w + offsetof(block_iq4_nl, qs);
        const int8_t *qx = x->q + b * 32;
        int32_t acc = 0;
        for (int i = 0; i < 16; i++)
            acc += iq4nl_values[qw[i] & 0xf] * qx[i] + iq4nl_values[qw[i] >> 4] * qx[i + 16];
        s += fp16_to_f32(mm_rd16(w)) * x->d[b] * (float)acc;
    }
    return s;
}

/* IQ4_XS: per 32-sub-block j, d·(ls_j - 32)·d_x·Σ(level·q). */
static float dot_iq4_xs(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, w += sizeof(block_iq4_xs)) {
        const float d = fp16_to_f32(mm_rd16(w + offsetof(block_iq4_xs, d)));
        for (int j = 0; j < 8; j++) {
            const int64_t b = i * 8 + j;
            const uint8_t *qw = w + offsetof(block_iq4_xs, qs) + 16 * j;
            const int8_t *qx = x->q + b * 32;
            int32_t acc = 0;
            for (int l = 0; l < 16; l++)
                acc += iq4nl_values[qw[l] & 0xf] * qx[l] + iq4nl_values[qw[l] >> 4] * qx[l + 16];
            const int ls = iq4_xs_scale6(w, j) - 32;
            s += d * (float)ls * x->d[b] * (float)acc;
        }
    }
    return s;
}

/* MXFP4: as IQ4_NL with the doubled E2M1 values against half the E8M0 scale. */
static float dot_mxfp4(const uint8_t *w, const mm_xrow *x, int64_t n) {
    float s = 0;
    for (int64_t b = 0; b < n / QK_MXFP4; b++, w += sizeof(block_mxfp4)) {
        const uint8_t *qw = w + offsetof(block_mxfp4, qs);
        const int8_t *qx = x->q + b * 32;
        int32_t acc = 0;
        for (int i = 0; i < 16; i++)
            acc += mxfp4_values[qw[i] & 0xf] * qx[i] + mxfp4_values[qw[i] >> 4] * qx[i + 16];
        s += e8m0_half_to_f32(w[0]) * x->d[b] * (float)acc;
    }
    return s;
}

/* The i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M): each
 * superblock unpacked to integer levels lv and per-16 multipliers mul (quant.h's
 * iq_unpack), so it contributes d·d_x/div · Σ_g mul_g·Σ(lv·q) with the sum exact
 * in int32 (|lv| <= 62, mul <= 31: below 2^26 per superblock). */
static float dot_iq(uint32_t type, const uint8_t *w, const mm_xrow *x, int64_t n) {
    const size_t bb = qtype_get(type)->block_bytes;
    iq_unpacked u;
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; i++, w += bb) {
        iq_unpack(type, w, &u);
        const int8_t *qx = x->q + i * QK_K;
        int32_t acc = 0;
        for (int g = 0; g < 16; g++) {
            int32_t sg = 0;
            for (int l = 0; l < 16; l++) sg += u.lv[16 * g + l] * qx[16 * g + l];
            acc += (int32_t)u.mul[g] * sg;
        }
        s += u.d * x->d[8 * i] * (float)acc / (float)u.div;
    }
    return s;
}

static float dot_pair_scalar(const mm_args *a, const uint8_t *w, const float *x, const mm_xrow *xr) {
    const int64_t n = a->n_in;
    switch (a->type) {
    case QT_F32: return dot_f32(w, x, n);
    case QT_F16: return dot_f16(w, x, n);
    case QT_BF16: return dot_bf16(w, x, n);
    case QT_Q8_0: return dot_q8_0(w, xr, n);
    case QT_Q4_0: return dot_q4_0(w, xr, n);
    case QT_Q4_K: return dot_q4_K(w, xr, n);
    case QT_Q6_K: return dot_q6_K(w, xr, n);
    case QT_Q4_1: return dot_q4_1(w, xr, n);
    case QT_Q5_0: return dot_q5(w, xr, n, 0);
    case QT_Q5_1: return dot_q5(w, xr, n, 1);
    case QT_Q2_K: return dot_q2_K(w, xr, n);
    case QT_Q3_K: return dot_q3_K(w, xr, n);
    case QT_Q5_K: return dot_q5_K(w, xr, n);
    case QT_IQ4_NL: return dot_iq4_nl(w, xr, n);
    case QT_IQ4_XS: return dot_iq4_xs(w, xr, n);
    case QT_MXFP4: return dot_mxfp4(w, xr, n);
    case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S: case QT_IQ3_XXS: case QT_IQ3_S: case QT_IQ1_S:
    case QT_IQ1_M: return dot_iq(a->type, w, xr, n);
    default: return 0;
    }
}

static void dot_rows_scalar(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    mm_dot_rows_blocked(a, o0, o1, t0, t1, dot_pair_scalar);
}

const mm_impl mm_impl_scalar = {
    .name = "scalar",
    .quantize_x = quantize_x_scalar,
    .dot_rows = dot_rows_scalar,
};
