/* elementwise.cu — the CUDA backend's small ops: RMSNorm, RoPE, the gated
 * activations, adds and scales, row gathers and scatters, KV block copies.
 * Grid-stride loops over the elements; each launcher checks its launch. */
#include "kernels/cuda/cuda_internal.h"

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

/* Rows of whole float4s up to 4·NV·blockDim wide: each thread loads its NV
 * vectors once (all in flight together), keeps them in registers for the second
 * pass, and the row is read from memory once. At decode a row is one block, so
 * the op's time is its latency: two round trips instead of one per 256 elements. */
template <int NV>
__global__ void k_rmsnorm_vec(const float4 *x, const float4 *w, float4 *out, int dim, float eps) {
    __shared__ float sh[32];
    const int nv = dim / 4;
    const float4 *xr = x + (size_t)blockIdx.x * nv;
    float4 *o = out + (size_t)blockIdx.x * nv;
    float4 v[NV];
    float ss = 0;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        v[k] = i < nv ? xr[i] : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < NV; k++) ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    ss = block_sum(ss, sh);
    const float scale = rsqrtf(ss / dim + eps);
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i >= nv) break;
        const float4 g = __ldg(w + i);
        o[i] = make_float4(v[k].x * scale * g.x, v[k].y * scale * g.y, v[k].z * scale * g.z, v[k].w * scale * g.w);
    }
}

void cuda_rmsnorm(cuda_ctx *c, const float *x, const float *w, float *out, int rows, int dim, float eps) {
    if (rows <= 0) return;
    const bool aligned = dim % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)w % 16 == 0 && (uintptr_t)out % 16 == 0;
    if (aligned && dim <= 4 * 4 * 1024) { /* up to 16384 wide: 1..4 vectors per thread */
        const int nv = dim / 4;
        int threads = nv <= 1024 ? (nv + 31) / 32 * 32 : 1024;
        if (threads < 64) threads = 64;
        const float4 *x4 = (const float4 *)x, *w4 = (const float4 *)w;
        float4 *o4 = (float4 *)out;
        if (nv <= threads) k_rmsnorm_vec<1><<<rows, threads, 0, c->stream>>>(x4, w4, o4, dim, eps);
        else if (nv <= 2 * threads) k_rmsnorm_vec<2><<<rows, threads, 0, c->stream>>>(x4, w4, o4, dim, eps);
        else k_rmsnorm_vec<4><<<rows, threads, 0, c->stream>>>(x4, w4, o4, dim, eps);
        LAUNCHED(c);
        return;
    }
    /* (a warp per row would do for head-sized rows; one block of up to 256 keeps it simple) */
    const int threads = dim >= 256 ? 256 : dim >= 128 ? 128 : 64;
    k_rmsnorm<<<rows, threads, 0, c->stream>>>(x, w, out, dim, eps);
    LAUNCHED(c);
}

__global__ void k_add_bias(float *y, const float *b, int64_t width, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        y[k] += b[k % width];
}

void cuda_add_bias(cuda_ctx *c, float *y, const float *b, int64_t width, int rows) {
    const int64_t n = (int64_t)rows * width;
    if (n <= 0) return;
    k_add_bias<<<grid_for((size_t)n, 256), 256, 0, c->stream>>>(y, b, width, n);
    LAUNCHED(c);
}

/* One thread per rotated pair of a row's head (bk_rope in backend.h has the math). */
__global__ void k_rope(float *x, const int *pos, int T, int n_heads, int head_dim, bk_rope rp, const float *factors) {
    int half = rp.n_rot / 2;
    int64_t n = (int64_t)T * n_heads * half;
    const float mscale = rp.mscale != 0.0f ? rp.mscale : 1.0f;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        int i = (int)(k % half);
        int64_t rh = k / half;
        int r = (int)(rh / n_heads);
        float extrap = (float)pos[r] * powf(rp.freq_base, -2.0f * (float)i / (float)rp.n_rot);
        if (factors) extrap /= factors[i];
        const float interp = rp.freq_scale * extrap;
        float theta = interp;
        if (rp.ext_factor != 0.0f) {
            float y = ((float)i - rp.corr_lo) / fmaxf(0.001f, rp.corr_hi - rp.corr_lo);
            const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * rp.ext_factor;
            theta = interp * (1.0f - mix) + extrap * mix;
        }
        float cs, sn;
        sincosf(theta, &sn, &cs);
        cs *= mscale, sn *= mscale;
        float *v = x + rh * head_dim;
        int a = rp.style == BK_ROPE_NEOX ? i : 2 * i, b = rp.style == BK_ROPE_NEOX ? i + half : 2 * i + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs - x1 * sn;
        v[b] = x0 * sn + x1 * cs;
    }
}

/* The attention temperature: every element of row r times its position's factor. */
__global__ void k_rope_temperature(float *x, const int *pos, int T, int width, float scale, float offset, int floor_div) {
    int64_t n = (int64_t)T * width;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const int r = (int)(k / width);
        x[k] *= (float)(log(floor(((float)pos[r] + offset) / (float)floor_div) + 1.0) * scale + 1.0);
    }
}

void cuda_rope(cuda_ctx *c, float *x, int n_heads, int head_dim, const bk_rope *rp, const float *d_factors) {
    if (!c->T) return;
    const int64_t n = (int64_t)c->T * n_heads * (rp->n_rot / 2);
    bk_rope r = *rp;
    r.freq_factors = NULL; /* (a host pointer: the kernel reads d_factors) */
    k_rope<<<grid_for((size_t)n, 256), 256, 0, c->stream>>>(x, c->pos, c->T, n_heads, head_dim, r, d_factors);
    if (rp->temp_scale != 0.0f) {
        LAUNCHED(c);
        const int64_t m = (int64_t)c->T * n_heads * head_dim;
        k_rope_temperature<<<grid_for((size_t)m, 256), 256, 0, c->stream>>>(x, c->pos, c->T, n_heads * head_dim,
                                                                          rp->temp_scale, rp->temp_offset, rp->temp_floor);
    }
    LAUNCHED(c);
}

__global__ void k_silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        float x = g[k];
        g[k] = x / (1.0f + __expf(-x)) * u[k];
    }
}

void cuda_silu_mul(cuda_ctx *c, float *g, const float *u, size_t n) {
    if (!n) return;
    k_silu_mul<<<grid_for(n, 256), 256, 0, c->stream>>>(g, u, (int64_t)n);
    LAUNCHED(c);
}

/* gelu in the tanh form, written as x / (1 + e^(-2u)) like the CPU's */
__global__ void k_gelu_mul(float *g, const float *u, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        float x = g[k];
        g[k] = x / (1.0f + expf(-1.5957691216057308f * x * (1.0f + 0.044715f * x * x))) * u[k];
    }
}

void cuda_gelu_mul(cuda_ctx *c, float *g, const float *u, size_t n) {
    if (!n) return;
    k_gelu_mul<<<grid_for(n, 256), 256, 0, c->stream>>>(g, u, (int64_t)n);
    LAUNCHED(c);
}

/* gpt-oss's clamped SwiGLU, as the CPU's cpu_swiglu_oai_run */
__global__ void k_swiglu_oai(float *g, const float *u, int64_t n, float alpha, float limit) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const float x = fminf(g[k], limit), y = fminf(fmaxf(u[k], -limit), limit);
        g[k] = x / (1.0f + expf(-alpha * x)) * (y + 1.0f);
    }
}

void cuda_swiglu_oai(cuda_ctx *c, float *g, const float *u, size_t n, float alpha, float limit) {
    if (!n) return;
    k_swiglu_oai<<<grid_for(n, 256), 256, 0, c->stream>>>(g, u, (int64_t)n, alpha, limit);
    LAUNCHED(c);
}

__global__ void k_add(float *x, const float *y, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        x[k] += y[k];
}

void cuda_add(cuda_ctx *c, float *x, const float *y, size_t n) {
    if (!n) return;
    k_add<<<grid_for(n, 256), 256, 0, c->stream>>>(x, y, (int64_t)n);
    LAUNCHED(c);
}

__global__ void k_scale(float *x, float sc, int64_t n) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        x[k] *= sc;
}

void cuda_scale(cuda_ctx *c, float *x, float s, size_t n) {
    if (!n) return;
    k_scale<<<grid_for(n, 256), 256, 0, c->stream>>>(x, s, (int64_t)n);
    LAUNCHED(c);
}

/* block_bytes / W words of W bytes (W = 4, or 1 for a block size that is not whole words) */
template <typename W>
__global__ void k_copy_blocks(W *cache, const int *src, const int *dst, int n, size_t block_words) {
    int i = blockIdx.y;
    if (i >= n) return;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < block_words; k += (size_t)gridDim.x * blockDim.x)
        cache[(size_t)dst[i] * block_words + k] = cache[(size_t)src[i] * block_words + k];
}

void cuda_copy_blocks(cuda_ctx *c, void *cache, const int *d_src, const int *d_dst, int n, size_t block_bytes) {
    if (n <= 0) return;
    const bool words = block_bytes % 4 == 0;
    const size_t block_words = words ? block_bytes / 4 : block_bytes;
    const unsigned gx = grid_for(block_words, 256);
    dim3 grid(gx > 64 ? 64 : gx, (unsigned)n);
    if (words) k_copy_blocks<uint32_t><<<grid, 256, 0, c->stream>>>((uint32_t *)cache, d_src, d_dst, n, block_words);
    else k_copy_blocks<uint8_t><<<grid, 256, 0, c->stream>>>((uint8_t *)cache, d_src, d_dst, n, block_words);
    LAUNCHED(c);
}

__global__ void k_gather_rows(const float *x, int dim, const int *rows, int n, float *out) {
    int64_t total = (int64_t)n * dim;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = x[(size_t)rows[k / dim] * dim + k % dim];
}

void cuda_gather_rows(cuda_ctx *c, const float *x, int dim, const int *rows, int n, float *out) {
    if (n <= 0) return;
    k_gather_rows<<<grid_for((size_t)n * dim, 256), 256, 0, c->stream>>>(x, dim, rows, n, out);
    LAUNCHED(c);
}

/* rows are distinct within a call, so no two threads write one element */
__global__ void k_scatter_add_rows(float *x, int dim, const int *rows, const float *w, int n, const float *y) {
    int64_t total = (int64_t)n * dim;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x)
        x[(size_t)rows[k / dim] * dim + k % dim] += w[k / dim] * y[k];
}

void cuda_scatter_add_rows(cuda_ctx *c, float *x, int dim, const int *rows, const float *w, int n, const float *y) {
    if (n <= 0) return;
    k_scatter_add_rows<<<grid_for((size_t)n * dim, 256), 256, 0, c->stream>>>(x, dim, rows, w, n, y);
    LAUNCHED(c);
}

/* Reads n uint4 and keeps a sum so the loads cannot be dropped. */
__global__ void k_read(const uint4 *p, size_t n, unsigned *sink) {
    unsigned s = 0;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldg(p + k);
        s ^= v.x + v.y + v.z + v.w;
    }
    if (s == 0x9e3779b9u) *sink = s; /* (practically never: keeps the sum live) */
}

double cuda_read_bandwidth(cuda_ctx *c, size_t bytes, int reps) {
    void *buf = NULL;
    unsigned *sink = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double best = 0;
    if (cudaMalloc(&buf, bytes) != cudaSuccess || cudaMalloc((void **)&sink, sizeof *sink) != cudaSuccess ||
        cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
        cudaGetLastError();
        goto out;
    }
    cudaMemsetAsync(buf, 0x5a, bytes, c->stream); /* (not zeros) */
    {
        int sms = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c->device);
        const unsigned grid = (unsigned)(sms > 0 ? sms * 8 : 1024);
        for (int r = 0; r <= reps; r++) { /* the first pass warms up */
            cudaEventRecord(e0, c->stream);
            k_read<<<grid, 512, 0, c->stream>>>((const uint4 *)buf, bytes / 16, sink);
            cudaEventRecord(e1, c->stream);
            if (cudaEventSynchronize(e1) != cudaSuccess) break;
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            if (r > 0 && ms > 0 && bytes / (ms * 1e6) > best) best = (double)bytes / (ms * 1e6);
        }
    }
    cudaGetLastError();
out:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(sink);
    cudaFree(buf);
    return best;
}
