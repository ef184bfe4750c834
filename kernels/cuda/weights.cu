/* weights.cu — weights on the GPU: which types the backend takes, the layout
 * their rows get at upload (layouts.cuh says why and what), the embedding lookup
 * and the dequantization to F16 that the tensor-core GEMM reads. */
#include <string.h>

#include "kernels/cuda/layouts.cuh"

bool cuda_weight_type_ok(uint32_t type) {
    switch (type) {
    case QT_F32: case QT_F16: case QT_BF16: case QT_Q8_0: case QT_Q4_0: case QT_Q4_K: case QT_Q5_K: case QT_Q6_K:
        return true;
    default: return false;
    }
}

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t cuda_row_bytes(uint32_t type, int64_t n_in) {
    const size_t n = (size_t)n_in;
    switch (type) {
    case QT_Q8_0: return n % 32 ? 0 : round16(n + n / 16);
    case QT_Q4_0: return n % 32 ? 0 : round16(n / 2 + n / 16);
    case QT_Q6_K: return n % 256 ? 0 : round16(n / 2 + n / 4 + n / 16 + n / 128);
    default: return qtype_row_bytes(type, n_in);
    }
}

/* One row from the file's blocks into planes (see layouts.cuh). */
static void relayout_row(uint32_t type, const uint8_t *src, int64_t n_in, uint8_t *dst) {
    const int64_t nb32 = n_in / 32, nb256 = n_in / 256;
    switch (type) {
    case QT_Q8_0: /* block: d (2) | qs (32) */
        for (int64_t i = 0; i < nb32; i++) {
            memcpy(dst + 32 * i, src + 34 * i + 2, 32);
            memcpy(dst + n_in + 2 * i, src + 34 * i, 2);
        }
        break;
    case QT_Q4_0: /* block: d (2) | qs (16) */
        for (int64_t i = 0; i < nb32; i++) {
            memcpy(dst + 16 * i, src + 18 * i + 2, 16);
            memcpy(dst + n_in / 2 + 2 * i, src + 18 * i, 2);
        }
        break;
    case QT_Q6_K: { /* block: ql (128) | qh (64) | sc (16) | d (2) */
        uint8_t *qh = dst + n_in / 2, *sc = qh + n_in / 4, *d = sc + n_in / 16;
        for (int64_t i = 0; i < nb256; i++) {
            const uint8_t *b = src + 210 * i;
            memcpy(dst + 128 * i, b, 128);
            memcpy(qh + 64 * i, b + 128, 64);
            memcpy(sc + 16 * i, b + 192, 16);
            memcpy(d + 2 * i, b + 208, 2);
        }
        break;
    }
    default: memcpy(dst, src, qtype_row_bytes(type, n_in)); break;
    }
}

void cuda_relayout_rows(uint32_t type, const uint8_t *src, int64_t n_in, int64_t n_out, uint8_t *dst) {
    const size_t in_rb = qtype_row_bytes(type, n_in), out_rb = cuda_row_bytes(type, n_in);
    for (int64_t o = 0; o < n_out; o++) {
        uint8_t *row = dst + (size_t)o * out_rb;
        memset(row, 0, out_rb); /* the padding too */
        relayout_row(type, src + (size_t)o * in_rb, n_in, row);
    }
}

/* ---- the embedding lookup ---- */

/* x[t][e] for chunk blockIdx.x*blockDim.x + threadIdx.x of token t = blockIdx.y */
template <uint32_t TYPE>
__global__ void k_embed_chunks(const uint8_t *table, size_t stride, int64_t dim, int64_t n_chunks, const int *tokens,
                               float *x) {
    typedef layout<TYPE> L;
    const int t = blockIdx.y;
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_chunks) return;
    float v[L::RUNS][16];
    int64_t e0;
    L::decode(table + (size_t)tokens[t] * stride, dim, c, &e0, v);
    float *out = x + (size_t)t * dim + e0;
#pragma unroll
    for (int r = 0; r < L::RUNS; r++)
#pragma unroll
        for (int k = 0; k < 4; k++)
            *(float4 *)(out + r * L::GAP + 4 * k) = make_float4(v[r][4 * k], v[r][4 * k + 1], v[r][4 * k + 2], v[r][4 * k + 3]);
}

/* Float tables of any width: one element per thread */
__global__ void k_embed_float(const uint8_t *table, uint32_t type, size_t stride, int64_t dim, const int *tokens, int T,
                              float *x) {
    const int t = blockIdx.y;
    if (t >= T) return;
    const uint8_t *row = table + (size_t)tokens[t] * stride;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < dim; i += (int64_t)gridDim.x * blockDim.x) {
        float f;
        if (type == QT_F32) f = ((const float *)row)[i];
        else if (type == QT_F16) f = __half2float(((const __half *)row)[i]);
        else f = __uint_as_float((uint32_t)((const unsigned short *)row)[i] << 16);
        x[(size_t)t * dim + i] = f;
    }
}

void cuda_embed(cuda_ctx *c, const bk_weight *table, float *x) {
    const size_t stride = cuda_row_bytes(table->type, table->n_in);
    const int64_t chunks = layout_chunks(table->type, table->n_in);
    const bool quant = table->type != QT_F32 && table->type != QT_F16 && table->type != QT_BF16;
    if (quant && chunks) {
        dim3 grid((unsigned)((chunks + 127) / 128), (unsigned)c->T);
        switch (table->type) {
#define EMBED(TY) \
    case TY: k_embed_chunks<TY><<<grid, 128, 0, c->stream>>>((const uint8_t *)table->data, stride, table->n_in, chunks, c->tokens, x); break;
            LAYOUT_TYPES(EMBED)
#undef EMBED
        default: break;
        }
    } else if (!quant) {
        dim3 grid((unsigned)((table->n_in + 255) / 256), (unsigned)c->T);
        k_embed_float<<<grid, 256, 0, c->stream>>>((const uint8_t *)table->data, table->type, stride, table->n_in,
                                                   c->tokens, c->T, x);
    } else {
        cuda_fail(c, "CUDA: an embedding table of %s rows %lld wide", qtype_name(table->type), (long long)table->n_in);
        return;
    }
    LAUNCHED(c);
}

/* ---- dequantization to F16 (the tensor-core GEMM's weights) ---- */

template <uint32_t TYPE>
__global__ void k_dequant_f16(const uint8_t *W, size_t stride, int64_t n_in, int64_t n_chunks, int64_t total,
                              __half *out) {
    typedef layout<TYPE> L;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = k / n_chunks, c = k % n_chunks;
        float v[L::RUNS][16];
        int64_t e0;
        L::decode(W + (size_t)o * stride, n_in, c, &e0, v);
        __half *dst = out + (size_t)o * n_in + e0;
#pragma unroll
        for (int r = 0; r < L::RUNS; r++)
#pragma unroll
            for (int half8 = 0; half8 < 2; half8++) {
                __half2 h[4];
#pragma unroll
                for (int j = 0; j < 4; j++) h[j] = __floats2half2_rn(v[r][8 * half8 + 2 * j], v[r][8 * half8 + 2 * j + 1]);
                *(uint4 *)(dst + r * L::GAP + 8 * half8) = *(const uint4 *)h;
            }
    }
}

void cuda_dequant_f16(cuda_ctx *c, const bk_weight *w, __half *out) {
    const int64_t chunks = layout_chunks(w->type, w->n_in), total = chunks * w->n_out;
    const size_t stride = cuda_row_bytes(w->type, w->n_in);
    if (!chunks) {
        cuda_fail(c, "CUDA: %s rows %lld wide cannot be dequantized", qtype_name(w->type), (long long)w->n_in);
        return;
    }
    const unsigned grid = grid_for((size_t)total, 256);
    switch (w->type) {
#define DEQUANT(TY) \
    case TY: k_dequant_f16<TY><<<grid, 256, 0, c->stream>>>((const uint8_t *)w->data, stride, w->n_in, chunks, total, out); break;
        LAYOUT_TYPES(DEQUANT)
#undef DEQUANT
    default: cuda_fail(c, "CUDA: no dequantization for %s", qtype_name(w->type)); return;
    }
    LAUNCHED(c);
}

/* ---- the layouts, decoded on the host (tests/test_cuda_layouts.c) ---- */

template <uint32_t TYPE> static void decode_row_host(const uint8_t *row, int64_t n_in, float *out) {
    typedef layout<TYPE> L;
    const int64_t chunks = layout_chunks(TYPE, n_in);
    for (int64_t c = 0; c < chunks; c++) {
        float v[L::RUNS][16];
        int64_t e0;
        L::decode(row, n_in, c, &e0, v);
        for (int r = 0; r < L::RUNS; r++)
            for (int j = 0; j < 16; j++) out[e0 + r * L::GAP + j] = v[r][j];
    }
}

extern "C" int backend_cuda_decode_row_host(uint32_t type, const void *file_row, int64_t n_in, float *out) {
    const size_t rb = cuda_row_bytes(type, n_in);
    if (!cuda_weight_type_ok(type) || type == QT_F32 || !rb || !layout_chunks(type, n_in)) return LLC_ERR_UNSUPPORTED;
    uint8_t *row = (uint8_t *)malloc(rb);
    if (!row) return LLC_ERR_NOMEM;
    cuda_relayout_rows(type, (const uint8_t *)file_row, n_in, 1, row);
    switch (type) {
#define DECODE(TY) case TY: decode_row_host<TY>(row, n_in, out); break;
        LAYOUT_TYPES(DECODE)
#undef DECODE
    default: break;
    }
    free(row);
    return 0;
}
