/* matmul.cu — y[rows][n_out] = x[rows][n_in] · Wᵀ on the GPU.
 *
 *   F32 weights                 cuBLAS SGEMM (no TF32)
 *   up to 8 rows, any layout    a fused GEMV: one warp per output row reads the
 *                               row once in 16-byte chunks (layouts.cuh), decodes
 *                               and multiplies by every activation row in F32
 *   more rows                   tensor cores: quantized weights dequantized to F16
 *                               into scratch, activations converted to F16 (scaled
 *                               so nothing overflows) or BF16, cublasGemmEx with
 *                               F32 accumulation
 * Decode is bound by reading the weights once: the GEMV's chunks keep every
 * lane's loads 16 bytes wide and aligned. */
#include "kernels/cuda/layouts.cuh"

#define GEMV_WARPS 4

template <uint32_t TYPE, int TMAX>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    k_gemv(const uint8_t *__restrict__ W, size_t stride, int64_t n_in, int64_t n_out, int64_t n_chunks,
           const float *__restrict__ x, int T, float *__restrict__ y) {
    typedef layout<TYPE> L;
    const int64_t o = (int64_t)blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (o >= n_out) return;
    const uint8_t *row = W + (size_t)o * stride;
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
            if (t >= T) break;
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
#pragma unroll
    for (int t = 0; t < TMAX; t++) {
        float v = acc[t];
        for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
        if (lane == 0 && t < T) y[(size_t)t * n_out + o] = v;
    }
}

template <uint32_t TYPE>
static void launch_gemv(cuda_ctx *c, const bk_weight *w, int64_t chunks, const float *x, int rows, float *y) {
    const unsigned grid = (unsigned)((w->n_out + GEMV_WARPS - 1) / GEMV_WARPS);
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
    if (w->type == QT_F32) { /* Yᵀ[n_out × rows] = W[n_out × n_in] · Xᵀ, all column-major views */
        CB(c, cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, (const float *)w->data, k, x, k, &zero, y, m));
        return;
    }
    const int64_t chunks = layout_chunks(w->type, w->n_in);
    if (rows <= 8 && chunks && (uintptr_t)x % 16 == 0) { /* decode: the fused GEMV */
        switch (w->type) {
#define GEMV_CASE(TY) case TY: launch_gemv<TY>(c, w, chunks, x, rows, y); return;
            LAYOUT_TYPES(GEMV_CASE)
#undef GEMV_CASE
        default: break;
        }
    }
    /* tensor cores: activations (and quantized weights) as F16/BF16 in scratch */
    const bool bf = w->type == QT_BF16, as_is = w->type == QT_F16 || bf;
    const size_t wbytes = as_is ? 0 : (size_t)m * k * 2, xbytes = (size_t)n * k * 2;
    uint8_t *s = (uint8_t *)cuda_scratch(c, wbytes + xbytes);
    if (!s) return;
    const void *A = w->data;
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
