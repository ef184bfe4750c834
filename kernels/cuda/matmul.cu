/* matmul.cu — y[rows][n_out] = x[rows][n_in] · Wᵀ on the GPU.
 *
 *   F32 weights (small models)  a GEMV at every row count, each row's sums made
 *                               alike whatever the batch (tokens in groups of 8)
 *   up to 8 rows, any layout    a fused GEMV: one warp per output row reads the
 *                               row in 16-byte chunks (layouts.cuh), decodes and
 *                               multiplies by every activation row in F32
 *   Q8_0, Q4_0, Q4_K, Q6_K      up to 32 rows with int8 activations and integer
 *                               block sums, as the CPU backend computes them
 *                               (below): the CPU's terms, a quarter of the bytes
 *                               of activations read per weight
 *   more rows (prefill)         tensor cores: quantized weights dequantized to F16
 *                               into scratch, activations converted to F16 (scaled
 *                               so nothing overflows) or BF16, cublasGemmEx with
 *                               F32 accumulation
 * Decode is bound by reading the weights once: the GEMV's chunks keep every
 * lane's loads 16 bytes wide and aligned. Several K-quant matrices of one input
 * (matmul_multi: Q, K and V; gate and up) share one quantization of x and one
 * launch at decode, where each launch costs as much as a small matrix's reading. */
#include "kernels/cuda/layouts.cuh"

#define GEMV_WARPS 4
/* Steps of up to this many rows take the GEMV, 8 rows per pass over the weights.
 * Float-activation GEMVs stop at 8: at 16 and 64 rows they measured 3x slower
 * than the F16 tensor-core path on an H200 (the weights decoded again per pass).
 * The int8 ones (cheap decoding, dp4a) go to 32: four passes, and short prompts
 * get the CPU's arithmetic. */
#define GEMV_MAX_ROWS 8
#define GEMV_INT8_MAX_ROWS 32
/* Output rows per warp in the int8 GEMVs of 2 and more tokens: the
 * activations' loads (T times the weights' bytes through L1, a lane's 64 bytes
 * spread 64 bytes apart) are shared by this many rows, whose weights' loads are
 * in flight together. On an H200 (2026-11-29) this took an 8B-shape Q4_K_M step
 * of 16 sequences from 23.8 to 18.5 ms, while one token alone ran faster with
 * one row per warp (311 vs 291 tokens/s: more warps in flight), so a single
 * token keeps that. LLC_CUDA_GEMV_ROWS=1 takes one row everywhere (for comparison). */
#define GEMV_ROWS 4

/* blocks of GEMV_WARPS warps for n_out rows at r rows per warp */
static inline unsigned gemv_blocks(int64_t n_out, int r) {
    return (unsigned)((n_out + (int64_t)GEMV_WARPS * r - 1) / ((int64_t)GEMV_WARPS * r));
}

/* A warp's sums for one output row o and tokens t0 .. t0+TMAX-1: the lanes'
 * partial sums reduced in a fixed tree (the same at every batch size), stored. */
template <int TMAX>
__device__ __forceinline__ void store_row_sums(const float (&acc)[TMAX], int lane, int t0, int T, float *y,
                                               int64_t n_out, int64_t o) {
#pragma unroll
    for (int t = 0; t < TMAX; t++) {
        float v = acc[t];
        for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
        if (lane == 0 && t0 + t < T) y[(size_t)(t0 + t) * n_out + o] = v;
    }
}

template <uint32_t TYPE, int TMAX>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    k_gemv(const uint8_t *__restrict__ W, size_t stride, int64_t n_in, int64_t n_out, int64_t n_chunks,
           const float *__restrict__ x, int T, float *__restrict__ y) {
    typedef layout<TYPE> L;
    const int64_t o = (int64_t)blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32, t0 = blockIdx.y * TMAX; /* this block's tokens: t0 .. t0+TMAX-1 */
    if (o >= n_out) return;
    const uint8_t *row = W + (size_t)o * stride;
    x += (size_t)t0 * n_in;
    float acc[TMAX];
#pragma unroll
    for (int t = 0; t < TMAX; t++) acc[t] = 0;
#pragma unroll(TMAX <= 2 ? 2 : 1) /* two chunks' loads in flight where registers allow */
    for (int64_t c = lane; c < n_chunks; c += 32) {
        float v[L::RUNS][16];
        int64_t e0;
        L::decode(row, n_in, c, &e0, v);
#pragma unroll
        for (int t = 0; t < TMAX; t++) {
            if (t0 + t >= T) break;
            const float *xr = x + (size_t)t * n_in + e0;
            float s = 0;
#pragma unroll
            for (int r = 0; r < L::RUNS; r++)
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const float4 xv = __ldg((const float4 *)(xr + r * L::GAP + 4 * k));
                    s += v[r][4 * k] * xv.x + v[r][4 * k + 1] * xv.y + v[r][4 * k + 2] * xv.z + v[r][4 * k + 3] * xv.w;
                }
            acc[t] += s;
        }
    }
    store_row_sums<TMAX>(acc, lane, t0, T, y, n_out, o);
}

/* ---- Q8_0 and Q4_0 with int8 activations: the CPU's (and ggml's) arithmetic ----
 *
 * The activations are quantized per 32-block as the CPU backend does it (scale
 * amax/127, q = round-to-even(x/scale) in ±127, the scale kept rounded to fp16),
 * and each block contributes (d_w·d_x)·Σq_w·q_x, its integer sum exact (dp4a):
 * the same terms as kernels/cpu/matmul_scalar.c, only summed in another order.
 * Models of these types then take the references' greedy paths, where F32
 * activations sit on the other side of near-ties. */
__device__ __forceinline__ float act_scale_f16(float db) {
    const float r = __half2float(__float2half_rn(db));
    return isfinite(r) ? r : db;
}

/* one warp per 32-block of x (T rows of n_in, n_in % 32 == 0): xq int8, xd scale */
__global__ void k_quantize_q8(const float *x, int64_t n_blocks, int8_t *xq, float *xd) {
    const int64_t b = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (b >= n_blocks) return;
    const float v = x[b * 32 + lane];
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const bool nan = __any_sync(0xffffffffu, v != v);
    const float db = amax / 127.0f, id = db > 0 ? 1.0f / db : 0.0f;
    const bool finite = !nan && !isinf(db);
    xq[b * 32 + lane] = finite ? (int8_t)(int)rintf(fminf(fmaxf(v * id, -127.0f), 127.0f)) : 0;
    if (lane == 0) xd[b] = nan ? NAN : finite ? act_scale_f16(db) : db;
}

/* The 32 weights of block b of a Q8_0 / Q4_0 row as signed bytes (Q4_0: nibbles
 * 0..15, the 8 subtracted from the sums) and the block's scale. */
template <uint32_t TYPE>
__device__ __forceinline__ void i8_block(const uint8_t *__restrict__ row, int64_t n_in, int64_t b, int (&wq)[8],
                                         float &dw) {
    if (TYPE == QT_Q8_0) {
        const uint4 a = ld16(row + 32 * b), c = ld16(row + 32 * b + 16);
        wq[0] = (int)a.x, wq[1] = (int)a.y, wq[2] = (int)a.z, wq[3] = (int)a.w;
        wq[4] = (int)c.x, wq[5] = (int)c.y, wq[6] = (int)c.z, wq[7] = (int)c.w;
        dw = f16_at(row + n_in + 2 * b);
    } else {
        const uint4 q = ld16(row + 16 * b);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            wq[k] = (int)(word_of(q, k) & 0x0F0F0F0Fu);
            wq[k + 4] = (int)((word_of(q, k) >> 4) & 0x0F0F0F0Fu);
        }
        dw = f16_at(row + n_in / 2 + 2 * b);
    }
}

/* R rows per warp (rows o0 .. o0+R-1, n_rows of them real): each block of x is
 * loaded once for the R rows, and the R rows' weights are in flight together.
 * Every row's sums are made as with one row per warp: the same lanes, blocks
 * and order. */
template <uint32_t TYPE, int TMAX, int R>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    k_gemv_i8(const uint8_t *__restrict__ W, size_t stride, int64_t n_in, int64_t n_out, const int8_t *__restrict__ xq,
              const float *__restrict__ xd, int T, float *__restrict__ y) {
    const int64_t o0 = ((int64_t)blockIdx.x * GEMV_WARPS + threadIdx.x / 32) * R;
    const int lane = threadIdx.x % 32, t0 = blockIdx.y * TMAX;
    if (o0 >= n_out) return;
    const int n_rows = n_out - o0 < R ? (int)(n_out - o0) : R;
    const int64_t nb = n_in / 32;
    float acc[R][TMAX];
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int t = 0; t < TMAX; t++) acc[j][t] = 0;
    for (int64_t b = lane; b < nb; b += 32) {
        int wq[R][8];
        float dw[R];
#pragma unroll
        for (int j = 0; j < R; j++)
            if (j < n_rows) i8_block<TYPE>(W + (size_t)(o0 + j) * stride, n_in, b, wq[j], dw[j]);
#pragma unroll
        for (int t = 0; t < TMAX; t++) {
            if (t0 + t >= T) break;
            const int8_t *xr = xq + (size_t)(t0 + t) * n_in + 32 * b;
            const uint4 xa = ld16((const uint8_t *)xr), xc = ld16((const uint8_t *)xr + 16);
            const int xw[8] = {(int)xa.x, (int)xa.y, (int)xa.z, (int)xa.w, (int)xc.x, (int)xc.y, (int)xc.z, (int)xc.w};
            int xs = 0;
            if (TYPE == QT_Q4_0)
#pragma unroll
                for (int k = 0; k < 8; k++) xs = __dp4a(0x01010101, xw[k], xs);
            const float dx = __ldg(xd + (size_t)(t0 + t) * nb + b);
#pragma unroll
            for (int j = 0; j < R; j++) {
                if (j >= n_rows) break;
                int isum = 0;
#pragma unroll
                for (int k = 0; k < 8; k++) isum = __dp4a(wq[j][k], xw[k], isum);
                if (TYPE == QT_Q4_0) isum -= 8 * xs;
                /* (no fused multiply-add: the CPU's roundings) */
                acc[j][t] = __fadd_rn(acc[j][t], __fmul_rn(__fmul_rn(dw[j], dx), (float)isum));
            }
        }
    }
#pragma unroll
    for (int j = 0; j < R; j++)
        if (j < n_rows) store_row_sums<TMAX>(acc[j], lane, t0, T, y, n_out, o0 + j);
}

/* Quantizes x into scratch and runs the int8 GEMV; false when the scratch cannot grow. */
template <uint32_t TYPE>
static bool gemv_i8(cuda_ctx *c, const bk_weight *w, const float *x, int rows, float *y) {
    const int64_t nb = w->n_in / 32, n_blocks = nb * rows;
    uint8_t *s = (uint8_t *)cuda_scratch(c, (size_t)rows * w->n_in + 16 + (size_t)n_blocks * sizeof(float));
    if (!s) return false;
    int8_t *xq = (int8_t *)s;
    float *xd = (float *)(s + (((size_t)rows * w->n_in + 15) & ~(size_t)15));
    k_quantize_q8<<<(unsigned)((n_blocks * 32 + 255) / 256), 256, 0, c->stream>>>(x, n_blocks, xq, xd);
    const size_t stride = cuda_row_bytes(w->type, w->n_in);
    const uint8_t *W = (const uint8_t *)w->data;
#define I8GEMV(TM, R)                                                                                            \
    k_gemv_i8<TYPE, TM, R><<<dim3(gemv_blocks(w->n_out, R), (unsigned)((rows + 7) / 8)), 32 * GEMV_WARPS, 0, \
                             c->stream>>>(W, stride, w->n_in, w->n_out, xq, xd, rows, y)
    if (rows == 1) I8GEMV(1, 1);
    else if (c->gemv_rows == 1) I8GEMV(8, 1);
    else I8GEMV(8, GEMV_ROWS);
#undef I8GEMV
    LAUNCHED(c);
    return true;
}

/* ---- Q4_K and Q6_K with int8 activations (the CPU's Q8_K partner) ----
 * Activations share one scale per 256-superblock (amax/127, not rounded), kept
 * per 32-block with the bias terms the CPU keeps (kernels/cpu/matmul_internal.h):
 * af[b] = d·Σq over 32-block b (Q4_K's min term), ai[g] = -32·Σq over 16-group
 * g (Q6_K's offset). Each 32-block (Q4_K) or 16-group (Q6_K) contributes its
 * term of kernels/cpu/matmul_scalar.c, in the same order of roundings. */

/* one warp per 256-span; lane i takes elements 8i .. 8i+7 */
__global__ void k_quantize_q8k(const float *x, int64_t n_spans, int8_t *xq, float *xd, float *af, int *ai16) {
    const int64_t sp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (sp >= n_spans) return;
    const float4 a = *(const float4 *)(x + sp * 256 + 8 * lane), b = *(const float4 *)(x + sp * 256 + 8 * lane + 4);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    float amax = 0;
    bool nan = false;
#pragma unroll
    for (int i = 0; i < 8; i++) amax = fmaxf(amax, fabsf(v[i])), nan |= v[i] != v[i];
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    nan = __any_sync(0xffffffffu, nan);
    const float db = amax / 127.0f, id = db > 0 ? 1.0f / db : 0.0f;
    const bool finite = !nan && !isinf(db);
    int q[8], s8 = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        q[i] = finite ? (int)rintf(fminf(fmaxf(v[i] * id, -127.0f), 127.0f)) : 0;
        s8 += q[i];
    }
    uint2 packed;
    packed.x = (uint32_t)(q[0] & 0xff) | (uint32_t)(q[1] & 0xff) << 8 | (uint32_t)(q[2] & 0xff) << 16 | (uint32_t)(q[3] & 0xff) << 24;
    packed.y = (uint32_t)(q[4] & 0xff) | (uint32_t)(q[5] & 0xff) << 8 | (uint32_t)(q[6] & 0xff) << 16 | (uint32_t)(q[7] & 0xff) << 24;
    *(uint2 *)(xq + sp * 256 + 8 * lane) = packed;
    const int s16 = s8 + __shfl_xor_sync(0xffffffffu, s8, 1);   /* lanes 2g, 2g+1: 16-group g */
    const int s32 = s16 + __shfl_xor_sync(0xffffffffu, s16, 2); /* lanes 4b .. 4b+3: 32-block b */
    const float d = nan ? NAN : db;
    if (lane % 4 == 0) {
        xd[sp * 8 + lane / 4] = d;
        af[sp * 8 + lane / 4] = d * (float)s32;
    }
    if (lane % 2 == 0) ai16[sp * 16 + lane / 2] = -32 * s16;
}

/* The K-quant rows below take R output rows per warp (rows row0, row0 + stride,
 * ..., n_rows of them real): a chunk's activations are loaded once for the R
 * rows, and the R rows' weights are in flight together. Each row's sums are
 * made exactly as with one row per warp: the same lanes, chunks, terms and order. */

/* Q4_K: chunk c = 4b + r is quant run r of block b (32 bytes): its low nibbles are
 * 32-block 2r, its high nibbles 32-block 2r+1 */
template <int TMAX, int R>
__device__ __forceinline__ void q4k_rows_i8(const uint8_t *__restrict__ row0, size_t stride, int n_rows, int64_t n_in,
                                            const int8_t *__restrict__ xq, const float *__restrict__ xd,
                                            const float *__restrict__ af, int T, int t0, int lane,
                                            float (&acc)[R][TMAX]) {
    xq += (size_t)t0 * n_in;
    const int64_t n_chunks = n_in / 64, nb32 = n_in / 32;
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int t = 0; t < TMAX; t++) acc[j][t] = 0;
    for (int64_t c = lane; c < n_chunks; c += 32) {
        const int64_t b = c >> 2;
        const int r = (int)(c & 3);
        uint4 qa[R], qb[R];
        float ds0[R], dm0[R], ds1[R], dm1[R]; /* d·scale and dmin·min of the chunk's two 32-blocks */
#pragma unroll
        for (int j = 0; j < R; j++) {
            if (j >= n_rows) break;
            const uint8_t *blk = row0 + (size_t)j * stride + 144 * b;
            const uint4 hdr = ld16(blk);
            qa[j] = ld16(blk + 16 + 32 * r), qb[j] = ld16(blk + 32 + 32 * r);
            const float d = hdr_f16(hdr, 0), dmin = hdr_f16(hdr, 1);
            float s0, m0, s1, m1;
            k_scale_min(2 * r, hdr, &s0, &m0);
            k_scale_min(2 * r + 1, hdr, &s1, &m1);
            ds0[j] = __fmul_rn(d, s0), dm0[j] = __fmul_rn(dmin, m0);
            ds1[j] = __fmul_rn(d, s1), dm1[j] = __fmul_rn(dmin, m1);
        }
        const int64_t sb = 8 * b + 2 * r; /* 32-block of the low nibbles */
#pragma unroll
        for (int t = 0; t < TMAX; t++) {
            if (t0 + t >= T) break;
            const uint8_t *xr = (const uint8_t *)(xq + (size_t)t * n_in + 32 * sb);
            const uint4 x0 = ld16(xr), x1 = ld16(xr + 16), x2 = ld16(xr + 32), x3 = ld16(xr + 48);
            const float *xdt = xd + (size_t)(t0 + t) * nb32, *aft = af + (size_t)(t0 + t) * nb32;
            const float dx0 = __ldg(xdt + sb), dx1 = __ldg(xdt + sb + 1), af0 = __ldg(aft + sb), af1 = __ldg(aft + sb + 1);
#pragma unroll
            for (int j = 0; j < R; j++) {
                if (j >= n_rows) break;
                int a0 = 0, a1 = 0;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const uint32_t wa = word_of(qa[j], k), wb = word_of(qb[j], k);
                    a0 = __dp4a((int)(wa & 0x0F0F0F0Fu), (int)word_of(x0, k), a0);
                    a0 = __dp4a((int)(wb & 0x0F0F0F0Fu), (int)word_of(x1, k), a0);
                    a1 = __dp4a((int)((wa >> 4) & 0x0F0F0F0Fu), (int)word_of(x2, k), a1);
                    a1 = __dp4a((int)((wb >> 4) & 0x0F0F0F0Fu), (int)word_of(x3, k), a1);
                }
                const float term0 = __fsub_rn(__fmul_rn(__fmul_rn(ds0[j], dx0), (float)a0), __fmul_rn(dm0[j], af0));
                const float term1 = __fsub_rn(__fmul_rn(__fmul_rn(ds1[j], dx1), (float)a1), __fmul_rn(dm1[j], af1));
                acc[j][t] = __fadd_rn(__fadd_rn(acc[j][t], term0), term1);
            }
        }
    }
}

/* Q6_K (planes): chunk c = 8b + 4h + u as in layouts.cuh; its two runs of 16 are
 * the 16-groups glo and glo + 4 */
template <int TMAX, int R>
__device__ __forceinline__ void q6k_rows_i8(const uint8_t *__restrict__ row0, size_t stride, int n_rows, int64_t n_in,
                                            const int8_t *__restrict__ xq, const float *__restrict__ xd,
                                            const int *__restrict__ ai16, int T, int t0, int lane,
                                            float (&acc)[R][TMAX]) {
    xq += (size_t)t0 * n_in;
    const int64_t qh_at = n_in / 2, sc_at = qh_at + n_in / 4, d_at = sc_at + n_in / 16;
    const int64_t n_chunks = n_in / 32, nb32 = n_in / 32, ng = n_in / 16;
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int t = 0; t < TMAX; t++) acc[j][t] = 0;
    for (int64_t c = lane; c < n_chunks; c += 32) {
        const int64_t b = c >> 3;
        const int h = (int)(c >> 2) & 1, u = (int)c & 3, qa = u >> 1, g = u & 1;
        uint4 ql[R], qh[R];
        float dlo[R], dhi[R]; /* d·scale of the two 16-groups */
#pragma unroll
        for (int j = 0; j < R; j++) {
            if (j >= n_rows) break;
            const uint8_t *row = row0 + (size_t)j * stride;
            ql[j] = ld16(row + 128 * b + 64 * h + 16 * u), qh[j] = ld16(row + qh_at + 64 * b + 32 * h + 16 * g);
            const float d = f16_at(row + d_at + 2 * b);
            const uint8_t *sc = row + sc_at + 16 * b + 8 * h + g;
            dlo[j] = __fmul_rn(d, (float)(int8_t)ld8(sc + 2 * qa));
            dhi[j] = __fmul_rn(d, (float)(int8_t)ld8(sc + 2 * qa + 4));
        }
        const int64_t elo = 256 * b + 128 * h + 32 * qa + 16 * g, glo = elo / 16;
#pragma unroll
        for (int t = 0; t < TMAX; t++) {
            if (t0 + t >= T) break;
            const uint8_t *xr = (const uint8_t *)(xq + (size_t)t * n_in);
            const uint4 x0 = ld16(xr + elo), x1 = ld16(xr + elo + 64);
            const int b0 = __ldg(ai16 + (size_t)(t0 + t) * ng + glo), b1 = __ldg(ai16 + (size_t)(t0 + t) * ng + glo + 4);
            const float dx = __ldg(xd + (size_t)(t0 + t) * nb32 + elo / 32);
#pragma unroll
            for (int j = 0; j < R; j++) {
                if (j >= n_rows) break;
                int a0 = b0, a1 = b1;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const uint32_t w = word_of(ql[j], k), hw = word_of(qh[j], k);
                    const int lo = (int)((w & 0x0F0F0F0Fu) | (((hw >> (2 * qa)) & 0x03030303u) << 4));
                    const int hi = (int)(((w >> 4) & 0x0F0F0F0Fu) | (((hw >> (2 * qa + 4)) & 0x03030303u) << 4));
                    a0 = __dp4a(lo, (int)word_of(x0, k), a0);
                    a1 = __dp4a(hi, (int)word_of(x1, k), a1);
                }
                const float term0 = __fmul_rn(__fmul_rn(dlo[j], dx), (float)a0);
                const float term1 = __fmul_rn(__fmul_rn(dhi[j], dx), (float)a1);
                acc[j][t] = __fadd_rn(__fadd_rn(acc[j][t], term0), term1);
            }
        }
    }
}

/* One K-quant matrix (Q6K: Q6_K, else Q4_K), R rows per warp. */
template <bool Q6K, int TMAX, int R>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    k_gemv_k_i8(const uint8_t *__restrict__ W, size_t stride, int64_t n_in, int64_t n_out,
                const int8_t *__restrict__ xq, const float *__restrict__ xd, const float *__restrict__ af,
                const int *__restrict__ ai16, int T, float *__restrict__ y) {
    const int64_t o0 = ((int64_t)blockIdx.x * GEMV_WARPS + threadIdx.x / 32) * R;
    const int lane = threadIdx.x % 32, t0 = blockIdx.y * TMAX; /* this block's tokens */
    if (o0 >= n_out) return;
    const int n_rows = n_out - o0 < R ? (int)(n_out - o0) : R;
    float acc[R][TMAX];
    if (Q6K) q6k_rows_i8<TMAX, R>(W + (size_t)o0 * stride, stride, n_rows, n_in, xq, xd, ai16, T, t0, lane, acc);
    else q4k_rows_i8<TMAX, R>(W + (size_t)o0 * stride, stride, n_rows, n_in, xq, xd, af, T, t0, lane, acc);
#pragma unroll
    for (int j = 0; j < R; j++)
        if (j < n_rows) store_row_sums<TMAX>(acc[j], lane, t0, T, y, n_out, o0 + j);
}

/* Several K-quant matrices of one input in one launch (Q, K and V; gate and up):
 * blocks 0 .. end[0]-1 take matrix 0, end[0] .. end[1]-1 matrix 1, and so on;
 * each row's sums made exactly as the one-matrix kernel makes them. */
struct kgemv_multi {
    const uint8_t *W[BK_MATMUL_MULTI_MAX];
    float *y[BK_MATMUL_MULTI_MAX];
    size_t stride[BK_MATMUL_MULTI_MAX];
    int64_t n_out[BK_MATMUL_MULTI_MAX];
    unsigned end[BK_MATMUL_MULTI_MAX]; /* blocks of matrices 0..i */
    int q6k[BK_MATMUL_MULTI_MAX];      /* 1: Q6_K, 0: Q4_K */
    int n;
};

template <int TMAX, int R>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    k_gemv_k_multi(const kgemv_multi mm, int64_t n_in, const int8_t *__restrict__ xq, const float *__restrict__ xd,
                   const float *__restrict__ af, const int *__restrict__ ai16, int T) {
    int i = 0;
    while (i + 1 < mm.n && blockIdx.x >= mm.end[i]) i++;
    const unsigned first = i ? mm.end[i - 1] : 0;
    const int64_t o0 = ((int64_t)(blockIdx.x - first) * GEMV_WARPS + threadIdx.x / 32) * R;
    const int lane = threadIdx.x % 32, t0 = blockIdx.y * TMAX;
    const int64_t n_out = mm.n_out[i];
    if (o0 >= n_out) return;
    const int n_rows = n_out - o0 < R ? (int)(n_out - o0) : R;
    const uint8_t *row0 = mm.W[i] + (size_t)o0 * mm.stride[i];
    float acc[R][TMAX];
    if (mm.q6k[i]) q6k_rows_i8<TMAX, R>(row0, mm.stride[i], n_rows, n_in, xq, xd, ai16, T, t0, lane, acc);
    else q4k_rows_i8<TMAX, R>(row0, mm.stride[i], n_rows, n_in, xq, xd, af, T, t0, lane, acc);
#pragma unroll
    for (int j = 0; j < R; j++)
        if (j < n_rows) store_row_sums<TMAX>(acc[j], lane, t0, T, mm.y[i], n_out, o0 + j);
}

/* x (rows of n_in) quantized Q8_K-style into scratch, for the K-quant GEMVs. */
struct q8k_act {
    int8_t *xq;
    float *xd, *af;
    int *ai;
};
static bool quantize_q8k(cuda_ctx *c, const float *x, int64_t n_in, int rows, q8k_act *a) {
    const size_t n = (size_t)rows * n_in, nb32 = n / 32, ng = n / 16;
    const size_t off_d = (n + 15) & ~(size_t)15, off_af = off_d + 4 * nb32, off_ai = off_af + 4 * nb32;
    uint8_t *s = (uint8_t *)cuda_scratch(c, off_ai + 4 * ng);
    if (!s) return false;
    a->xq = (int8_t *)s;
    a->xd = (float *)(s + off_d), a->af = (float *)(s + off_af);
    a->ai = (int *)(s + off_ai);
    const int64_t n_spans = (int64_t)(n / 256);
    k_quantize_q8k<<<(unsigned)((n_spans * 32 + 255) / 256), 256, 0, c->stream>>>(x, n_spans, a->xq, a->xd, a->af, a->ai);
    LAUNCHED(c);
    return true;
}

/* Quantizes x (Q8_K-style) into scratch and runs the K-quant int8 GEMV. */
static bool gemv_k_i8(cuda_ctx *c, const bk_weight *w, const float *x, int rows, float *y) {
    q8k_act a;
    if (!quantize_q8k(c, x, w->n_in, rows, &a)) return false;
    const size_t stride = cuda_row_bytes(w->type, w->n_in);
    const uint8_t *W = (const uint8_t *)w->data;
    const bool q6k = w->type == QT_Q6_K;
#define KGEMV(Q6, TM, R)                                                                                         \
    k_gemv_k_i8<Q6, TM, R><<<dim3(gemv_blocks(w->n_out, R), (unsigned)((rows + 7) / 8)), 32 * GEMV_WARPS, 0,   \
                             c->stream>>>(W, stride, w->n_in, w->n_out, a.xq, a.xd, a.af, a.ai, rows, y)
#define KGEMV_R(Q6, TM) (c->gemv_rows == 1 ? KGEMV(Q6, TM, 1) : KGEMV(Q6, TM, GEMV_ROWS))
#define KGEMV_T(Q6) (rows == 1 ? KGEMV(Q6, 1, 1) : rows == 2 ? KGEMV_R(Q6, 2) : rows <= 4 ? KGEMV_R(Q6, 4) : KGEMV_R(Q6, 8))
    if (q6k) KGEMV_T(true);
    else KGEMV_T(false);
#undef KGEMV_T
#undef KGEMV_R
#undef KGEMV
    LAUNCHED(c);
    return true;
}

/* F32 weights, any width: lane i takes elements i, i+32, ... of the row. Rows
 * of tokens in groups of 8 (blockIdx.y), each token's sum made exactly as at
 * T = 1: a sequence's logits do not depend on what else is in the batch. */
template <int TMAX>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    k_gemv_f32(const float *__restrict__ W, int64_t n_in, int64_t n_out, const float *__restrict__ x, int T,
               float *__restrict__ y) {
    const int64_t o = (int64_t)blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32, t0 = blockIdx.y * TMAX;
    if (o >= n_out) return;
    const float *row = W + (size_t)o * n_in;
    float acc[TMAX];
#pragma unroll
    for (int t = 0; t < TMAX; t++) acc[t] = 0;
    for (int64_t i = lane; i < n_in; i += 32) {
        const float w = __ldg(row + i);
#pragma unroll
        for (int t = 0; t < TMAX; t++)
            if (t0 + t < T) acc[t] += w * __ldg(x + (size_t)(t0 + t) * n_in + i);
    }
    store_row_sums<TMAX>(acc, lane, t0, T, y, n_out, o);
}

template <uint32_t TYPE>
static void launch_gemv(cuda_ctx *c, const bk_weight *w, int64_t chunks, const float *x, int rows, float *y) {
    /* up to 8 rows in one pass over the weights; more in groups of 8, a pass each */
    const dim3 grid((unsigned)((w->n_out + GEMV_WARPS - 1) / GEMV_WARPS), (unsigned)((rows + 7) / 8));
    const size_t stride = cuda_row_bytes(w->type, w->n_in);
    const uint8_t *W = (const uint8_t *)w->data;
#define GEMV(TM) k_gemv<TYPE, TM><<<grid, 32 * GEMV_WARPS, 0, c->stream>>>(W, stride, w->n_in, w->n_out, chunks, x, rows, y)
    if (rows == 1) GEMV(1);
    else if (rows == 2) GEMV(2);
    else if (rows <= 4) GEMV(4);
    else GEMV(8);
#undef GEMV
    LAUNCHED(c);
}

/* ---- F16 copies of quantized weights (prefill and big batches) ----
 * Above 32 rows a quantized matrix is multiplied on the tensor cores as F16. Its
 * F16 form is kept after the first such call while the GPU keeps a quarter of
 * its memory (and 2 GiB) free beside it: a step of 64 sequences on an 8B model
 * otherwise dequantizes 16 GB of weights per step. The product is the same,
 * bit for bit: the same dequantization, done once. */
struct f16_copy {
    const void *weight; /* (with its shape: an expert's view may start where its stack does) */
    int64_t n_in, n_out;
    __half *f16;
};

void cuda_f16_copies_free(cuda_ctx *c) {
    if (c->n_f16) c->layout_epoch++; /* recorded steps that read a copy are stale */
    for (int i = 0; i < c->n_f16; i++) cudaFree(c->f16[i].f16);
    free(c->f16);
    c->f16 = NULL, c->n_f16 = c->cap_f16 = 0;
    c->f16_full = false;
}

/* The weight's F16 copy, made now if there is room; NULL: dequantize into scratch. */
static const __half *weight_f16(cuda_ctx *c, const bk_weight *w) {
    for (int i = 0; i < c->n_f16; i++)
        if (c->f16[i].weight == w->data && c->f16[i].n_in == w->n_in && c->f16[i].n_out == w->n_out)
            return c->f16[i].f16;
    if (c->f16_off || c->f16_full) return NULL;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(c->stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone)
        return NULL; /* (no allocation inside a recording; the step's first run made the copies) */
    const size_t bytes = (size_t)w->n_out * (size_t)w->n_in * 2;
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) return cudaGetLastError(), c->f16_full = true, nullptr;
    const size_t keep = total / 4 > ((size_t)2 << 30) ? total / 4 : ((size_t)2 << 30);
    if (free_b < bytes || free_b - bytes < keep) return c->f16_full = true, nullptr;
    if (c->n_f16 == c->cap_f16) {
        const int cap_n = c->cap_f16 ? 2 * c->cap_f16 : 64;
        struct f16_copy *grown = (struct f16_copy *)realloc(c->f16, (size_t)cap_n * sizeof *grown);
        if (!grown) return c->f16_full = true, nullptr;
        c->f16 = grown, c->cap_f16 = cap_n;
    }
    __half *h = NULL;
    if (cudaMalloc((void **)&h, bytes) != cudaSuccess) return cudaGetLastError(), c->f16_full = true, nullptr;
    cuda_dequant_f16(c, w, h);
    c->f16[c->n_f16++] = {w->data, w->n_in, w->n_out, h};
    return h;
}

/* F16 overflows above 65504, and activations of real models can get there. Before
 * a tensor-core GEMM the activations are divided by scale = max(1, max|x| / 2^14)
 * and the GEMM multiplies the result back by it (cuBLAS alpha in device memory):
 * no host round trip, no infinities, and the relative precision of F16 kept.
 * d_scale[0] holds max|x| as float bits (|x| >= 0 orders as an unsigned int;
 * NaN above everything), d_scale[1] the scale, d_scale[2] 0 for beta. */
#define F16_SAFE_MAX 16384.0f
__global__ void k_absmax(const float *x, int64_t n, unsigned *max_bits) {
    __shared__ unsigned sh[32];
    unsigned m = 0;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        m = max(m, __float_as_uint(fabsf(x[k])));
    for (int s = 16; s > 0; s >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, s));
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : 0;
        for (int s = 16; s > 0; s >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, s));
        if (threadIdx.x == 0) atomicMax(max_bits, m);
    }
}

__global__ void k_to_f16(const float *x, __half *out, int64_t n, float *scale) {
    const float m = __uint_as_float(*(const unsigned *)scale);
    const float sc = m > F16_SAFE_MAX ? m / F16_SAFE_MAX : 1.0f, inv = 1.0f / sc;
    if (blockIdx.x == 0 && threadIdx.x == 0) scale[1] = sc, scale[2] = 0.0f;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = __float2half(x[k] * inv);
}

__global__ void k_to_bf16(const float *x, __nv_bfloat16 *out, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = __float2bfloat16(x[k]);
}

void cuda_matmul(cuda_ctx *c, const bk_weight *w, const float *x, int rows, float *y) {
    if (rows <= 0 || c->failed) return;
    const int m = (int)w->n_out, n = rows, k = (int)w->n_in;
    const float one = 1.0f, zero = 0.0f;
    if (w->type == QT_F32) { /* (small models: the same sums at every row count beat cuBLAS's speed) */
        dim3 grid((unsigned)((w->n_out + GEMV_WARPS - 1) / GEMV_WARPS), (unsigned)((rows + 7) / 8));
        if (rows == 1) k_gemv_f32<1><<<grid, 32 * GEMV_WARPS, 0, c->stream>>>((const float *)w->data, w->n_in, w->n_out, x, rows, y);
        else k_gemv_f32<8><<<grid, 32 * GEMV_WARPS, 0, c->stream>>>((const float *)w->data, w->n_in, w->n_out, x, rows, y);
        LAUNCHED(c);
        return;
    }
    const int64_t chunks = layout_chunks(w->type, w->n_in);
    if (rows <= GEMV_INT8_MAX_ROWS && chunks && (uintptr_t)x % 16 == 0 && !c->float_act) {
        if (w->type == QT_Q8_0) { gemv_i8<QT_Q8_0>(c, w, x, rows, y); return; }
        if (w->type == QT_Q4_0) { gemv_i8<QT_Q4_0>(c, w, x, rows, y); return; }
        if (w->type == QT_Q4_K || w->type == QT_Q6_K) { gemv_k_i8(c, w, x, rows, y); return; }
    }
    if (rows <= GEMV_MAX_ROWS && chunks && (uintptr_t)x % 16 == 0) { /* decode: the fused GEMV */
        switch (w->type) {
#define GEMV_CASE(TY) case TY: launch_gemv<TY>(c, w, chunks, x, rows, y); return;
            LAYOUT_TYPES(GEMV_CASE)
#undef GEMV_CASE
        default: break;
        }
    }
    /* tensor cores: activations (and quantized weights) as F16/BF16 in scratch */
    const bool bf = w->type == QT_BF16, as_is = w->type == QT_F16 || bf;
    const __half *copy = as_is ? NULL : weight_f16(c, w);
    if (c->failed) return;
    const size_t wbytes = as_is || copy ? 0 : (size_t)m * k * 2, xbytes = (size_t)n * k * 2;
    uint8_t *s = (uint8_t *)cuda_scratch(c, wbytes + xbytes);
    if (!s) return;
    const void *A = copy ? (const void *)copy : w->data;
    if (wbytes) {
        cuda_dequant_f16(c, w, (__half *)s);
        A = s;
    }
    void *B = s + wbytes;
    const cudaDataType_t ty = bf ? CUDA_R_16BF : CUDA_R_16F;
    if (bf) { /* BF16 has F32's range: no scaling */
        k_to_bf16<<<grid_for((size_t)n * k, 256), 256, 0, c->stream>>>(x, (__nv_bfloat16 *)B, (int64_t)n * k);
        LAUNCHED(c);
        CB(c, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, ty, k, B, ty, k, &zero, y, CUDA_R_32F, m,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    if (!c->d_scale) CK(c, cudaMalloc((void **)&c->d_scale, 3 * sizeof(float)));
    if (c->failed) return;
    const size_t nx = (size_t)n * k;
    const unsigned gx = grid_for(nx, 256);
    CK(c, cudaMemsetAsync(c->d_scale, 0, sizeof(float), c->stream));
    k_absmax<<<gx > 1024 ? 1024 : gx, 256, 0, c->stream>>>(x, (int64_t)nx, (unsigned *)c->d_scale);
    k_to_f16<<<gx, 256, 0, c->stream>>>(x, (__half *)B, (int64_t)nx, c->d_scale);
    LAUNCHED(c);
    CB(c, cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_DEVICE));
    CB(c, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, c->d_scale + 1, A, ty, k, B, ty, k, c->d_scale + 2, y,
                       CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CB(c, cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST));
}

/* y[i] = x · w[i]ᵀ for i < n. K-quant matrices (Q4_K, Q6_K) of a decode step:
 * x quantized once and one launch for all of them; anything else one matmul each. */
void cuda_matmul_multi(cuda_ctx *c, const bk_weight *const *w, int n, const float *x, int rows, float *const *y) {
    if (rows <= 0 || c->failed) return;
    bool fused = n >= 1 && n <= BK_MATMUL_MULTI_MAX && rows <= GEMV_INT8_MAX_ROWS && (uintptr_t)x % 16 == 0 &&
                 !c->float_act && !c->no_multi;
    for (int i = 0; i < n && fused; i++)
        fused = (w[i]->type == QT_Q4_K || w[i]->type == QT_Q6_K) && w[i]->n_in == w[0]->n_in &&
                layout_chunks(w[i]->type, w[i]->n_in);
    if (!fused) {
        for (int i = 0; i < n; i++) cuda_matmul(c, w[i], x, rows, y[i]);
        return;
    }
    q8k_act a;
    if (!quantize_q8k(c, x, w[0]->n_in, rows, &a)) return;
    kgemv_multi mm = {};
    unsigned blocks = 0;
    const int R = c->gemv_rows == 1 || rows == 1 ? 1 : GEMV_ROWS;
    for (int i = 0; i < n; i++) {
        mm.W[i] = (const uint8_t *)w[i]->data;
        mm.y[i] = y[i];
        mm.stride[i] = cuda_row_bytes(w[i]->type, w[i]->n_in);
        mm.n_out[i] = w[i]->n_out;
        mm.q6k[i] = w[i]->type == QT_Q6_K;
        blocks += gemv_blocks(w[i]->n_out, R);
        mm.end[i] = blocks;
    }
    mm.n = n;
    const dim3 grid(blocks, (unsigned)((rows + 7) / 8));
#define KMULTI(TM, R) k_gemv_k_multi<TM, R><<<grid, 32 * GEMV_WARPS, 0, c->stream>>>(mm, w[0]->n_in, a.xq, a.xd, a.af, a.ai, rows)
#define KMULTI_R(TM) (R == 1 ? KMULTI(TM, 1) : KMULTI(TM, GEMV_ROWS))
    if (rows == 1) KMULTI(1, 1);
    else if (rows == 2) KMULTI_R(2);
    else if (rows <= 4) KMULTI_R(4);
    else KMULTI_R(8);
#undef KMULTI_R
#undef KMULTI
    LAUNCHED(c);
}
