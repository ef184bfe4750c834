/* cuda_internal.h — what the CUDA backend's files share (C++, private to
 * kernels/cuda/): the context, the error macros, and each file's launchers.
 *
 *   backend_cuda.cu   the op table: context, memory, the step's batch, graphs,
 *                     profiling, the device check and the bandwidth probe
 *   weights.cu        weight layouts on the GPU (rows re-laid at upload), the
 *                     embedding lookup and dequantization to F16
 *   matmul.cu         matmul: fused dequant-GEMV for up to 8 rows, cuBLAS above
 *   attention.cu      the paged KV cache: stores and attention
 *   elementwise.cu    norms, RoPE, activations, adds, gathers, block copies
 *
 * Threading: a context belongs to the thread that drives the model (the engine
 * thread); nothing here locks. All work goes to c->stream, in order. Errors: the
 * first failed CUDA or cuBLAS call is kept in c->err (c->failed) and every later
 * op reports it; begin() reports it again, so a broken GPU stops each step. */
#ifndef LLC_CUDA_INTERNAL_H
#define LLC_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdint.h>

#define _Noreturn [[noreturn]]
extern "C" {
#include "kernels/backend.h"
#include "kernels/quant.h"
}

/* A device int array and its capacity. */
struct dints {
    int *p;
    size_t cap;
};

/* One step's batch on the device: every array in one allocation, uploaded from
 * one pinned host buffer with one copy (the arrays' offsets are in ints). */
struct step_ints {
    int *dev, *host; /* host: cudaMallocHost'd */
    size_t cap;      /* ints */
};

struct cuda_profile; /* backend_cuda.cu: per-op GPU times (LLC_CUDA_PROFILE=1) */
struct cuda_graphs;  /* backend_cuda.cu: captured decode steps */

struct cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_workspace; /* fixed, so cuBLAS calls can be captured in a graph */
    bool failed;
    char err[320];
    /* the step's batch, on the device (pointers into batch.dev) */
    int T, n_seqs, max_blocks, n_out;
    const int *tokens, *pos, *seq_start, *kv_len, *table, *slots, *out_rows, *row_seq;
    step_ints batch;
    cudaEvent_t batch_copied; /* after the batch's copy: the host buffer is free again */
    /* bumped whenever a buffer whose address a kernel may have been given moves
     * (the batch arrays, scratch): a captured graph from before is stale */
    unsigned long layout_epoch;
    /* scratch: converted activations and dequantized weights */
    void *scratch;
    size_t cap_scratch;
    void *topk_buf;   /* top_k's ids and values before they go to the host (not scratch:
                         no recorded step reads it, so growing it stales none) */
    size_t cap_topk;
    float *d_freq; /* rope frequency factors, uploaded on first use */
    const float *h_freq;
    int n_freq;
    dints copy;       /* copy_blocks src/dst */
    float *d_scale;   /* [3]: the F16 activations' max, scale, and 0 (matmul.cu) */
    void **weights;   /* every weight_load allocation, freed by destroy */
    int n_weights, cap_weights;
    dints rows, mix;  /* gather/scatter rows and their mixing weights (floats as their bits) */
    bool attn_by_rows; /* LLC_CUDA_ATTN=rows: the first attention kernel (one block per row and head) */
    bool attn_no_split; /* LLC_CUDA_ATTN=nosplit: decode rows' keys not split across blocks (for comparison) */
    bool no_multi;     /* LLC_CUDA_MULTI=0: one launch (and one activation quantization) per matrix */
    bool float_act;    /* LLC_CUDA_INT8=0: Q8_0/Q4_0 GEMVs in F32 activations too (for comparison) */
    int gemv_rows;     /* LLC_CUDA_GEMV_ROWS=1: one output row per warp in the int8 GEMVs (for comparison) */
    /* F16 copies of quantized weights for the tensor-core path (matmul.cu), kept
     * while the GPU has room: keyed by the weight's device address */
    struct f16_copy *f16;
    int n_f16, cap_f16;
    bool f16_full;     /* a copy did not fit: no more are tried */
    bool f16_off;      /* LLC_CUDA_F16_CACHE=0: dequantize at every call (for comparison) */
    cuda_profile *prof;
    cuda_graphs *graphs;
};

void cuda_fail(cuda_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CK(ctx, call)                                                                            \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) cuda_fail((ctx), "CUDA: %s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)
#define CB(ctx, call)                                                                       \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS) cuda_fail((ctx), "cuBLAS: %s: status %d", #call, (int)s_); \
    } while (0)
#define LAUNCHED(ctx) CK(ctx, cudaGetLastError())

/* Blocks for n items at `threads` per block (grid-stride kernels cap it). */
static inline unsigned grid_for(size_t n, unsigned threads) {
    size_t g = (n + threads - 1) / threads;
    return (unsigned)(g > 65535u * 32u ? 65535u * 32u : (g ? g : 1));
}

/* backend_cuda.cu */
void *cuda_scratch(cuda_ctx *c, size_t bytes); /* NULL (and c failed) when it cannot grow */
bool cuda_upload_ints(cuda_ctx *c, dints *d, const int32_t *src, size_t n);

/* weights.cu — the layout of a weight's rows on the GPU. Q8_0, Q4_0 and Q6_K rows
 * are re-laid at upload as planes (all quants, then all scales) so that each lane
 * reads aligned 16-byte vectors; F32/F16/BF16, Q4_K and Q5_K keep the file's
 * bytes (their blocks are 16-byte multiples already). */
bool cuda_weight_type_ok(uint32_t type);
size_t cuda_row_bytes(uint32_t type, int64_t n_in); /* 0: n_in does not fit the layout */
/* Writes n_out rows of the file's bytes (src) in the GPU layout (dst holds
 * n_out * cuda_row_bytes). */
void cuda_relayout_rows(uint32_t type, const uint8_t *src, int64_t n_in, int64_t n_out, uint8_t *dst);
void cuda_embed(cuda_ctx *c, const bk_weight *table, float *x);
/* out[n_out][n_in] = the weight as F16 */
void cuda_dequant_f16(cuda_ctx *c, const bk_weight *w, __half *out);

/* matmul.cu */
void cuda_matmul(cuda_ctx *c, const bk_weight *w, const float *x, int rows, float *y);
/* the F16 copies, all freed (a weight was freed; destroy) */
void cuda_f16_copies_free(cuda_ctx *c);
void cuda_matmul_multi(cuda_ctx *c, const bk_weight *const *w, int n, const float *x, int rows, float *const *y);

/* attention.cu */
void cuda_kv_store(cuda_ctx *c, void *kc, void *vc, const float *k, const float *v, int kv_dim, uint32_t kv_type);
void cuda_attention(cuda_ctx *c, const float *q, const void *kc, const void *vc, float *out, const bk_attn *a);

/* elementwise.cu */
void cuda_rmsnorm(cuda_ctx *c, const float *x, const float *w, float *out, int rows, int dim, float eps);
void cuda_add_bias(cuda_ctx *c, float *y, const float *b, int64_t width, int rows);
void cuda_rope(cuda_ctx *c, float *x, int n_heads, int head_dim, const bk_rope *rp, const float *d_factors);
void cuda_silu_mul(cuda_ctx *c, float *g, const float *u, size_t n);
void cuda_gelu_mul(cuda_ctx *c, float *g, const float *u, size_t n);
void cuda_swiglu_oai(cuda_ctx *c, float *g, const float *u, size_t n, float alpha, float limit);
void cuda_add(cuda_ctx *c, float *x, const float *y, size_t n);
void cuda_scale(cuda_ctx *c, float *x, float s, size_t n);
void cuda_copy_blocks(cuda_ctx *c, void *cache, const int *d_src, const int *d_dst, int n, size_t block_bytes);
/* out[k] = x[rows[k]] (rows: device ints), rows dim wide */
void cuda_gather_rows(cuda_ctx *c, const float *x, int dim, const int *rows, int n, float *out);
void cuda_scatter_add_rows(cuda_ctx *c, float *x, int dim, const int *rows, const float *w, int n, const float *y);
/* topk.cu: ids/vals [r * k ..] = the k best of row r of x (rows of n), as topk_row */
void cuda_top_k(cuda_ctx *c, const float *x, int rows, int n, int k, int32_t *d_ids, float *d_vals);
/* GB/s of reading `bytes` of device memory (best of reps), or 0 */
double cuda_read_bandwidth(cuda_ctx *c, size_t bytes, int reps);

#endif
