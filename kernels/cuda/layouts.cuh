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

LAYOUT_FN uint8_t ld8(const uint8_t *p) { /* (Q6_K's scales) */
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

/* Small integers to float without the slow int-to-float unit: the bits
 * 0x4B000000 | u are the float 2^23 + u (u < 2^23), so subtracting 2^23 + bias
 * gives u - bias exactly. magic_byte(w, b) = 0x4B000000 | byte b of w. */
LAYOUT_FN uint32_t magic_byte(uint32_t w, int b) {
#ifdef __CUDA_ARCH__
    return __byte_perm(w, 0x4B000000u, (unsigned)b | 0x7440u);
#else
    return ((w >> (8 * b)) & 0xffu) | 0x4B000000u;
#endif
}
#define MAGIC_F 8388608.0f /* 2^23 */


/* Q4_K / Q5_K: a block's first 16 bytes (d, dmin, the 12 scale bytes) in one
 * vector; scale byte i is byte (4 + i) of it. */
LAYOUT_FN uint32_t hdr_byte(const uint4 &h, int i) {
    const int k = 4 + i;
    const uint32_t w = k < 8 ? h.y : k < 12 ? h.z : h.w; /* (k >= 4) */
    return (w >> (8 * (k & 3))) & 0xffu;
}
/* the 6-bit scale and min of sub-block j (j < 4: s[j] & 63, s[j+4] & 63; else
 * the low nibbles of s[j+4] with the top bits of s[j-4], s[j]) */
LAYOUT_FN void k_scale_min(int j, const uint4 &h, float *sc, float *mn) {
    int s, m;
    if (j < 4) {
        s = (int)hdr_byte(h, j) & 63;
        m = (int)hdr_byte(h, j + 4) & 63;
    } else {
        s = ((int)hdr_byte(h, j + 4) & 0xf) | (((int)hdr_byte(h, j - 4) >> 6) << 4);
        m = ((int)hdr_byte(h, j + 4) >> 4) | (((int)hdr_byte(h, j) >> 6) << 4);
    }
    *sc = (float)s;
    *mn = (float)m;
}
LAYOUT_FN float hdr_f16(const uint4 &h, int hi) {
    return __half2float(__ushort_as_half((unsigned short)(hi ? h.x >> 16 : h.x & 0xffff)));
}

/* Q4_K / Q5_K: value = d·sc·u - dmin·m for the two sub-blocks 2r, 2r+1 of a chunk
 * whose unsigned values (4 or 5 bits) sit one per byte in lo[k] (2r) and hi[k]
 * (2r+1) */
LAYOUT_FN void k_pair_values(const uint4 &hdr, int r, const uint32_t *lo, const uint32_t *hi, float (*v)[16]) {
    const float d = hdr_f16(hdr, 0), dmin = hdr_f16(hdr, 1);
    float s0, m0, s1, m1;
    k_scale_min(2 * r, hdr, &s0, &m0);
    k_scale_min(2 * r + 1, hdr, &s1, &m1);
    const float d0 = d * s0, mm0 = dmin * m0, d1 = d * s1, mm1 = dmin * m1;
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int bb = 0; bb < 4; bb++) {
            v[0][4 * k + bb] = d0 * (bits_to_float(magic_byte(lo[k], bb)) - MAGIC_F) - mm0;
            v[1][4 * k + bb] = d1 * (bits_to_float(magic_byte(hi[k], bb)) - MAGIC_F) - mm1;
        }
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
        for (int k = 0; k < 4; k++) {
            const uint32_t w = word_of(q, k) ^ 0x80808080u; /* int8 b -> b + 128 */
#pragma unroll
            for (int b = 0; b < 4; b++) v[0][4 * k + b] = d * (bits_to_float(magic_byte(w, b)) - (MAGIC_F + 128.0f));
        }
        *e0 = 16 * c;
    }
};

template <> struct layout<QT_Q4_0> {
    static constexpr int RUNS = 2, GAP = 16, ELEMS = 32;
    LAYOUT_FN static void decode(const uint8_t *row, int64_t n_in, int64_t c, int64_t *e0, float (*v)[16]) {
        const uint4 q = ld16(row + 16 * c);
        const float d = f16_at(row + n_in / 2 + 2 * c);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const uint32_t w = word_of(q, k), lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
            for (int b = 0; b < 4; b++) {
                v[0][4 * k + b] = d * (bits_to_float(magic_byte(lo, b)) - (MAGIC_F + 8.0f));
                v[1][4 * k + b] = d * (bits_to_float(magic_byte(hi, b)) - (MAGIC_F + 8.0f));
            }
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
        const uint4 hdr = ld16(blk), q = ld16(blk + 16 + 32 * r + 16 * h);
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int k = 0; k < 4; k++) lo[k] = word_of(q, k) & 0x0F0F0F0Fu, hi[k] = (word_of(q, k) >> 4) & 0x0F0F0F0Fu;
        k_pair_values(hdr, r, lo, hi, v);
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
        const uint4 hdr = ld16(blk), q = ld16(blk + 48 + 32 * r + 16 * h), qh = ld16(blk + 16 + 16 * h);
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int k = 0; k < 4; k++) { /* the fifth bits moved to bit 4 of each byte */
            const uint32_t w = word_of(q, k), hw = word_of(qh, k);
            lo[k] = (w & 0x0F0F0F0Fu) | (((hw >> (2 * r)) & 0x01010101u) << 4);
            hi[k] = ((w >> 4) & 0x0F0F0F0Fu) | (((hw >> (2 * r + 1)) & 0x01010101u) << 4);
        }
        k_pair_values(hdr, r, lo, hi, v);
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
        for (int k = 0; k < 4; k++) {
            const uint32_t w = word_of(ql, k), hw = word_of(qh, k);
            const uint32_t lo = (w & 0x0F0F0F0Fu) | (((hw >> (2 * qa)) & 0x03030303u) << 4);
            const uint32_t hi = ((w >> 4) & 0x0F0F0F0Fu) | (((hw >> (2 * qa + 4)) & 0x03030303u) << 4);
#pragma unroll
            for (int bb = 0; bb < 4; bb++) {
                v[0][4 * k + bb] = dlo * (bits_to_float(magic_byte(lo, bb)) - (MAGIC_F + 32.0f));
                v[1][4 * k + bb] = dhi * (bits_to_float(magic_byte(hi, bb)) - (MAGIC_F + 32.0f));
            }
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
