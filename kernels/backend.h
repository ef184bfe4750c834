/* backend.h — the op table the forward pass (engine/model/model.c) is written against.
 *
 * A backend is a table of function pointers plus an opaque context. model.c never
 * asks which backend it runs on: all activation, KV and weight memory is the
 * backend's ("device memory"), reached only through these ops. The CPU backend is
 * always built; others (CUDA) fill the same table.
 *
 * One forward step works on a flattened varlen batch (bk_batch): the rows of all
 * sequences back to back. `begin` hands the batch description to the backend
 * once per step; ops that need positions, KV slots or sequence boundaries read it
 * from there. Shapes are row-major: a [rows x dim] activation is rows*dim floats. */
#ifndef LLC_BACKEND_H
#define LLC_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/common.h"

/* A tensor as the loader hands it to weight_load: host memory in the layout of
 * its qtype (kernels/quant.h). The backend keeps a view of it or copies it. */
typedef struct bk_tensor {
    const char *name;       /* for messages, and to tell the embedding table apart */
    uint32_t type;          /* qtype id */
    int64_t n_in, n_out;    /* row width (elements) and rows */
    const void *data;
    size_t n_bytes;
    bool droppable;         /* data lies in a read-only file mapping: its pages may be
                               dropped (MADV_DONTNEED) and are read back from the file */
} bk_tensor;

/* A weight matrix in backend memory: n_out rows of n_in elements of qtype `type`
 * (a vector is n_out = 1). */
typedef struct bk_weight {
    uint32_t type;
    int64_t n_in, n_out;
    const void *data;
    const void *aux;  /* the backend's own extra form of it (CPU: packed GEMM panels), or NULL */
} bk_weight;

/* One step's batch, in host memory; the backend copies what it needs in begin(). */
typedef struct bk_batch {
    int n_tokens;               /* T: rows in this step */
    const int32_t *tokens;      /* [T] */
    const int32_t *positions;   /* [T] position of each row in its sequence */
    int n_seqs;
    const int32_t *seq_start;   /* [n_seqs+1] rows of sequence s: seq_start[s] .. seq_start[s+1]-1 */
    const int32_t *kv_len;      /* [n_seqs] KV entries of s after this step; entry j holds position j */
    const int32_t *block_table; /* [n_seqs * max_blocks] KV block ids of each sequence, in order */
    int max_blocks;
    const int32_t *slots;       /* [T] KV slot (block * block_size + offset) each row's K/V goes to */
    int n_out;                  /* rows whose logits are wanted */
    const int32_t *out_rows;    /* [n_out] */
    int n_hidden;               /* rows whose final-norm hidden state is wanted (embeddings); */
    const int32_t *hidden_rows; /* [n_hidden] read by model.c (gather_rows), not by backends */
    const int32_t *state_slots; /* [n_seqs] recurrent-state slot of each sequence (hybrid models;
                                   NULL: slot s), read by model.c, not by backends */
} bk_batch;

typedef enum bk_rope_style {
    BK_ROPE_NORMAL, /* rotate adjacent pairs (x[2i], x[2i+1]): llama */
    BK_ROPE_NEOX,   /* rotate (x[i], x[i + n_rot/2]): qwen2, qwen3 */
} bk_rope_style;

/* Pair i of a head (i < n_rot/2) turns by theta_i at position pos:
 *   extrap_i = pos * freq_base^(-2i/n_rot) / freq_factors[i]
 *   interp_i = freq_scale * extrap_i
 *   theta_i  = interp_i                                       (no YaRN)
 *            = interp_i * (1 - mix_i) + extrap_i * mix_i      (YaRN: ext_factor > 0)
 *   mix_i    = ext_factor * (1 - clamp((i - corr_lo) / max(0.001, corr_hi - corr_lo), 0, 1))
 * and the rotated pair is scaled by mscale (YaRN's and LongRoPE's attention
 * factor; 1 = none). Zero-initialised fields beyond freq_scale are off, except
 * that mscale 0 means 1. */
typedef struct bk_rope {
    bk_rope_style style;
    int n_rot;           /* leading dimensions of each head that rotate (<= head_dim) */
    float freq_base;
    float freq_scale;    /* 1 / scaling factor */
    const float *freq_factors; /* [n_rot/2] host memory, or NULL (llama3 rope_freqs, LongRoPE) */
    float ext_factor;    /* YaRN's extrapolation mix; 0 = off */
    float corr_lo, corr_hi; /* YaRN's ramp between the extrapolated and interpolated pairs */
    float mscale;        /* cos and sin times this (0 or 1 = unscaled) */
    /* Attention temperature (Llama 4, Mistral 3), for queries: after rotating, the
     * whole head is multiplied by 1 + temp_scale * log(floor((pos + temp_offset) /
     * temp_floor) + 1). temp_scale 0 = off. */
    float temp_scale, temp_offset;
    int temp_floor;
} bk_rope;

/* KV cache element types (qtype ids, kernels/quant.h): QT_F32, QT_F16 (IEEE half),
 * QT_Q8_0 (blocks of 32 along each slot's row of kv_dim elements: an fp16 scale and
 * 32 int8, as GGML's; needs kv_dim % 32 == 0 and head_dim % 8 == 0). A cache holds
 * one row per slot, qtype_row_bytes(type, kv_dim) bytes; element e of a row is
 * where quant.h's layout puts it, so a head starts at element kv_head * head_dim. */
typedef struct bk_attn {
    int n_heads, n_kv_heads, head_dim;
    int block_size;      /* tokens per KV block */
    float scale;         /* usually 1/sqrt(head_dim) */
    /* (zero-initialised, these are off) */
    int window;          /* > 0: sliding window, a row at position p sees keys p-window+1 .. p */
    float softcap;       /* > 0: scores become softcap * tanh(score / softcap) before the softmax */
    uint32_t kv_type;    /* element type of the caches (0 = QT_F32) */
    const float *sinks;  /* [n_heads] in backend memory, or NULL: a logit per head that joins the
                            softmax's denominator and no value (gpt-oss's attention sinks) */
} bk_attn;

/* The geometry of a gated delta-net layer (backend_ops.delta_net). */
typedef struct bk_delta {
    int n_k_heads, n_v_heads; /* n_v_heads a multiple of n_k_heads */
    int head_k, head_v;
    float eps;                /* q and k are divided by max(|x|, eps) */
} bk_delta;

/* The geometry of a Mamba2 layer (backend_ops.ssm_scan). */
typedef struct bk_ssm {
    int n_heads, head_dim, n_groups, d_state; /* n_heads a multiple of n_groups */
} bk_ssm;

/* Every op but destroy, alloc and free returns 0 or a negative code: a backend
 * that failed (a CUDA error, a weight type its matmul cannot take) says so at the
 * op, and the forward pass stops the step there with the op's name. The CPU ops
 * cannot fail on a batch that begin accepted, apart from matmul's type check. */
typedef struct backend_ops {
    void (*destroy)(void *ctx);
    /* Memory. weight_load may return a view of the (mmapped) tensor itself. */
    int (*weight_load)(void *ctx, const bk_tensor *t, bk_weight *out, llc_err *err);
    void *(*alloc)(void *ctx, size_t bytes); /* NULL when it does not fit */
    void (*free)(void *ctx, void *p);
    int (*to_host)(void *ctx, void *dst, const void *src, size_t bytes);
    int (*memset0)(void *ctx, void *p, size_t bytes);

    /* Per step. begin validates and keeps the batch; returns 0 or negative. */
    int (*begin)(void *ctx, const bk_batch *batch, llc_err *err);
    /* x[T, dim] = rows of `table` (n_out = vocab, n_in = dim) for the batch tokens. */
    int (*embed)(void *ctx, const bk_weight *table, float *x);
    /* out[r] = x[r] / rms(x[r]) * w, r < rows; out may equal x. */
    int (*rmsnorm)(void *ctx, const float *x, const bk_weight *w, float *out, int rows, int dim,
                    float eps);
    /* y[rows, w->n_out] = x[rows, w->n_in] · wᵀ */
    int (*matmul)(void *ctx, const bk_weight *w, const float *x, int rows, float *y);
    /* y[r] += b for each of rows rows (b: n_out = 1, n_in = row width) */
    int (*add_bias)(void *ctx, float *y, const bk_weight *b, int rows);
    /* Rotates x[T, n_heads * head_dim] in place by each row's position. */
    int (*rope)(void *ctx, float *x, int n_heads, int head_dim, const bk_rope *rp);
    /* Writes k, v [T, kv_dim] into the layer's caches (a row per slot, of kv_type
     * elements: see bk_attn) at the batch slots, converting from f32. */
    int (*kv_store)(void *ctx, void *k_cache, void *v_cache, const float *k, const float *v,
                     int kv_dim, uint32_t kv_type);
    /* out[T, n_heads*head_dim]: causal attention of each row over its sequence's KV
     * entries 0..position (or its window of them), read through the block table. */
    int (*attention)(void *ctx, const float *q, const void *k_cache, const void *v_cache,
                      float *out, const bk_attn *a);
    /* gate[i] = silu(gate[i]) * up[i] */
    int (*silu_mul)(void *ctx, float *gate, const float *up, size_t n);
    /* x[i] += y[i] */
    int (*add)(void *ctx, float *x, const float *y, size_t n);
    /* For each i < n: cache block dst[i] = block src[i] (block_bytes bytes each);
     * the copy-on-write copies of one step, done together before the forward. */
    int (*copy_blocks)(void *ctx, void *cache, const int32_t *src, const int32_t *dst, int n,
                        size_t block_bytes);
    /* out[k] = x[out_rows[k]] for the batch's output rows; rows are dim wide. */
    int (*gather_out_rows)(void *ctx, const float *x, int dim, float *out);

    /* x[i] *= s (gemma's embedding scale) */
    int (*scale)(void *ctx, float *x, float s, size_t n);
    /* gate[i] = gelu(gate[i]) * up[i], GELU in its tanh form:
     * 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) */
    int (*gelu_mul)(void *ctx, float *gate, const float *up, size_t n);
    /* gpt-oss's gate: with g = min(gate[i], limit) and u = clamp(up[i], -limit, limit),
     * gate[i] = g / (1 + e^(-alpha·g)) · (u + 1) */
    int (*swiglu_oai)(void *ctx, float *gate, const float *up, size_t n, float alpha, float limit);
    /* out[i] = x[rows[i]] for i < n (rows: host memory); rows are dim wide. */
    int (*gather_rows)(void *ctx, const float *x, int dim, const int32_t *rows, int n, float *out);
    /* x[rows[i]] += weights[i] * y[i] for i < n (rows, weights: host memory; rows
     * distinct within a call); rows are dim wide. Mixture-of-experts outputs. */
    int (*scatter_add_rows)(void *ctx, float *x, int dim, const int32_t *rows, const float *weights,
                             int n, const float *y);
    /* Optional (NULL: model.c makes n matmul calls). y[i][rows, w[i]->n_out] =
     * x[rows, n_in] · w[i]ᵀ for i < n (n <= BK_MATMUL_MULTI_MAX, every w[i]->n_in
     * the same, the y[i] apart): one input against several matrices (Q, K and V;
     * gate and up), each y[i] exactly what matmul(w[i]) gives. The CPU backend
     * prepares x once and runs all the matrices in one pool dispatch. */
    int (*matmul_multi)(void *ctx, const bk_weight *const *w, int n, const float *x, int rows,
                         float *const *y);
    /* Optional (NULL: every step runs op by op). Replaying whole steps, for backends
     * where launching each op costs more than the op (a GPU at decode). key names
     * everything that decides the step's sequence of ops and their arguments apart
     * from the batch's contents, which begin() uploads: model_forward hashes the
     * model, the KV cache, the activation buffers and the batch's shape into it.
     * Called after begin(); returns
     *   BK_GRAPH_NONE       run the ops as usual;
     *   BK_GRAPH_REPLAYED   the step was done by replaying what was recorded for
     *                       key: skip the ops, read the outputs with to_host;
     *   BK_GRAPH_RECORDING  run the ops (they are recorded, not yet done), then
     *                       call graph_end, which runs them; if graph_end fails
     *                       (e.g. an op could not be recorded), nothing was done:
     *                       run the ops again, as usual. */
    int (*graph_begin)(void *ctx, uint64_t key);
    int (*graph_end)(void *ctx);
    /* Optional (NULL: the engine copies whole rows of logits to the host). For
     * each of the rows rows of x (n wide, backend memory), ids and vals [r * k ..
     * r * k + k) (host memory) = topk_row's k best entries of the row
     * (kernels/topk.h: the sampler's order, NaN and -inf left out, -1 / -inf
     * past the last), k <= TOPK_MAX. A decode step of many sequences then moves
     * k entries per row instead of the vocabulary, and the sampler reads them. */
    int (*top_k)(void *ctx, const float *x, int rows, int n, int k, int32_t *ids, float *vals);

    /* ---- recurrent layers (hybrid models: lfm2, qwen35, granitehybrid) ----
     * Optional: a backend without them (NULL) cannot run those models, and
     * model_load refuses them on it with LLC_ERR_UNSUPPORTED (the caller falls
     * back to the CPU). A recurrent op walks each sequence of the batch given to
     * begin() (its rows seq_start[s] .. seq_start[s+1]-1, in order), reading and
     * writing that sequence's state: states[s] (host array of backend pointers,
     * one per sequence of the batch), so one call serves a varlen batch and a
     * sequence's result does not depend on the others in the step. */
    /* x[i] *= y[i] */
    int (*mul)(void *ctx, float *x, const float *y, size_t n);
    /* dst = src, bytes of backend memory (recurrent state copies: forks) */
    int (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    /* Causal depthwise convolution over time with a carried window: w is
     * [channels] rows of k taps (n_in = k, n_out = channels; tap k-1 meets the
     * current row), states[s] holds the sequence's previous k-1 input rows
     * ([k-1][channels], oldest first; zeros at its start). For each row r of x
     * [T, channels]: out[r][c] = sum_j w[c][j] * win_j[c] (+ b[c] where b is not
     * NULL), then SiLU when silu; the state then holds the last k-1 inputs. */
    int (*conv1d_state)(void *ctx, const float *x, int channels, const bk_weight *w, const bk_weight *b,
                         float *const *states, bool silu, float *out);
    /* x[i] *= sigmoid(g[i]) (gated attention's output gate) */
    int (*mul_sigmoid)(void *ctx, float *x, const float *g, size_t n);
    /* The gated delta rule (Qwen3.5's linear attention; bk_delta): for each row
     * and value head h (query/key head h % n_k_heads), with q and k L2-normed
     * (q then times 1/sqrt(head_k)), decay = exp(softplus(alpha + dt_bias[h]) ·
     * a[h]) and b = sigmoid(beta), the head's state S [head_v][head_k] becomes
     * decay·S, then S += b·(v - S·k) ⊗ k, and the output is S·q. qkv rows are
     * [q (n_k·head_k), k (n_k·head_k), v (n_v·head_v)]; alpha, beta [T, n_v];
     * dt_bias, a: F32 [n_v]; states[s]: [n_v][head_v][head_k]; out [T, n_v·head_v]. */
    int (*delta_net)(void *ctx, const float *qkv, const float *alpha, const float *beta, const bk_weight *dt_bias,
                      const bk_weight *a, float *const *states, const bk_delta *d, float *out);
    /* Mamba2's selective scan (bk_ssm): for each row and head h (group
     * h / (n_heads / n_groups)), with dt' = softplus(dt + dt_bias[h]) and
     * dA = exp(dt'·a[h]), the head's state S [head_dim][d_state] becomes
     * dA·S + (dt'·x) ⊗ B, and the output is S·C + d[h]·x. xbc rows are
     * [x (n_heads·head_dim), B (n_groups·d_state), C (n_groups·d_state)]; dt
     * [T, n_heads]; dt_bias, a, d: F32 [n_heads]; states[s]: [n_heads][head_dim]
     * [d_state]; out [T, n_heads·head_dim]. */
    int (*ssm_scan)(void *ctx, const float *xbc, const float *dt, const bk_weight *dt_bias, const bk_weight *a,
                     const bk_weight *d, float *const *states, const bk_ssm *g, float *out);
    /* x[r] (rows of dim) RMS-normed over each of n_groups equal slices, times
     * w [dim] (F32), in place (Mamba2's grouped norm) */
    int (*rmsnorm_groups)(void *ctx, float *x, const bk_weight *w, int rows, int dim, int n_groups, float eps);
} backend_ops;

enum { BK_GRAPH_NONE = 0, BK_GRAPH_REPLAYED = 1, BK_GRAPH_RECORDING = 2 };

#define BK_MATMUL_MULTI_MAX 8

typedef struct backend {
    const char *name; /* "cpu", "cuda" */
    const backend_ops *ops;
    void *ctx;
} backend;

/* The CPU backend; n_threads <= 0 means one per core. */
int backend_cpu_create(int n_threads, backend **out, llc_err *err);

/* The CPU backend's settings; zeroed = backend_cpu_create's defaults. */
typedef struct backend_cpu_opts {
    int n_threads;      /* <= 0: one per core */
    bool no_prepack;    /* no packed copies of quantized weights (otherwise up to an
                           eighth of the RAM: worth it for batched decoding, not for
                           a short run) */
    bool keep_mapped;   /* read weights in place from the file mapping instead of
                           copying them into huge pages (a faster start, slower tokens) */
} backend_cpu_opts;
int backend_cpu_create_opts(const backend_cpu_opts *o, backend **out, llc_err *err);
void backend_free(backend *b);

#endif
