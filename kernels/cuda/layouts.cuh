/* layouts.cuh — reading a weight row on the GPU, one chunk at a time.
 *
 * A row (in the layout weights.cu gives it at upload, cuda_row_bytes apart) is
 * read in chunks: each chunk is one or two 16-byte vectors of quants (plus its
 * block's scales) and decodes to RUNS runs of 16 consecutive elements, run k
 * starting at element e0 + k * GAP. The GEMV (matmul.cu), the dequantization to
 * F16 and the embedding lookup (weights.cu) all read weights through these, so
 * a layout is written once. Values are those of kernels/quant.c's dequantize_row
 * (the same products of the same floats; the GPU may fuse a multiply-add).
 *
 *   type   layout on the GPU                         chunk     runs
 *   F16    the file's                                 32 bytes  1 x 16
 *   BF16   the file's                                 32 bytes  1 x 16
 *   Q8_0   qs[n_in] int8 | d[n_in/32] f16              16 + d    1 x 16
 *   Q4_0   qs[n_in/2] (16 per block) | d[n_in/32]      16 + d    2 x 16, GAP 16
 *   Q4_K   the file's 144-byte blocks                  16 + hdr  2 x 16, GAP 32
 *   Q5_K   the file's 176-byte blocks                  32 + hdr  2 x 16, GAP 32
 *   Q6_K   ql[n_in/2] | qh[n_in/4] | sc[n_in/16] | d   32 + sc   2 x 16, GAP 64
 */
#ifndef LLC_CUDA_LAYOUTS_CUH
#define LLC_CUDA_LAYOUTS_CUH

#include <string.h>

#include "kernels/cuda/cuda_internal.h"

/* Every decoder is __host__ __device__: tests/cuda/test_layouts.cu runs them on
 * the CPU against dequantize_row, so a layout is checked without a GPU. */
#define LAYOUT_FN __host__ __device__ __forceinline__

LAYOUT_FN float f16_at(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(__ldg((const unsigned short *)p)));
#else
    unsigned short u;
    memcpy(&u, p, 2);
    return __half2float(__ushort_as_half(u));
#endif
}

LAYOUT_FN uint4 ld16(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg((const uint4 *)p);
#else
    uint4 v;
    memcpy(&v, p, 16);
    return v;
#endif
}

LAYOUT_FN uint8_t ld8(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg(p);
#else
    return *p;
#endif
}

LAYOUT_FN float bits_to_float(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

/* the 4 words of a vector, for loops the compiler unrolls */
LAYOUT_FN uint32_t word_of(const uint4 &v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }

LAYOUT_FN void halves8(const uint4 &v, float *out) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const uint32_t u = word_of(v, k);
        out[2 * k] = __half2float(__ushort_as_half((unsigned short)(u & 0xffff)));
        out[2 * k + 1] = __half2float(__ushort_as_half((unsigned short)(u >> 16)));
    }
}

LAYOUT_FN void bf16s8(const uint4 &v, float *out) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const uint32_t u = word_of(v, k);
        out[2 * k] = bits_to_float(u << 16);
        out[2 * k + 1] = bits_to_float(u & 0xffff0000u);
    }
}

/* byte j (0..15) of a vector, j known at compile time after unrolling */
LAYOUT_FN uint32_t byte_of(const uint4 &v, int j) { return (word_of(v, j >> 2) >> (8 * (j & 3))) & 0xff; }

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j from the 12 scale bytes */
LAYOUT_FN void k_scale_min(int j, const uint8_t *q, float *sc, float *mn) {
    int s, m;
    if (j < 4) {
        s = ld8(q + j) & 63;
        m = ld8(q + j + 4) & 63;
    } else {
        s = (ld8(q + j + 4) & 0xf) | ((ld8(q + j - 4) >> 6) << 4);
        m = (ld8(q + j + 4) >> 4) | ((ld8(q + j) >> 6) << 4);
    }
    *sc = (float)s;
    *mn = (float)m;
}

template <uint32_t TYPE> struct layout;

template <> struct layout<QT_F16> {
    static constexpr int RUNS = 1, GAP = 0, ELEMS = 16;
    LAYOUT_FN static void decode(const uint8_t *row, int64_t n_in, int64_t c, int64_t *e0, float (*v)[16]) {
        const uint8_t *p = row + 32 * c;
        halves8(ld16(p), v[0]);
        halves8(ld16(p + 16), v[0] + 8);
        *e0 = 16 * c;
    }
};

template <> struct layout<QT_BF16> {
    static constexpr int RUNS = 1, GAP = 0, ELEMS = 16;
    LAYOUT_FN static void decode(const uint8_t *row, int64_t n_in, int64_t c, int64_t *e0, float (*v)[16]) {
        const uint8_t *p = row + 32 * c;
        bf16s8(ld16(p), v[0]);
        bf16s8(ld16(p + 16), v[0] + 8);
        *e0 = 16 * c;
    }
};

template <> struct layout<QT_Q8_0> {
    static constexpr int RUNS = 1, GAP = 0, ELEMS = 16;
    LAYOUT_FN static void decode(const uint8_t *row, int64_t n_in, int64_t c, int64_t *e0, float (*v)[16]) {
        const uint4 q = ld16(row + 16 * c);
        const float d = f16_at(row + n_in + 2 * (c / 2));
#pragma unroll
        for (int j = 0; j < 16; j++) v[0][j] = d * (float)(int8_t)byte_of(q, j);
        *e0 = 16 * c;
    }
};

template <> struct layout<QT_Q4_0> {
    static constexpr int RUNS = 2, GAP = 16, ELEMS = 32;
    LAYOUT_FN static void decode(const uint8_t *row, int64_t n_in, int64_t c, int64_t *e0, float (*v)[16]) {
        const uint4 q = ld16(row + 16 * c);
        const float d = f16_at(row + n_in / 2 + 2 * c);
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int b = (int)byte_of(q, j);
            v[0][j] = d * (float)((b & 0xf) - 8);
            v[1][j] = d * (float)((b >> 4) - 8);
        }
        *e0 = 32 * c;
    }
};

/* Q4_K: chunk c is bytes 16h..16h+15 of quant run r of block b (c = 8b + 2r + h):
 * low nibbles are sub-block 2r, high nibbles sub-block 2r+1 */
template <> struct layout<QT_Q4_K> {
    static constexpr int RUNS = 2, GAP = 32, ELEMS = 32;
    LAYOUT_FN static void decode(const uint8_t *row, int64_t n_in, int64_t c, int64_t *e0, float (*v)[16]) {
        const int64_t b = c >> 3;
        const int r = (int)(c >> 1) & 3, h = (int)c & 1;
        const uint8_t *blk = row + 144 * b;
        const uint4 q = ld16(blk + 16 + 32 * r + 16 * h);
        const float d = f16_at(blk), dmin = f16_at(blk + 2);
        float s0, m0, s1, m1;
        k_scale_min(2 * r, blk + 4, &s0, &m0);
        k_scale_min(2 * r + 1, blk + 4, &s1, &m1);
        const float d0 = d * s0, mm0 = dmin * m0, d1 = d * s1, mm1 = dmin * m1;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int u = (int)byte_of(q, j);
            v[0][j] = d0 * (float)(u & 0xf) - mm0;
            v[1][j] = d1 * (float)(u >> 4) - mm1;
        }
        *e0 = 256 * b + 64 * r + 16 * h;
    }
};

/* Q5_K: Q4_K's chunks plus the fifth bits: qh[l] bit j for element 32j + l */
template <> struct layout<QT_Q5_K> {
    static constexpr int RUNS = 2, GAP = 32, ELEMS = 32;
    LAYOUT_FN static void decode(const uint8_t *row, int64_t n_in, int64_t c, int64_t *e0, float (*v)[16]) {
        const int64_t b = c >> 3;
        const int r = (int)(c >> 1) & 3, h = (int)c & 1;
        const uint8_t *blk = row + 176 * b;
        const uint4 q = ld16(blk + 48 + 32 * r + 16 * h);
        const uint4 qh = ld16(blk + 16 + 16 * h);
        const float d = f16_at(blk), dmin = f16_at(blk + 2);
        float s0, m0, s1, m1;
        k_scale_min(2 * r, blk + 4, &s0, &m0);
        k_scale_min(2 * r + 1, blk + 4, &s1, &m1);
        const float d0 = d * s0, mm0 = dmin * m0, d1 = d * s1, mm1 = dmin * m1;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int u = (int)byte_of(q, j), hb = (int)byte_of(qh, j);
            v[0][j] = d0 * (float)((u & 0xf) | ((hb >> (2 * r)) & 1) << 4) - mm0;
            v[1][j] = d1 * (float)((u >> 4) | ((hb >> (2 * r + 1)) & 1) << 4) - mm1;
        }
        *e0 = 256 * b + 64 * r + 16 * h;
    }
};

/* Q6_K in planes. Chunk c = 8b + 4h + u reads ql[128b + 64h + 16u ..] and
 * qh[64b + 32h + 16(u&1) ..]: with qa = u >> 1 and l = 16(u&1) + j, the low
 * nibbles are quarter qa and the high nibbles quarter qa + 2 of half h, whose
 * element is 128h + 32*quarter + l, its two high bits qh bits 2*quarter. */
template <> struct layout<QT_Q6_K> {
    static constexpr int RUNS = 2, GAP = 64, ELEMS = 32;
    LAYOUT_FN static void decode(const uint8_t *row, int64_t n_in, int64_t c, int64_t *e0, float (*v)[16]) {
        const int64_t b = c >> 3;
        const int h = (int)(c >> 2) & 1, u = (int)c & 3, qa = u >> 1, g = u & 1;
        const uint8_t *QH = row + n_in / 2, *SC = QH + n_in / 4, *D = SC + n_in / 16;
        const uint4 ql = ld16(row + 128 * b + 64 * h + 16 * u);
        const uint4 qh = ld16(QH + 64 * b + 32 * h + 16 * g);
        const float d = f16_at(D + 2 * b);
        const int8_t *sc = (const int8_t *)(SC + 16 * b + 8 * h + g);
        const float dlo = d * (float)(int8_t)ld8((const uint8_t *)sc + 2 * qa),
                    dhi = d * (float)(int8_t)ld8((const uint8_t *)sc + 2 * (qa + 2));
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int l4 = (int)byte_of(ql, j), hb = (int)byte_of(qh, j);
            v[0][j] = dlo * (float)(((l4 & 0xf) | ((hb >> (2 * qa)) & 3) << 4) - 32);
            v[1][j] = dhi * (float)(((l4 >> 4) | ((hb >> (2 * qa + 4)) & 3) << 4) - 32);
        }
        *e0 = 256 * b + 128 * h + 32 * qa + 16 * g;
    }
};

/* X(QT_...) for every type with a layout (F32 has none: cuBLAS and a plain
 * embedding read it) */
#define LAYOUT_TYPES(X) X(QT_F16) X(QT_BF16) X(QT_Q8_0) X(QT_Q4_0) X(QT_Q4_K) X(QT_Q5_K) X(QT_Q6_K)

/* Chunks in a row of n_in, or 0 when n_in is not a whole number of them. */
static inline int64_t layout_chunks(uint32_t type, int64_t n_in) {
    switch (type) {
    case QT_F16:
    case QT_BF16: return n_in % 16 ? 0 : n_in / 16;
    case QT_Q8_0: return n_in % 32 ? 0 : n_in / 16;
    case QT_Q4_0: return n_in % 32 ? 0 : n_in / 32;
    case QT_Q4_K:
    case QT_Q5_K:
    case QT_Q6_K: return n_in % 256 ? 0 : n_in / 32;
    default: return 0;
    }
}

#endif
