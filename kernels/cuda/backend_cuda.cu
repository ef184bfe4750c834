/* backend_cuda.cu — the CUDA backend: the op table of kernels/backend.h on one GPU.
 *
 * First version, written for correctness: weights are uploaded once (GGUF bytes
 * as they are); activations, KV and scratch are plain cudaMalloc'd device memory.
 * Matmul: cuBLAS SGEMM for F32 weights, GemmEx on tensor cores for F16/BF16
 * (activations converted to the weight type), a fused dequant-GEMV for quantized
 * weights at up to 8 rows (decode), and for more rows the weights dequantized to
 * F16 into scratch followed by GemmEx (prefill). Attention: one thread block per
 * (row, head) with an online softmax over the keys, read through the block table.
 * Every CUDA and cuBLAS call is checked; the first failure is kept and reported by
 * the next begin(). All work goes to one stream; to_host synchronizes.
 *
 * NOT YET RUN ON A GPU: written and compiled on a machine without one. The parity
 * tests (tests/cuda/test_cuda_parity.c, `make test-cuda`) check every op and whole
 * models against the CPU backend. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define _Noreturn [[noreturn]]
extern "C" {
#include "kernels/quant.h"
#include "kernels/backend.h"
#include "kernels/fault.h"
#include "kernels/cuda/backend_cuda.h"
}

/* A device int array and its capacity. */
struct dints {
    int *p;
    size_t cap;
};

struct cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    bool failed;
    char err[320];
    /* the step's batch, on the device */
    int T, n_seqs, max_blocks, n_out, max_kv;
    dints tokens, pos, seq_start, kv_len, table, slots, out_rows, row_seq;
    int *h_row_seq;
    /* scratch: converted activations and dequantized weights */
    void *scratch;
    size_t cap_scratch;
    float *d_freq;        /* rope frequency factors, uploaded on first use */
    const float *h_freq;
    int n_freq;
    dints copy;           /* copy_blocks src/dst */
    float *d_scale;       /* [2]: the F16 activation scale of the last GEMM, and 0 (k_f16_scale) */
    void **weights;       /* every weight_load allocation, freed by destroy */
    int n_weights, cap_weights;
    dints rows, mix;      /* gather/scatter rows and their mixing weights (floats as their bits) */
};

static void ctx_fail(cuda_ctx *c, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

#define CK(ctx, call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) ctx_fail((ctx), "CUDA: %s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)
#define CB(ctx, call)                                                                  \
    do {                                                                               \
        cublasStatus_t s_ = (call);                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) ctx_fail((ctx), "cuBLAS: %s: status %d", #call, (int)s_); \
    } while (0)
#define LAUNCHED(ctx) CK(ctx, cudaGetLastError())

static unsigned grid_for(size_t n, unsigned threads) {
    size_t g = (n + threads - 1) / threads;
    return (unsigned)(g > 65535u * 32u ? 65535u * 32u : (g ? g : 1));
}

/* ---- dequantization on the device: element i of a weight row -------------------- */

__device__ __forceinline__ float ld_f16(const uint8_t *p) {
    __half h;
    memcpy(&h, p, 2);
    return __half2float(h);
}
__device__ __forceinline__ float ld_bf16(const uint8_t *p) {
    uint16_t u = (uint16_t)(p[0] | (p[1] << 8));
    return __uint_as_float((uint32_t)u << 16);
}

__device__ __forceinline__ void q4k_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Element i of a row of `type` starting at row (the same values as dequantize_row). */
__device__ float dq_elem(const uint8_t *row, uint32_t type, int64_t i) {
    switch (type) {
    case QT_F32: {
        float f;
        memcpy(&f, row + 4 * i, 4);
        return f;
    }
    case QT_F16: return ld_f16(row + 2 * i);
    case QT_BF16: return ld_bf16(row + 2 * i);
    case QT_Q8_0: {
        const uint8_t *b = row + (i / 32) * 34;
        return ld_f16(b) * (float)(int8_t)b[2 + i % 32];
    }
    case QT_Q4_0: {
        const uint8_t *b = row + (i / 32) * 18;
        int j = (int)(i % 32);
        int q = j < 16 ? (b[2 + j] & 0xf) : (b[2 + j - 16] >> 4);
        return ld_f16(b) * (float)(q - 8);
    }
    case QT_Q4_K: {
        const uint8_t *b = row + (i / 256) * 144;
        int k = (int)(i % 256), r = k / 64, hi = (k % 64) >= 32, l = k % 32;
        int sc, mn;
        q4k_scale_min(2 * r + hi, b + 4, &sc, &mn);
        uint8_t q = b[16 + 32 * r + l];
        int v = hi ? q >> 4 : q & 0xf;
        return ld_f16(b) * (float)sc * (float)v - ld_f16(b + 2) * (float)mn;
    }
    case QT_Q6_K: {
        const uint8_t *b = row + (i / 256) * 210;
        int k = (int)(i % 256), h = k / 128, m = k % 128, quarter = m / 32, l = m % 32;
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
        int lo = quarter & 1 ? ql[l + 32] : ql[l];
        lo = quarter >= 2 ? lo >> 4 : lo & 0xf;
        int q = (lo | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
        return ld_f16(b + 208) * (float)sc[l / 16 + 2 * quarter] * (float)q;
    }
    default: return 0.0f;
    }
}

/* ---- kernels ---------------------------------------------------------------------- */

__global__ void k_embed(const uint8_t *table, uint32_t type, size_t row_bytes, int64_t dim,
                        const int *tokens, int T, float *x) {
    int t = blockIdx.y;
    if (t >= T) return;
    const uint8_t *row = table + (size_t)tokens[t] * row_bytes;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < dim; i += (int64_t)gridDim.x * blockDim.x)
        x[(size_t)t * dim + i] = dq_elem(row, type, i);
}

__device__ float block_sum(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float s = 0;
    if (threadIdx.x < 32) {
        s = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : 0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) sh[0] = s;
    }
    __syncthreads();
    s = sh[0];
    __syncthreads();
    return s;
}

__global__ void k_rmsnorm(const float *x, const float *w, float *out, int dim, float eps) {
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *o = out + (size_t)blockIdx.x * dim;
    float ss = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, sh);
    float scale = rsqrtf(ss / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = xr[i] * scale * w[i];
}

/* y[t][o] for t < T (<= 8), one warp per output row: fused dequant + dot. */
template <int TMAX>
__global__ void k_gemv_q(const uint8_t *W, uint32_t type, size_t row_bytes, int64_t n_in, int64_t n_out,
                         const float *x, int T, float *y) {
    int64_t o = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (o >= n_out) return;
    const uint8_t *row = W + (size_t)o * row_bytes;
    float acc[TMAX];
#pragma unroll
    for (int t = 0; t < TMAX; t++) acc[t] = 0;
    for (int64_t i = lane; i < n_in; i += 32) {
        float w = dq_elem(row, type, i);
#pragma unroll
        for (int t = 0; t < TMAX; t++)
            if (t < T) acc[t] += w * x[(size_t)t * n_in + i];
    }
#pragma unroll
    for (int t = 0; t < TMAX; t++) {
        float v = acc[t];
        for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
        if (lane == 0 && t < T) y[(size_t)t * n_out + o] = v;
    }
}

__global__ void k_dequant_f16(const uint8_t *W, uint32_t type, size_t row_bytes, int64_t n_in, int64_t n,
                              __half *out) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = __float2half(dq_elem(W + (size_t)(k / n_in) * row_bytes, type, k % n_in));
}

/* F16 overflows above 65504, and activations of real models can get there. Before
 * a tensor-core GEMM the activations are divided by scale[0] = max(1, max|x| / 2^14)
 * (one block computes it on the device), and the GEMM multiplies the result back by
 * it (cuBLAS alpha in device memory): no host round trip, no infinities, and the
 * relative precision of F16 kept. scale[1] holds 0 for beta. */
#define F16_SAFE_MAX 16384.0f
__global__ void k_f16_scale(const float *x, int64_t n, float *scale) {
    __shared__ float sh[32];
    float m = 0;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m = fmaxf(m, fabsf(x[k]));
    for (int s = 16; s > 0; s >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, s));
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : 0;
        for (int s = 16; s > 0; s >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, s));
        if (threadIdx.x == 0) {
            scale[0] = m > F16_SAFE_MAX ? m / F16_SAFE_MAX : 1.0f; /* (NaN stays NaN) */
            scale[1] = 0.0f;
        }
    }
}

__global__ void k_to_f16(const float *x, __half *out, int64_t n, const float *scale) {
    const float inv = 1.0f / scale[0];
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = __float2half(x[k] * inv);
}

__global__ void k_to_bf16(const float *x, __nv_bfloat16 *out, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = __float2bfloat16(x[k]);
}

__global__ void k_add_bias(float *y, const float *b, int64_t width, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        y[k] += b[k % width];
}

__global__ void k_rope(float *x, const int *pos, int T, int n_heads, int head_dim, int n_rot, int neox,
                       float freq_base, float freq_scale, const float *factors) {
    int half = n_rot / 2;
    int64_t n = (int64_t)T * n_heads * half;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        int i = (int)(k % half);
        int64_t rh = k / half;
        int r = (int)(rh / n_heads);
        float theta = (float)pos[r] * freq_scale * powf(freq_base, -2.0f * (float)i / (float)n_rot);
        if (factors) theta /= factors[i];
        float c, s;
        sincosf(theta, &s, &c);
        float *v = x + rh * head_dim;
        int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

/* ---- the KV cache: rows of f32, f16 or q8_0 (bk_attn.kv_type) ---- */

/* Element e of a cache row of type KT */
template <int KT> __device__ __forceinline__ float kv_elem(const uint8_t *row, int e) {
    if (KT == QT_F16) return __half2float(((const __half *)row)[e]);
    if (KT == QT_Q8_0) {
        const uint8_t *b = row + (size_t)(e / 32) * 34;
        return ld_f16(b) * (float)(int8_t)b[2 + e % 32];
    }
    return ((const float *)row)[e];
}

/* f32 and f16: one element per thread */
__global__ void k_kv_store_elem(uint8_t *kc, uint8_t *vc, const float *k, const float *v, const int *slots, int T,
                                int kv_dim, int f16) {
    int64_t n = (int64_t)T * kv_dim;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int r = (int)(e / kv_dim), i = (int)(e % kv_dim);
        size_t dst = (size_t)slots[r] * kv_dim + i;
        if (f16) {
            ((__half *)kc)[dst] = __float2half_rn(k[e]);
            ((__half *)vc)[dst] = __float2half_rn(v[e]);
        } else {
            ((float *)kc)[dst] = k[e];
            ((float *)vc)[dst] = v[e];
        }
    }
}

/* One Q8_0 block of 32 from x into b, as quantize_row: the scale absmax/127 stored
 * as fp16 rounded away from zero, q = round(x / scale) */
__device__ void q8_0_block(const float *x, uint8_t *b) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float want = amax / 127.0f;
    __half h = __float2half_rn(want);
    unsigned short bits;
    memcpy(&bits, &h, 2);
    if (fabsf(__half2float(h)) < want && (bits & 0x7fffu) < 0x7c00u) {
        bits++;
        memcpy(&h, &bits, 2);
    }
    memcpy(b, &bits, 2);
    const float d = __half2float(h), id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)nearbyintf(fminf(fmaxf(x[j] * id, -127.0f), 127.0f));
}

/* Q8_0: one block of 32 per thread */
__global__ void k_kv_store_q8_0(uint8_t *kc, uint8_t *vc, const float *k, const float *v, const int *slots, int T,
                                int kv_dim) {
    const int nb = kv_dim / 32;
    const size_t row_bytes = (size_t)nb * 34;
    int64_t n = (int64_t)T * nb;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int r = (int)(e / nb), blk = (int)(e % nb);
        size_t dst = (size_t)slots[r] * row_bytes + (size_t)blk * 34;
        q8_0_block(k + (size_t)r * kv_dim + (size_t)blk * 32, kc + dst);
        q8_0_block(v + (size_t)r * kv_dim + (size_t)blk * 32, vc + dst);
    }
}

/* One block per (row, head): scores for a tile of keys per pass, online softmax,
 * each thread owning output dimensions d = tid, tid + blockDim ... */
#define ATT_THREADS 128
template <int KT>
__global__ void k_attention(const float *q, const uint8_t *kc, const uint8_t *vc, size_t row_bytes, float *out, const int *pos,
                            const int *row_seq, const int *kv_len, const int *table, int max_blocks,
                            int n_heads, int n_kv_heads, int head_dim, int block_size, float scale,
                            int window, float softcap) {
    extern __shared__ float sm[]; /* q [head_dim] | scores [ATT_THREADS] */
    float *qs = sm, *sc = sm + head_dim;
    __shared__ float red[32];
    int r = blockIdx.x, h = blockIdx.y;
    int s = row_seq[r];
    int n_end = pos[r] + 1 < kv_len[s] ? pos[r] + 1 : kv_len[s];
    int lo = window > 0 && pos[r] - window + 1 > 0 ? pos[r] - window + 1 : 0; /* sliding window */
    int n_kv = n_end > lo ? n_end - lo : 0; /* keys lo .. n_end-1, as t = lo + index */
    int e0 = h / (n_heads / n_kv_heads) * head_dim; /* the head's first element in a row */
    const int *blocks = table + (size_t)s * max_blocks;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = q[((size_t)r * n_heads + h) * head_dim + d];
    __syncthreads();
    float m = -INFINITY, l = 0;
    float acc[4] = {0, 0, 0, 0}; /* head_dim <= 4 * ATT_THREADS */
    for (int t0 = 0; t0 < n_kv; t0 += blockDim.x) {
        int t = t0 + threadIdx.x;
        float score = -INFINITY;
        if (t < n_kv) {
            int key = lo + t;
            size_t slot = (size_t)blocks[key / block_size] * block_size + key % block_size;
            const uint8_t *k = kc + slot * row_bytes;
            float dot = 0;
            for (int d = 0; d < head_dim; d++) dot += qs[d] * kv_elem<KT>(k, e0 + d);
            score = dot * scale;
            if (softcap > 0) score = softcap * tanhf(score / softcap);
        }
        /* tile max */
        float tm = score;
        for (int o = 16; o > 0; o >>= 1) tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
        if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = tm;
        __syncthreads();
        if (threadIdx.x == 0) {
            float mm = red[0];
            for (int w = 1; w < (int)blockDim.x / 32; w++) mm = fmaxf(mm, red[w]);
            red[0] = mm;
        }
        __syncthreads();
        float new_m = fmaxf(m, red[0]);
        __syncthreads();
        float p = t < n_kv ? __expf(score - new_m) : 0;
        sc[threadIdx.x] = p;
        float corr = __expf(m - new_m);
        __syncthreads();
        float tile_sum = 0;
        int n_tile = n_kv - t0 < (int)blockDim.x ? n_kv - t0 : (int)blockDim.x;
        for (int j = 0; j < n_tile; j++) tile_sum += sc[j];
        l = l * corr + tile_sum;
#pragma unroll
        for (int a = 0; a < 4; a++) {
            int d = threadIdx.x + a * blockDim.x;
            if (d >= head_dim) continue;
            float v = acc[a] * corr;
            for (int j = 0; j < n_tile; j++) {
                int tt = lo + t0 + j;
                size_t slot = (size_t)blocks[tt / block_size] * block_size + tt % block_size;
                v += sc[j] * kv_elem<KT>(vc + slot * row_bytes, e0 + d);
            }
            acc[a] = v;
        }
        m = new_m;
        __syncthreads();
    }
    float inv = l > 0 ? 1.0f / l : 0;
#pragma unroll
    for (int a = 0; a < 4; a++) {
        int d = threadIdx.x + a * blockDim.x;
        if (d < head_dim) out[((size_t)r * n_heads + h) * head_dim + d] = acc[a] * inv;
    }
}

__global__ void k_silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        float x = g[k];
        g[k] = x / (1.0f + __expf(-x)) * u[k];
    }
}

__global__ void k_add(float *x, const float *y, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        x[k] += y[k];
}

/* block_bytes / W words of W bytes (W = 4, or 1 for a block size that is not whole words) */
template <typename W>
__global__ void k_copy_blocks(W *cache, const int *src, const int *dst, int n, size_t block_words) {
    int i = blockIdx.y;
    if (i >= n) return;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < block_words; k += (size_t)gridDim.x * blockDim.x)
        cache[(size_t)dst[i] * block_words + k] = cache[(size_t)src[i] * block_words + k];
}

__global__ void k_gather(const float *x, int dim, const int *rows, int n_out, float *out) {
    int64_t n = (int64_t)n_out * dim;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = x[(size_t)rows[k / dim] * dim + k % dim];
}

__global__ void k_scale(float *x, float sc, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        x[k] *= sc;
}

/* gelu in the tanh form, written as x / (1 + e^(-2u)) like the CPU's */
__global__ void k_gelu_mul(float *g, const float *u, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        float x = g[k];
        g[k] = x / (1.0f + expf(-1.5957691216057308f * x * (1.0f + 0.044715f * x * x))) * u[k];
    }
}

__global__ void k_gather_rows(const float *x, int dim, const int *rows, int n, float *out) {
    int64_t total = (int64_t)n * dim;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = x[(size_t)rows[k / dim] * dim + k % dim];
}

/* rows are distinct within a call, so no two threads write one element */
__global__ void k_scatter_add_rows(float *x, int dim, const int *rows, const float *w, int n, const float *y) {
    int64_t total = (int64_t)n * dim;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x)
        x[(size_t)rows[k / dim] * dim + k % dim] += w[k / dim] * y[k];
}

/* ---- the op table ----------------------------------------------------------------- */

static cuda_ctx *C(void *p) { return (cuda_ctx *)p; }
/* What an op returns: the backend's first failure (kept until begin reports it
 * again), or 0. Work is asynchronous: a kernel's own fault shows at a later sync. */
static int cu_status(void *p) { return C(p)->failed ? LLC_ERR_IO : 0; }

static void cu_destroy(void *p) {
    cuda_ctx *c = C(p);
    if (!c) return;
    dints *all[] = {&c->tokens, &c->pos, &c->seq_start, &c->kv_len, &c->table, &c->slots, &c->out_rows,
                    &c->row_seq, &c->copy, &c->rows, &c->mix};
    for (dints *d : all) cudaFree(d->p);
    cudaFree(c->scratch), cudaFree(c->d_freq), cudaFree(c->d_scale);
    for (int i = 0; i < c->n_weights; i++) cudaFree(c->weights[i]);
    free(c->weights);
    free(c->h_row_seq);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

static int cu_weight_load(void *p, const bk_tensor *t, bk_weight *out, llc_err *err) {
    cuda_ctx *c = C(p);
    const qtype_info *qi = qtype_get(t->type);
    if (!qi || !qi->supported ||
        (t->type != QT_F32 && t->type != QT_F16 && t->type != QT_BF16 && t->type != QT_Q8_0 &&
         t->type != QT_Q4_0 && t->type != QT_Q4_K && t->type != QT_Q6_K))
        return llc_fail(err, LLC_ERR_UNSUPPORTED, "tensor '%s' has type %s, which the CUDA backend does not support",
                        t->name, qtype_name(t->type));
    void *d = NULL;
    cudaError_t e = cudaMalloc(&d, t->n_bytes ? t->n_bytes : 1);
    if (e != cudaSuccess) {
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        return llc_fail(err, LLC_ERR_NOMEM, "the model does not fit on the GPU: tensor '%s' needs %.1f MB, %.1f MB free of %.1f MB",
                        t->name, t->n_bytes / 1e6, free_b / 1e6, total / 1e6);
    }
    e = cudaMemcpy(d, t->data, t->n_bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(d);
        return llc_fail(err, LLC_ERR_IO, "uploading '%s': %s", t->name, cudaGetErrorString(e));
    }
    if (c->n_weights == c->cap_weights) {
        int cap = c->cap_weights ? 2 * c->cap_weights : 64;
        void **w = (void **)realloc(c->weights, (size_t)cap * sizeof *w);
        if (!w) {
            cudaFree(d);
            return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        }
        c->weights = w;
        c->cap_weights = cap;
    }
    c->weights[c->n_weights++] = d;
    out->type = t->type;
    out->n_in = t->n_in;
    out->n_out = t->n_out;
    out->data = d;
    return 0;
}

static void *cu_alloc(void *p, size_t bytes) {
    void *d = NULL;
    if (llc_fault_alloc_fails()) return NULL; /* tests: out of memory here */
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: the caller reports the size */
        return NULL;
    }
    return d;
}
static void cu_free(void *p, void *d) { cudaFree(d); }
static int cu_to_host(void *p, void *dst, const void *src, size_t bytes) {
    cuda_ctx *c = C(p);
    CK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CK(c, cudaStreamSynchronize(c->stream));
    return cu_status(p);
}
static int cu_memset0(void *p, void *d, size_t bytes) {
    cuda_ctx *c = C(p);
    CK(c, cudaMemsetAsync(d, 0, bytes, c->stream));
    return cu_status(p);
}

/* Grows a device int array to n entries. */
static bool ensure_ints(cuda_ctx *c, dints *d, size_t n) {
    if (n <= d->cap && d->p) return true;
    cudaFree(d->p);
    d->p = NULL;
    d->cap = 0;
    size_t m = n < 64 ? 64 : n * 2;
    if (cudaMalloc((void **)&d->p, m * sizeof(int)) != cudaSuccess) {
        ctx_fail(c, "CUDA: out of device memory for the batch");
        return false;
    }
    d->cap = m;
    return true;
}

/* Copies n host ints into d (grown as needed). */
static void upload_ints(cuda_ctx *c, dints *d, const int32_t *src, size_t n) {
    if (!ensure_ints(c, d, n ? n : 1) || !n) return;
    CK(c, cudaMemcpy(d->p, src, n * sizeof(int), cudaMemcpyHostToDevice));
}

static void *ensure_scratch(cuda_ctx *c, size_t bytes) {
    if (bytes <= c->cap_scratch) return c->scratch;
    cudaFree(c->scratch);
    c->scratch = NULL;
    c->cap_scratch = 0;
    if (cudaMalloc(&c->scratch, bytes) != cudaSuccess) {
        ctx_fail(c, "CUDA: out of device memory for %.1f MB of scratch", bytes / 1e6);
        return NULL;
    }
    c->cap_scratch = bytes;
    return c->scratch;
}

static int cu_begin(void *p, const bk_batch *b, llc_err *err) {
    cuda_ctx *c = C(p);
    if (c->failed) return llc_fail(err, LLC_ERR_IO, "%s", c->err); /* a previous step failed */
    if (b->n_seqs < 0 || b->seq_start[0] != 0 || b->seq_start[b->n_seqs] != b->n_tokens)
        return llc_fail(err, LLC_ERR_RANGE, "malformed batch: rows do not add up");
    int max_kv = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        if (b->seq_start[s] > b->seq_start[s + 1] || b->kv_len[s] < 0)
            return llc_fail(err, LLC_ERR_RANGE, "malformed batch: sequence %d", s);
        if (b->kv_len[s] > max_kv) max_kv = b->kv_len[s];
    }
    size_t T = (size_t)b->n_tokens, S = (size_t)b->n_seqs, tab = S * (size_t)b->max_blocks;
    int *rs = (int *)realloc(c->h_row_seq, (T ? T : 1) * sizeof(int));
    if (!rs) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    c->h_row_seq = rs;
    for (int s = 0; s < b->n_seqs; s++)
        for (int r = b->seq_start[s]; r < b->seq_start[s + 1]; r++) rs[r] = s;
    upload_ints(c, &c->tokens, b->tokens, T);
    upload_ints(c, &c->pos, b->positions, T);
    upload_ints(c, &c->slots, b->slots, T);
    upload_ints(c, &c->row_seq, rs, T);
    upload_ints(c, &c->seq_start, b->seq_start, S + 1);
    upload_ints(c, &c->kv_len, b->kv_len, S);
    upload_ints(c, &c->table, b->block_table, tab);
    upload_ints(c, &c->out_rows, b->out_rows, (size_t)b->n_out);
    c->T = b->n_tokens, c->n_seqs = b->n_seqs, c->max_blocks = b->max_blocks, c->n_out = b->n_out;
    c->max_kv = max_kv;
    if (c->failed) return llc_fail(err, LLC_ERR_IO, "%s", c->err);
    return 0;
}

static int cu_embed(void *p, const bk_weight *table, float *x) {
    cuda_ctx *c = C(p);
    if (!c->T) return cu_status(p);
    dim3 grid((unsigned)((table->n_in + 255) / 256), (unsigned)c->T);
    k_embed<<<grid, 256, 0, c->stream>>>((const uint8_t *)table->data, table->type,
                                         qtype_row_bytes(table->type, table->n_in), table->n_in, c->tokens.p, c->T, x);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_rmsnorm(void *p, const float *x, const bk_weight *w, float *out, int rows, int dim, float eps) {
    cuda_ctx *c = C(p);
    if (rows <= 0) return cu_status(p);
    k_rmsnorm<<<rows, 256, 0, c->stream>>>(x, (const float *)w->data, out, dim, eps);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_matmul(void *p, const bk_weight *w, const float *x, int rows, float *y) {
    cuda_ctx *c = C(p);
    if (rows <= 0 || c->failed) return cu_status(p);
    const int m = (int)w->n_out, n = rows, k = (int)w->n_in;
    const float one = 1.0f, zero = 0.0f;
    CB(c, cublasSetStream(c->blas, c->stream));
    if (w->type == QT_F32) { /* Yᵀ[n_out × rows] = W[n_out × n_in] · Xᵀ, all column-major views */
        CB(c, cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, (const float *)w->data, k, x, k,
                          &zero, y, m));
        return cu_status(p);
    }
    size_t row_bytes = qtype_row_bytes(w->type, w->n_in);
    if (w->type != QT_F16 && w->type != QT_BF16 && rows <= 8) { /* decode: fused dequant-GEMV */
        const int warps = 4;
        unsigned grid = (unsigned)((w->n_out + warps - 1) / warps);
        k_gemv_q<8><<<grid, 32 * warps, 0, c->stream>>>((const uint8_t *)w->data, w->type, row_bytes, w->n_in,
                                                        w->n_out, x, rows, y);
        LAUNCHED(c);
        return cu_status(p);
    }
    /* tensor cores: activations (and quantized weights) as F16/BF16 in scratch */
    bool bf = w->type == QT_BF16;
    size_t wbytes = w->type == QT_F16 || bf ? 0 : (size_t)m * k * 2, xbytes = (size_t)n * k * 2;
    uint8_t *s = (uint8_t *)ensure_scratch(c, wbytes + xbytes);
    if (!s) return cu_status(p);
    const void *A = w->data;
    if (wbytes) {
        k_dequant_f16<<<grid_for((size_t)m * k, 256), 256, 0, c->stream>>>((const uint8_t *)w->data, w->type, row_bytes,
                                                                           w->n_in, (int64_t)m * k, (__half *)s);
        LAUNCHED(c);
        A = s;
    }
    void *B = s + wbytes;
    cudaDataType_t ty = bf ? CUDA_R_16BF : CUDA_R_16F;
    if (bf) { /* BF16 has F32's range: no scaling */
        k_to_bf16<<<grid_for((size_t)n * k, 256), 256, 0, c->stream>>>(x, (__nv_bfloat16 *)B, (int64_t)n * k);
        LAUNCHED(c);
        CB(c, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, ty, k, B, ty, k, &zero, y, CUDA_R_32F,
                           m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return cu_status(p);
    }
    if (!c->d_scale) CK(c, cudaMalloc((void **)&c->d_scale, 2 * sizeof(float)));
    if (c->failed) return cu_status(p);
    k_f16_scale<<<1, 1024, 0, c->stream>>>(x, (int64_t)n * k, c->d_scale);
    k_to_f16<<<grid_for((size_t)n * k, 256), 256, 0, c->stream>>>(x, (__half *)B, (int64_t)n * k, c->d_scale);
    LAUNCHED(c);
    CB(c, cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_DEVICE));
    CB(c, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, c->d_scale, A, ty, k, B, ty, k, c->d_scale + 1, y,
                       CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CB(c, cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST));
    return cu_status(p);
}

static int cu_add_bias(void *p, float *y, const bk_weight *b, int rows) {
    cuda_ctx *c = C(p);
    int64_t n = (int64_t)rows * b->n_in;
    if (n <= 0) return cu_status(p);
    k_add_bias<<<grid_for((size_t)n, 256), 256, 0, c->stream>>>(y, (const float *)b->data, b->n_in, n);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_rope(void *p, float *x, int n_heads, int head_dim, const bk_rope *rp) {
    cuda_ctx *c = C(p);
    if (!c->T) return cu_status(p);
    const float *factors = NULL;
    if (rp->freq_factors) {
        if (c->h_freq != rp->freq_factors || c->n_freq != rp->n_rot / 2) {
            cudaFree(c->d_freq);
            c->d_freq = NULL;
            CK(c, cudaMalloc((void **)&c->d_freq, (size_t)(rp->n_rot / 2) * sizeof(float)));
            if (c->d_freq)
                CK(c, cudaMemcpy(c->d_freq, rp->freq_factors, (size_t)(rp->n_rot / 2) * sizeof(float), cudaMemcpyHostToDevice));
            c->h_freq = rp->freq_factors;
            c->n_freq = rp->n_rot / 2;
        }
        factors = c->d_freq;
    }
    int64_t n = (int64_t)c->T * n_heads * (rp->n_rot / 2);
    k_rope<<<grid_for((size_t)n, 256), 256, 0, c->stream>>>(x, c->pos.p, c->T, n_heads, head_dim, rp->n_rot,
                                                            rp->style == BK_ROPE_NEOX, rp->freq_base, rp->freq_scale, factors);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_kv_store(void *p, void *kc, void *vc, const float *k, const float *v, int kv_dim, uint32_t kv_type) {
    cuda_ctx *c = C(p);
    if (!c->T) return cu_status(p);
    if (kv_type == QT_Q8_0) {
        if (kv_dim % 32) {
            ctx_fail(c, "CUDA: a Q8_0 KV cache needs rows of whole blocks of 32 (kv_dim %d)", kv_dim);
            return cu_status(p);
        }
        k_kv_store_q8_0<<<grid_for((size_t)c->T * (kv_dim / 32), 128), 128, 0, c->stream>>>(
            (uint8_t *)kc, (uint8_t *)vc, k, v, c->slots.p, c->T, kv_dim);
    } else if (kv_type == QT_F32 || kv_type == QT_F16) {
        k_kv_store_elem<<<grid_for((size_t)c->T * kv_dim, 256), 256, 0, c->stream>>>(
            (uint8_t *)kc, (uint8_t *)vc, k, v, c->slots.p, c->T, kv_dim, kv_type == QT_F16);
    } else {
        ctx_fail(c, "CUDA: the KV cache cannot be stored as %s", qtype_name(kv_type));
        return cu_status(p);
    }
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_attention(void *p, const float *q, const void *kc, const void *vc, float *out, const bk_attn *a) {
    cuda_ctx *c = C(p);
    if (!c->T) return cu_status(p);
    if (a->head_dim > 4 * ATT_THREADS) {
        ctx_fail(c, "CUDA attention: head size %d is over %d", a->head_dim, 4 * ATT_THREADS);
        return cu_status(p);
    }
    dim3 grid((unsigned)c->T, (unsigned)a->n_heads);
    size_t shm = (size_t)(a->head_dim + ATT_THREADS) * sizeof(float);
    const size_t rb = qtype_row_bytes(a->kv_type, (int64_t)a->n_kv_heads * a->head_dim);
    const uint8_t *k8 = (const uint8_t *)kc, *v8 = (const uint8_t *)vc;
#define ATT_ARGS q, k8, v8, rb, out, c->pos.p, c->row_seq.p, c->kv_len.p, c->table.p, c->max_blocks, a->n_heads, \
                 a->n_kv_heads, a->head_dim, a->block_size, a->scale, a->window, a->softcap
    switch (a->kv_type) {
    case QT_F32: k_attention<QT_F32><<<grid, ATT_THREADS, shm, c->stream>>>(ATT_ARGS); break;
    case QT_F16: k_attention<QT_F16><<<grid, ATT_THREADS, shm, c->stream>>>(ATT_ARGS); break;
    case QT_Q8_0: k_attention<QT_Q8_0><<<grid, ATT_THREADS, shm, c->stream>>>(ATT_ARGS); break;
    default:
        ctx_fail(c, "CUDA: the KV cache cannot be read as %s", qtype_name(a->kv_type));
        return cu_status(p);
    }
#undef ATT_ARGS
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_silu_mul(void *p, float *g, const float *u, size_t n) {
    cuda_ctx *c = C(p);
    if (!n) return cu_status(p);
    k_silu_mul<<<grid_for(n, 256), 256, 0, c->stream>>>(g, u, (int64_t)n);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_add(void *p, float *x, const float *y, size_t n) {
    cuda_ctx *c = C(p);
    if (!n) return cu_status(p);
    k_add<<<grid_for(n, 256), 256, 0, c->stream>>>(x, y, (int64_t)n);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_copy_blocks(void *p, void *cache, const int32_t *src, const int32_t *dst, int n, size_t block_bytes) {
    cuda_ctx *c = C(p);
    if (n <= 0 || !ensure_ints(c, &c->copy, 2 * (size_t)n)) return cu_status(p);
    CK(c, cudaMemcpy(c->copy.p, src, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
    CK(c, cudaMemcpy(c->copy.p + n, dst, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
    const bool words = block_bytes % 4 == 0;
    const size_t block_words = words ? block_bytes / 4 : block_bytes;
    dim3 grid(grid_for(block_words, 256) > 64 ? 64 : grid_for(block_words, 256), (unsigned)n);
    if (words) k_copy_blocks<uint32_t><<<grid, 256, 0, c->stream>>>((uint32_t *)cache, c->copy.p, c->copy.p + n, n, block_words);
    else k_copy_blocks<uint8_t><<<grid, 256, 0, c->stream>>>((uint8_t *)cache, c->copy.p, c->copy.p + n, n, block_words);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_gather_out_rows(void *p, const float *x, int dim, float *out) {
    cuda_ctx *c = C(p);
    if (!c->n_out) return cu_status(p);
    k_gather<<<grid_for((size_t)c->n_out * dim, 256), 256, 0, c->stream>>>(x, dim, c->out_rows.p, c->n_out, out);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_scale(void *p, float *x, float sc, size_t n) {
    cuda_ctx *c = C(p);
    if (!n) return cu_status(p);
    k_scale<<<grid_for(n, 256), 256, 0, c->stream>>>(x, sc, (int64_t)n);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_gelu_mul(void *p, float *g, const float *u, size_t n) {
    cuda_ctx *c = C(p);
    if (!n) return cu_status(p);
    k_gelu_mul<<<grid_for(n, 256), 256, 0, c->stream>>>(g, u, (int64_t)n);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_gather_rows(void *p, const float *x, int dim, const int32_t *rows, int n, float *out) {
    cuda_ctx *c = C(p);
    if (n <= 0) return cu_status(p);
    upload_ints(c, &c->rows, rows, (size_t)n);
    if (c->failed) return cu_status(p);
    k_gather_rows<<<grid_for((size_t)n * dim, 256), 256, 0, c->stream>>>(x, dim, c->rows.p, n, out);
    LAUNCHED(c);
    return cu_status(p);
}

static int cu_scatter_add_rows(void *p, float *x, int dim, const int32_t *rows, const float *weights, int n,
                                const float *y) {
    cuda_ctx *c = C(p);
    if (n <= 0) return cu_status(p);
    upload_ints(c, &c->rows, rows, (size_t)n);
    upload_ints(c, &c->mix, (const int32_t *)(const void *)weights, (size_t)n); /* float bits */
    if (c->failed) return cu_status(p);
    k_scatter_add_rows<<<grid_for((size_t)n * dim, 256), 256, 0, c->stream>>>(x, dim, c->rows.p,
                                                                             (const float *)(void *)c->mix.p, n, y);
    LAUNCHED(c);
    return cu_status(p);
}

/* in the order of backend_ops' fields */
static const backend_ops g_cuda_ops = {
    cu_destroy, cu_weight_load, cu_alloc, cu_free, cu_to_host, cu_memset0, cu_begin, cu_embed,
    cu_rmsnorm, cu_matmul, cu_add_bias, cu_rope, cu_kv_store, cu_attention, cu_silu_mul, cu_add,
    cu_copy_blocks, cu_gather_out_rows, cu_scale, cu_gelu_mul, cu_gather_rows, cu_scatter_add_rows,
};

/* The compute capability this build's code runs on: the cubin is for
 * LLC_CUDA_ARCH (e.g. 90 = sm_90) and the PTX beside it JIT-compiles for newer
 * GPUs, so anything older is refused. */
#ifndef LLC_CUDA_ARCH
#define LLC_CUDA_ARCH 90
#endif

/* 0 when GPU `device` exists and can run this build; else a one-line reason. */
static int check_device(int device, char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        snprintf(why, why_len, "no usable CUDA GPU (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return LLC_ERR_UNSUPPORTED;
    }
    if (device < 0 || device >= n) {
        snprintf(why, why_len, "GPU %d does not exist (%d found)", device, n);
        return LLC_ERR_RANGE;
    }
    cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, device)) != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, why_len, "GPU %d: %s", device, cudaGetErrorString(e));
        return LLC_ERR_IO;
    }
    if (p.major * 10 + p.minor < LLC_CUDA_ARCH) {
        snprintf(why, why_len,
                 "GPU %d (%.100s) has compute capability %d.%d; this build runs on %d.%d and newer "
                 "(rebuild with make CUDA_ARCH=%d%d)",
                 device, p.name, p.major, p.minor, LLC_CUDA_ARCH / 10, LLC_CUDA_ARCH % 10, p.major, p.minor);
        return LLC_ERR_UNSUPPORTED;
    }
    return 0;
}

extern "C" bool backend_cuda_available(void) {
    char why[256];
    return check_device(0, why, sizeof why) == 0;
}

extern "C" int backend_cuda_unusable_reason(char *why, size_t why_len) {
    return check_device(0, why, why_len);
}

extern "C" int backend_cuda_create(int device, backend **out, llc_err *err) {
    *out = NULL;
    char why[256];
    int rc = check_device(device, why, sizeof why);
    if (rc) return llc_fail(err, rc, "%s", why);
    cudaError_t e;
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    backend *b = (backend *)calloc(1, sizeof *b);
    if (!c || !b) {
        free(c), free(b);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    c->device = device;
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaStreamCreate(&c->stream)) != cudaSuccess) {
        cu_destroy(c), free(b);
        return llc_fail(err, LLC_ERR_IO, "CUDA: %s", cudaGetErrorString(e));
    }
    if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        cu_destroy(c), free(b);
        return llc_fail(err, LLC_ERR_IO, "cuBLAS could not start");
    }
    cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH);
    b->name = "cuda";
    b->ops = &g_cuda_ops;
    b->ctx = c;
    *out = b;
    return 0;
}
