/* matmul_tile_avx2.h — register-tiled Q8_0 and Q4_0 dot products for the AVX2
 * level: a tile of up to 4 weight rows × 2 activation rows is computed together,
 * so each weight block loaded serves two activation rows and each activation block
 * four weight rows, and the 8 accumulators are 8 independent FMA chains (the
 * one-pair kernel waits on one chain's latency per block).
 *
 * Every (weight row, activation row) pair gets exactly the same arithmetic whatever
 * the tile around it — one float accumulator, blocks in order, the same per-block
 * products and scale, one horizontal sum — and one row alone (decode) goes through
 * the same tiles with one activation row. So a batched row is bit-identical to the
 * row alone, which the engine's parallel samples and speculative checks rely on.
 * Included by matmul_avx2.c after matmul_dot256.h (its helpers and target pragma). */
#ifndef LLC_CPU_MATMUL_TILE_AVX2_H
#define LLC_CPU_MATMUL_TILE_AVX2_H

#define TILE_INLINE static inline __attribute__((always_inline))

/* One pair, one Q8_0 block: |w| × sign(x, w) keeps maddubs' operands unsaturated. */
TILE_INLINE __m256 tile_q8_0_pair(__m256i aw, __m256i qw, __m256i qx, float scale, __m256 acc) {
    const __m256i s = dot_u8s8(aw, _mm256_sign_epi8(qx, qw));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(scale), acc);
}

/* One pair, one Q4_0 block: nibbles u (0..15) × x, minus 8·Σx (aux/128 per lane). */
TILE_INLINE __m256 tile_q4_0_pair(__m256i u, __m256i qx, int32_t corr, float scale, __m256 acc) {
    const __m256i s = dot_u8s8_acc(_mm256_set1_epi32(corr), u, qx);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(scale), acc);
}

/* y[t][r] = row r · x[t] for a tile of RW weight rows and RX activation rows. */
TILE_INLINE void tile_q8_0(const uint8_t *const w[4], const mm_xrow x[2], int RW, int RX, int64_t nb,
                           float y[2][4]) {
    __m256 acc[4][2];
    for (int r = 0; r < RW; r++)
        for (int t = 0; t < RX; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const size_t off = (size_t)b * sizeof(block_q8_0);
        __m256i qw[4], aw[4], qx[2];
        float dw[4], dx[2];
        for (int r = 0; r < RW; r++) {
            if (!(b & 1)) _mm_prefetch((const char *)w[r] + off + MM_PF_DIST, MM_PF_HINT);
            qw[r] = _mm256_loadu_si256((const __m256i *)(w[r] + off + 2));
            aw[r] = _mm256_sign_epi8(qw[r], qw[r]);
            dw[r] = f16(w[r] + off);
        }
        for (int t = 0; t < RX; t++) {
            qx[t] = _mm256_loadu_si256((const __m256i *)(x[t].q + 32 * b));
            dx[t] = x[t].d[b];
        }
        for (int r = 0; r < RW; r++)
            for (int t = 0; t < RX; t++) acc[r][t] = tile_q8_0_pair(aw[r], qw[r], qx[t], dw[r] * dx[t], acc[r][t]);
    }
    for (int r = 0; r < RW; r++)
        for (int t = 0; t < RX; t++) y[t][r] = hsum8(acc[r][t]);
}

TILE_INLINE void tile_q4_0(const uint8_t *const w[4], const mm_xrow x[2], int RW, int RX, int64_t nb,
                           float y[2][4]) {
    __m256 acc[4][2];
    for (int r = 0; r < RW; r++)
        for (int t = 0; t < RX; t++) acc[r][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const size_t off = (size_t)b * sizeof(block_q4_0);
        __m256i u[4], qx[2];
        float dw[4], dx[2];
        int32_t corr[2];
        for (int r = 0; r < RW; r++) {
            if (!(b & 3)) _mm_prefetch((const char *)w[r] + off + MM_PF_DIST, MM_PF_HINT);
            const __m128i v = _mm_loadu_si128((const __m128i *)(w[r] + off + 2));
            u[r] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4);
            dw[r] = f16(w[r] + off);
        }
        for (int t = 0; t < RX; t++) {
            qx[t] = _mm256_loadu_si256((const __m256i *)(x[t].q + 32 * b));
            dx[t] = x[t].d[b];
            corr[t] = x[t].ai[b] / 128;
        }
        for (int r = 0; r < RW; r++)
            for (int t = 0; t < RX; t++) acc[r][t] = tile_q4_0_pair(u[r], qx[t], corr[t], dw[r] * dx[t], acc[r][t]);
    }
    for (int r = 0; r < RW; r++)
        for (int t = 0; t < RX; t++) y[t][r] = hsum8(acc[r][t]);
}

/* The tile shapes, each a separate function so the loops above unroll into
 * registers. */
#define TILE_SHAPE(TYPE, RW, RX)                                                                   \
    static void tile_##TYPE##_##RW##x##RX(const uint8_t *const w[4], const mm_xrow x[2], int64_t nb, \
                                          float y[2][4]) {                                         \
        tile_##TYPE(w, x, RW, RX, nb, y);                                                          \
    }
TILE_SHAPE(q8_0, 4, 2)
TILE_SHAPE(q8_0, 4, 1)
TILE_SHAPE(q8_0, 1, 2)
TILE_SHAPE(q8_0, 1, 1)
TILE_SHAPE(q4_0, 4, 2)
TILE_SHAPE(q4_0, 4, 1)
TILE_SHAPE(q4_0, 1, 2)
TILE_SHAPE(q4_0, 1, 1)

typedef void (*tile_fn)(const uint8_t *const w[4], const mm_xrow x[2], int64_t nb, float y[2][4]);

/* dot_rows for Q8_0 and Q4_0 through the tiles; other types as before. Output rows
 * go in blocks of 16 that stay in cache while the activation rows pass, 2 at a time. */
static void dot_rows_tile_avx2(const mm_args *a, int64_t o0, int64_t o1, int64_t t0, int64_t t1) {
    tile_fn f42, f41, f12, f11;
    if (a->type == QT_Q8_0) f42 = tile_q8_0_4x2, f41 = tile_q8_0_4x1, f12 = tile_q8_0_1x2, f11 = tile_q8_0_1x1;
    else if (a->type == QT_Q4_0) f42 = tile_q4_0_4x2, f41 = tile_q4_0_4x1, f12 = tile_q4_0_1x2, f11 = tile_q4_0_1x1;
    else {
        dot_rows_256(a, o0, o1, t0, t1);
        return;
    }
    if (o1 > o0)
        for (int l = 0; l < MM_PF_DIST; l += 64)
            _mm_prefetch((const char *)a->W + (size_t)o0 * a->w_stride + l, MM_PF_HINT);
    const int64_t nb = a->n_in / 32;
    for (int64_t ob = o0; ob < o1; ob += 16) {
        const int64_t oe = ob + 16 < o1 ? ob + 16 : o1;
        for (int64_t t = t0; t < t1; t += 2) {
            const int rx = t + 1 < t1 ? 2 : 1;
            mm_xrow x[2];
            for (int k = 0; k < rx; k++) x[k] = mm_xrow_at(a->xq + (size_t)(t + k) * a->xq_stride, a->n_in);
            for (int64_t o = ob; o < oe;) {
                const int rw = o + 4 <= oe ? 4 : 1;
                const uint8_t *w[4];
                for (int r = 0; r < rw; r++) w[r] = a->W + (size_t)(o + r) * a->w_stride;
                float y[2][4];
                (rw == 4 ? (rx == 2 ? f42 : f41) : (rx == 2 ? f12 : f11))(w, x, nb, y);
                for (int k = 0; k < rx; k++)
                    for (int r = 0; r < rw; r++) a->Y[(t + k) * a->n_out + o + r] = y[k][r];
                o += rw;
            }
        }
    }
}

#endif
