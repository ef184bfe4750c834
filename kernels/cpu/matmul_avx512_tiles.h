/* matmul_avx512_tiles.h — what the AVX-512 level's float-weight row loops
 * (matmul_avx512_bf16.c, matmul_avx512_f16.c) share: the weight stream's prefetch
 * (each row a whole number of tiles ahead, and the lead that starts it), the
 * activation rows' L2 blocks and the packing groups. Their kernels differ (vdpbf16ps
 * over packed bf16 activations; vcvtph2ps + f32 FMA over the f32 rows); the walk over
 * tiles is the same: a tile's weight rows stay in L1 while a block of activation rows
 * that fits L2 passes them. Include only from files compiled with an AVX-512 target
 * pragma. */
#ifndef LLC_CPU_MATMUL_AVX512_TILES_H
#define LLC_CPU_MATMUL_AVX512_TILES_H

#include <immintrin.h>

#include "kernels/cpu/matmul_internal.h"

enum {
    MM512_PF_DIST = 4096,         /* bytes ahead to prefetch the weights, at least */
    MM512_X_BLOCK_BYTES = 262144, /* activations per block of rows (in L2) */
};

/* How far ahead each weight row prefetches: the same place a whole number of
 * R-row tiles on, at least MM512_PF_DIST bytes — MM512_PF_DIST on in the row would
 * land in rows this tile reads already, leaving the next tile's rows unfetched. */
static inline size_t mm512_pf_ahead(const mm_args *a, int R) {
    const size_t tile_bytes = a->w_stride * (size_t)R;
    return tile_bytes * ((MM512_PF_DIST + tile_bytes - 1) / tile_bytes);
}

/* Start the stream for rows o0..o1-1: the kernels prefetch from a tile's rows on. */
static inline void mm512_prefetch_lead(const mm_args *a, int64_t o0, int64_t o1, int tile_w) {
    const size_t lead = a->w_stride * (size_t)tile_w > MM512_PF_DIST ? a->w_stride * (size_t)tile_w : MM512_PF_DIST;
    if (o1 > o0)
        for (size_t l = 0; l < lead && l < (size_t)(o1 - o0) * a->w_stride; l += 64)
            _mm_prefetch((const char *)a->W + (size_t)o0 * a->w_stride + l, _MM_HINT_T1);
}

/* Activation rows per L2 block of `block_bytes` (MM512_X_BLOCK_BYTES unless the
 * kernel measured better), `row_bytes` each: whole tiles of tile_x rows. */
static inline int64_t mm512_block_rows(size_t row_bytes, int tile_x, size_t block_bytes) {
    const int64_t tb = (int64_t)(block_bytes / row_bytes);
    return tb < tile_x ? tile_x : tb / tile_x * tile_x;
}

/* Packing group g of T rows, pack_rows each: rows t0..t1-1. */
static inline void mm512_group(int64_t T, int64_t g, int pack_rows, int64_t *t0, int64_t *t1) {
    *t0 = g * pack_rows;
    *t1 = *t0 + pack_rows < T ? *t0 + pack_rows : T;
}

#endif
