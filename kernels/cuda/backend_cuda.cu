/* backend_cuda.cu — the CUDA backend: the op table of kernels/backend.h on one GPU.
 *
 * This file owns the context (stream, cuBLAS handle, scratch), memory (weights
 * uploaded once in the layouts of weights.cu; activations, KV and scratch as
 * plain cudaMalloc'd device memory), the step's batch (every index array in one
 * pinned buffer and one copy per step), recorded steps (CUDA graphs: a decode
 * step whose key was seen before is captured once and then replayed with one
 * launch), per-op GPU timing (LLC_CUDA_PROFILE=1, a table on stderr when the
 * backend is freed), the device check and the memory bandwidth probe. The
 * kernels are in the files cuda_internal.h lists.
 *
 * Every CUDA and cuBLAS call is checked; the first failure is kept and reported
 * by every later op and by the next begin(). All work goes to one stream;
 * to_host synchronizes. Environment: LLC_CUDA_GRAPHS=0 turns recorded steps off,
 * LLC_CUDA_PROFILE=1 times every op (and turns recorded steps off); for side by
 * side comparisons LLC_CUDA_ATTN=rows takes the first attention kernel and
 * LLC_CUDA_INT8=0 keeps Q8_0/Q4_0 GEMVs in F32 activations. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_internal.h"

extern "C" {
#include "kernels/cuda/backend_cuda.h"
#include "kernels/fault.h"
#include "kernels/topk.h"
}

void cuda_fail(cuda_ctx *c, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

static cuda_ctx *C(void *p) { return (cuda_ctx *)p; }
/* What an op returns: the backend's first failure (kept until begin reports it
 * again), or 0. Work is asynchronous: a kernel's own fault shows at a later sync. */
static int cu_status(void *p) { return C(p)->failed ? LLC_ERR_IO : 0; }

/* ---- per-op GPU time (LLC_CUDA_PROFILE=1) ---- */

enum {
    PK_EMBED, PK_RMSNORM, PK_ADD_BIAS, PK_ROPE, PK_KV_STORE, PK_ATTENTION, PK_SILU_MUL, PK_ADD,
    PK_COPY_BLOCKS, PK_GATHER_OUT, PK_SCALE, PK_GELU_MUL, PK_GATHER_ROWS, PK_SCATTER_ADD, PK_SWIGLU_OAI, PK_TOP_K,
    PK_MATMUL,
};
static const char *const g_pk_names[] = {"embed", "rmsnorm", "add_bias", "rope", "kv_store", "attention", "silu_mul",
                                         "add", "copy_blocks", "gather_out_rows", "scale", "gelu_mul", "gather_rows",
                                         "scatter_add_rows", "swiglu_oai", "top_k"};
#define PK_ROW_BUCKETS 4 /* matmul rows: 1, 2-8, 9-64, 65+ */
#define PK_COUNT (PK_MATMUL + QT_COUNT * PK_ROW_BUCKETS)
#define PROF_PENDING 4096

struct cuda_profile {
    cudaEvent_t ev[2 * PROF_PENDING];
    int kind[PROF_PENDING];
    double bytes[PROF_PENDING];
    int n_pending;
    double ms[PK_COUNT], weight_bytes[PK_COUNT];
    long calls[PK_COUNT];
    long steps;
    /* host clock: each step from begin to its last copy to the host (the
     * forward as the engine waits for it), and the copies to the host alone */
    double t_begin, t_last_copy, forward_ms, copy_ms, copy_bytes;
    long copies;
};

static double host_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
/* a step begins: the last one's forward into the total */
static void prof_step(cuda_profile *p) {
    if (p->t_last_copy > p->t_begin && p->t_begin > 0) p->forward_ms += p->t_last_copy - p->t_begin;
    p->t_begin = host_ms();
    p->steps++;
}

static int matmul_kind(uint32_t type, int rows) {
    const int bucket = rows <= 1 ? 0 : rows <= 8 ? 1 : rows <= 64 ? 2 : 3;
    return PK_MATMUL + (int)(type < QT_COUNT ? type : 0) * PK_ROW_BUCKETS + bucket;
}

/* Brackets one op; `bytes`: weight bytes it reads (matmuls), for GB/s. */
static int prof_begin(cuda_ctx *c) {
    cuda_profile *p = c->prof;
    if (!p || p->n_pending >= PROF_PENDING) return -1;
    cudaEventRecord(p->ev[2 * p->n_pending], c->stream);
    return p->n_pending;
}
static void prof_end(cuda_ctx *c, int slot, int kind, double bytes) {
    cuda_profile *p = c->prof;
    if (!p || slot < 0) return;
    cudaEventRecord(p->ev[2 * slot + 1], c->stream);
    p->kind[slot] = kind;
    p->bytes[slot] = bytes;
    p->n_pending = slot + 1;
}
/* After a synchronization: the pending ops' times into the totals. */
static void prof_collect(cuda_ctx *c) {
    cuda_profile *p = c->prof;
    if (!p) return;
    for (int i = 0; i < p->n_pending; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        p->ms[p->kind[i]] += ms;
        p->weight_bytes[p->kind[i]] += p->bytes[i];
        p->calls[p->kind[i]]++;
    }
    p->n_pending = 0;
}

/* Around a step's copies to the host. begin: with the profile on, the step's
 * kernels are waited for first, so the copies' time is their own; the host
 * clock. end (after the copies synchronized): their time and bytes into the
 * profile, the step's op times collected. */
static double prof_copies_begin(cuda_ctx *c) {
    if (!c->prof) return 0;
    CK(c, cudaStreamSynchronize(c->stream));
    return host_ms();
}
static void prof_copies_end(cuda_ctx *c, double t0, size_t bytes) {
    cuda_profile *p = c->prof;
    if (!p) return;
    p->t_last_copy = host_ms();
    p->copy_ms += p->t_last_copy - t0, p->copy_bytes += (double)bytes, p->copies++;
    prof_collect(c);
}

static void prof_print(cuda_ctx *c) {
    cuda_profile *p = c->prof;
    double total = 0;
    for (int k = 0; k < PK_COUNT; k++) total += p->ms[k];
    prof_step(p); /* (the last step's forward) */
    p->steps--;
    fprintf(stderr, "CUDA profile (LLC_CUDA_PROFILE=1): GPU time per op, %ld steps, %.1f ms in all\n", p->steps, total);
    fprintf(stderr, "  host clock: forwards %.1f ms (begin to last copy out), of it %ld copies to the host %.1f ms "
            "(%.1f MB)\n", p->forward_ms, p->copies, p->copy_ms, p->copy_bytes / 1e6);
    fprintf(stderr, "  %-26s %9s %11s %9s %6s %9s\n", "op", "calls", "total ms", "avg us", "share", "GB/s");
    static const char *const buckets[] = {"x1", "x2-8", "x9-64", "x65+"};
    for (int k = 0; k < PK_COUNT; k++) {
        if (!p->calls[k]) continue;
        char name[64];
        if (k < PK_MATMUL) snprintf(name, sizeof name, "%s", g_pk_names[k]);
        else snprintf(name, sizeof name, "matmul %s %s", qtype_name((uint32_t)((k - PK_MATMUL) / PK_ROW_BUCKETS)),
                      buckets[(k - PK_MATMUL) % PK_ROW_BUCKETS]);
        char gbs[16] = "";
        if (p->weight_bytes[k] > 0 && p->ms[k] > 0) snprintf(gbs, sizeof gbs, "%.0f", p->weight_bytes[k] / (p->ms[k] * 1e6));
        fprintf(stderr, "  %-26s %9ld %11.2f %9.1f %5.1f%% %9s\n", name, p->calls[k], p->ms[k],
                1000.0 * p->ms[k] / (double)p->calls[k], total > 0 ? 100.0 * p->ms[k] / total : 0, gbs);
    }
}

#define PROFILED(c, kind, bytes, body)        \
    do {                                      \
        const int slot_ = prof_begin(c);      \
        body;                                 \
        prof_end(c, slot_, (kind), (bytes));  \
    } while (0)

/* ---- recorded steps (CUDA graphs) ---- */

#define GRAPH_CACHE 24    /* recorded steps kept (least recently used out) */
#define GRAPH_SEEN 64     /* keys seen once: a key is recorded the second time */
#define GRAPH_MAX_ROWS 64 /* longer steps spend their time in kernels, not launches */

struct graph_entry {
    uint64_t key;
    cudaGraphExec_t exec;
    unsigned long last_use;
};

struct cuda_graphs {
    bool off;
    graph_entry e[GRAPH_CACHE];
    uint64_t seen[GRAPH_SEEN];
    unsigned n_seen;
    unsigned long tick;
    uint64_t recording; /* key being captured, or 0 */
    unsigned long replays, recorded;
};

static uint64_t full_key(const cuda_ctx *c, uint64_t key) {
    /* the batch arrays and scratch are baked into recorded kernels: their moves count */
    uint64_t k = key ^ (c->layout_epoch * 0x9E3779B97F4A7C15ull);
    return k ? k : 1;
}

static int cu_graph_begin(void *p, uint64_t key) {
    cuda_ctx *c = C(p);
    cuda_graphs *g = c->graphs;
    if (!g || g->off || c->failed || c->T > GRAPH_MAX_ROWS) return BK_GRAPH_NONE;
    const uint64_t k = full_key(c, key);
    g->tick++;
    for (int i = 0; i < GRAPH_CACHE; i++)
        if (g->e[i].exec && g->e[i].key == k) {
            g->e[i].last_use = g->tick;
            CK(c, cudaGraphLaunch(g->e[i].exec, c->stream));
            g->replays++;
            return BK_GRAPH_REPLAYED;
        }
    bool seen = false;
    for (unsigned i = 0; i < GRAPH_SEEN && !seen; i++) seen = g->seen[i] == k;
    if (!seen) { /* the first time runs as usual (and grows any buffer it needs) */
        g->seen[g->n_seen++ % GRAPH_SEEN] = k;
        return BK_GRAPH_NONE;
    }
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        g->off = true;
        return BK_GRAPH_NONE;
    }
    g->recording = k;
    return BK_GRAPH_RECORDING;
}

static int cu_graph_end(void *p) {
    cuda_ctx *c = C(p);
    cuda_graphs *g = c->graphs;
    if (!g || !g->recording) {
        cuda_fail(c, "CUDA: graph_end without a recording step");
        return LLC_ERR_IO;
    }
    const uint64_t k = g->recording;
    g->recording = 0;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
    if (e == cudaSuccess && !c->failed) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess || c->failed) {
        g->off = true; /* this GPU or this step cannot be recorded: never again */
        cuda_fail(c, "CUDA: recording a step failed (%s); LLC_CUDA_GRAPHS=0 runs without", cudaGetErrorString(e));
        if (exec) cudaGraphExecDestroy(exec);
        return LLC_ERR_IO;
    }
    int slot = 0; /* a free entry, else the least recently used */
    for (int i = 0; i < GRAPH_CACHE; i++) {
        if (!g->e[i].exec) {
            slot = i;
            break;
        }
        if (g->e[i].last_use < g->e[slot].last_use) slot = i;
    }
    if (g->e[slot].exec) cudaGraphExecDestroy(g->e[slot].exec);
    const graph_entry fresh = {k, exec, g->tick};
    g->e[slot] = fresh;
    g->recorded++;
    CK(c, cudaGraphLaunch(exec, c->stream));
    return cu_status(p);
}

static void graphs_free(cuda_graphs *g) {
    if (!g) return;
    for (int i = 0; i < GRAPH_CACHE; i++)
        if (g->e[i].exec) cudaGraphExecDestroy(g->e[i].exec);
    free(g);
}

/* ---- memory ---- */

static void cu_destroy(void *p) {
    cuda_ctx *c = C(p);
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->prof) {
        prof_collect(c);
        prof_print(c);
        for (int i = 0; i < 2 * PROF_PENDING; i++) cudaEventDestroy(c->prof->ev[i]);
        free(c->prof);
    }
    if (c->graphs && getenv("LLC_CUDA_GRAPH_STATS"))
        fprintf(stderr, "CUDA graphs: %lu steps recorded, %lu replayed\n", c->graphs->recorded, c->graphs->replays);
    graphs_free(c->graphs);
    dints *all[] = {&c->copy, &c->rows, &c->mix};
    for (dints *d : all) cudaFree(d->p);
    cudaFree(c->batch.dev);
    cudaFreeHost(c->batch.host);
    if (c->batch_copied) cudaEventDestroy(c->batch_copied);
    cuda_f16_copies_free(c);
    cudaFree(c->scratch), cudaFree(c->d_freq), cudaFree(c->d_scale), cudaFree(c->blas_workspace);
    cudaFree(c->topk_buf);
    for (int i = 0; i < c->n_weights; i++) cudaFree(c->weights[i]);
    free(c->weights);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

static int cu_weight_load(void *p, const bk_tensor *t, bk_weight *out, llc_err *err) {
    cuda_ctx *c = C(p);
    const qtype_info *qi = qtype_get(t->type);
    if (!qi || !qi->supported || !cuda_weight_type_ok(t->type))
        return llc_fail(err, LLC_ERR_UNSUPPORTED, "tensor '%s' has type %s, which the CUDA backend does not support",
                        t->name, qtype_name(t->type));
    const size_t gpu_rb = cuda_row_bytes(t->type, t->n_in), file_rb = qtype_row_bytes(t->type, t->n_in);
    if (!gpu_rb || file_rb * (size_t)t->n_out != t->n_bytes)
        return llc_fail(err, LLC_ERR_FORMAT, "tensor '%s': %lld x %lld of %s is not %zu bytes", t->name,
                        (long long)t->n_out, (long long)t->n_in, qtype_name(t->type), t->n_bytes);
    const size_t bytes = gpu_rb * (size_t)t->n_out;
    const void *src = t->data;
    uint8_t *relaid = NULL;
    if (gpu_rb != file_rb || t->type == QT_Q8_0 || t->type == QT_Q4_0 || t->type == QT_Q6_K) {
        relaid = (uint8_t *)malloc(bytes ? bytes : 1);
        if (!relaid) return llc_fail(err, LLC_ERR_NOMEM, "out of memory re-laying '%s' for the GPU", t->name);
        cuda_relayout_rows(t->type, (const uint8_t *)t->data, t->n_in, t->n_out, relaid);
        src = relaid;
    }
    void *d = NULL;
    cudaError_t e = cudaMalloc(&d, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        free(relaid);
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        return llc_fail(err, LLC_ERR_NOMEM, "the model does not fit on the GPU: tensor '%s' needs %.1f MB, %.1f MB free of %.1f MB",
                        t->name, bytes / 1e6, free_b / 1e6, total / 1e6);
    }
    e = cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice);
    free(relaid);
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
    out->aux = NULL;
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
/* (a weight_load allocation freed early leaves the list, so destroy does not
 * free it twice) */
static void cu_free(void *p, void *d) {
    cuda_ctx *c = C(p);
    for (int i = 0; d && i < c->n_weights; i++)
        if (c->weights[i] == d) {
            c->weights[i] = c->weights[--c->n_weights];
            /* a weight's F16 copies go with it (and its experts' views'): an address
             * used again must not find an old copy; the rest are made again */
            cuda_f16_copies_free(c);
            break;
        }
    cudaFree(d);
}

static int cu_to_host(void *p, void *dst, const void *src, size_t bytes) {
    cuda_ctx *c = C(p);
    if (c->graphs && c->graphs->recording) {
        cuda_fail(c, "CUDA: a copy to the host inside a recorded step");
        return cu_status(p);
    }
    const double t0 = prof_copies_begin(c);
    CK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CK(c, cudaStreamSynchronize(c->stream));
    prof_copies_end(c, t0, bytes);
    return cu_status(p);
}

static int cu_top_k(void *p, const float *x, int rows, int n, int k, int32_t *ids, float *vals) {
    cuda_ctx *c = C(p);
    if (k < 1 || k > TOPK_MAX || n < 1 || rows < 0) return LLC_ERR_RANGE;
    if (c->graphs && c->graphs->recording) {
        cuda_fail(c, "CUDA: top_k inside a recorded step");
        return cu_status(p);
    }
    const size_t half = (size_t)rows * k * sizeof(int32_t), need = 2 * half;
    if (need > c->cap_topk) {
        cudaFree(c->topk_buf);
        c->topk_buf = NULL, c->cap_topk = 0;
        CK(c, cudaMalloc(&c->topk_buf, need));
        if (c->failed) return cu_status(p);
        c->cap_topk = need;
    }
    int32_t *d_ids = (int32_t *)c->topk_buf;
    float *d_vals = (float *)((uint8_t *)c->topk_buf + half);
    PROFILED(c, PK_TOP_K, 0, cuda_top_k(c, x, rows, n, k, d_ids, d_vals));
    const double t0 = prof_copies_begin(c);
    CK(c, cudaMemcpyAsync(ids, d_ids, half, cudaMemcpyDeviceToHost, c->stream));
    CK(c, cudaMemcpyAsync(vals, d_vals, half, cudaMemcpyDeviceToHost, c->stream));
    CK(c, cudaStreamSynchronize(c->stream));
    prof_copies_end(c, t0, need);
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
        cudaGetLastError();
        cuda_fail(c, "CUDA: out of device memory for the batch");
        return false;
    }
    d->cap = m;
    c->layout_epoch++;
    return true;
}

/* Copies n host ints into d (grown as needed); synchronous, for the few arrays a
 * step uploads besides its batch (gather rows, block copies). */
bool cuda_upload_ints(cuda_ctx *c, dints *d, const int32_t *src, size_t n) {
    if (!ensure_ints(c, d, n ? n : 1)) return false;
    if (n) CK(c, cudaMemcpy(d->p, src, n * sizeof(int), cudaMemcpyHostToDevice));
    return !c->failed;
}

void *cuda_scratch(cuda_ctx *c, size_t bytes) {
    if (bytes <= c->cap_scratch) return c->scratch;
    cudaFree(c->scratch);
    c->scratch = NULL;
    c->cap_scratch = 0;
    c->layout_epoch++;
    if (cudaMalloc(&c->scratch, bytes) != cudaSuccess) {
        cudaGetLastError();
        cuda_fail(c, "CUDA: out of device memory for %.1f MB of scratch", bytes / 1e6);
        return NULL;
    }
    c->cap_scratch = bytes;
    return c->scratch;
}

/* ---- the step's batch ---- */

static int cu_begin(void *p, const bk_batch *b, llc_err *err) {
    cuda_ctx *c = C(p);
    if (c->failed) return llc_fail(err, LLC_ERR_IO, "%s", c->err); /* a previous step failed */
    if (b->n_seqs < 0 || b->seq_start[0] != 0 || b->seq_start[b->n_seqs] != b->n_tokens)
        return llc_fail(err, LLC_ERR_RANGE, "malformed batch: rows do not add up");
    for (int s = 0; s < b->n_seqs; s++)
        if (b->seq_start[s] > b->seq_start[s + 1] || b->kv_len[s] < 0)
            return llc_fail(err, LLC_ERR_RANGE, "malformed batch: sequence %d", s);
    const size_t T = (size_t)b->n_tokens, S = (size_t)b->n_seqs, tab = S * (size_t)b->max_blocks;
    const size_t n_out = (size_t)b->n_out;
    /* one array: tokens, pos, slots, row_seq [T] | seq_start [S+1] | kv_len [S] | table | out_rows */
    const size_t need = 4 * T + (S + 1) + S + tab + n_out;
    if (c->batch_copied) CK(c, cudaEventSynchronize(c->batch_copied)); /* the last copy read the host buffer */
    if (need > c->batch.cap) {
        cudaFree(c->batch.dev);
        cudaFreeHost(c->batch.host);
        c->batch.dev = c->batch.host = NULL;
        c->batch.cap = 0;
        c->layout_epoch++;
        const size_t cap = need < 1024 ? 1024 : 2 * need;
        if (cudaMalloc((void **)&c->batch.dev, cap * sizeof(int)) != cudaSuccess ||
            cudaMallocHost((void **)&c->batch.host, cap * sizeof(int)) != cudaSuccess) {
            cudaGetLastError();
            return llc_fail(err, LLC_ERR_NOMEM, "CUDA: out of memory for a batch of %zu rows", T);
        }
        c->batch.cap = cap;
    }
    int *h = c->batch.host, *d = c->batch.dev;
    memcpy(h, b->tokens, T * sizeof(int));
    memcpy(h + T, b->positions, T * sizeof(int));
    memcpy(h + 2 * T, b->slots, T * sizeof(int));
    for (size_t s = 0; s < S; s++)
        for (int r = b->seq_start[s]; r < b->seq_start[s + 1]; r++) h[3 * T + (size_t)r] = (int)s;
    memcpy(h + 4 * T, b->seq_start, (S + 1) * sizeof(int));
    memcpy(h + 4 * T + S + 1, b->kv_len, S * sizeof(int));
    if (tab) memcpy(h + 4 * T + 2 * S + 1, b->block_table, tab * sizeof(int));
    if (n_out) memcpy(h + 4 * T + 2 * S + 1 + tab, b->out_rows, n_out * sizeof(int));
    CK(c, cudaMemcpyAsync(d, h, need * sizeof(int), cudaMemcpyHostToDevice, c->stream));
    CK(c, cudaEventRecord(c->batch_copied, c->stream));
    c->tokens = d, c->pos = d + T, c->slots = d + 2 * T, c->row_seq = d + 3 * T;
    c->seq_start = d + 4 * T, c->kv_len = d + 4 * T + S + 1, c->table = d + 4 * T + 2 * S + 1;
    c->out_rows = d + 4 * T + 2 * S + 1 + tab;
    c->T = b->n_tokens, c->n_seqs = b->n_seqs, c->max_blocks = b->max_blocks, c->n_out = b->n_out;
    if (c->prof) prof_step(c->prof);
    if (c->failed) return llc_fail(err, LLC_ERR_IO, "%s", c->err);
    return 0;
}

/* ---- the ops ---- */

static int cu_embed(void *p, const bk_weight *table, float *x) {
    cuda_ctx *c = C(p);
    if (c->T) PROFILED(c, PK_EMBED, 0, cuda_embed(c, table, x));
    return cu_status(p);
}

static int cu_rmsnorm(void *p, const float *x, const bk_weight *w, float *out, int rows, int dim, float eps) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_RMSNORM, 0, cuda_rmsnorm(c, x, (const float *)w->data, out, rows, dim, eps));
    return cu_status(p);
}

static int cu_matmul(void *p, const bk_weight *w, const float *x, int rows, float *y) {
    cuda_ctx *c = C(p);
    const double bytes = (double)cuda_row_bytes(w->type, w->n_in) * (double)w->n_out;
    PROFILED(c, matmul_kind(w->type, rows), bytes, cuda_matmul(c, w, x, rows, y));
    return cu_status(p);
}

static int cu_matmul_multi(void *p, const bk_weight *const *w, int n, const float *x, int rows, float *const *y) {
    cuda_ctx *c = C(p);
    double bytes = 0;
    for (int i = 0; i < n; i++) bytes += (double)cuda_row_bytes(w[i]->type, w[i]->n_in) * (double)w[i]->n_out;
    PROFILED(c, matmul_kind(w[0]->type, rows), bytes, cuda_matmul_multi(c, w, n, x, rows, y));
    return cu_status(p);
}

static int cu_add_bias(void *p, float *y, const bk_weight *b, int rows) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_ADD_BIAS, 0, cuda_add_bias(c, y, (const float *)b->data, b->n_in, rows));
    return cu_status(p);
}

static int cu_rope(void *p, float *x, int n_heads, int head_dim, const bk_rope *rp) {
    cuda_ctx *c = C(p);
    const float *factors = NULL;
    if (rp->freq_factors) { /* uploaded once per factor table (a recorded step finds it there) */
        if (c->h_freq != rp->freq_factors || c->n_freq != rp->n_rot / 2) {
            cudaFree(c->d_freq);
            c->d_freq = NULL;
            c->layout_epoch++;
            CK(c, cudaMalloc((void **)&c->d_freq, (size_t)(rp->n_rot / 2) * sizeof(float)));
            if (c->d_freq)
                CK(c, cudaMemcpy(c->d_freq, rp->freq_factors, (size_t)(rp->n_rot / 2) * sizeof(float), cudaMemcpyHostToDevice));
            c->h_freq = rp->freq_factors;
            c->n_freq = rp->n_rot / 2;
        }
        factors = c->d_freq;
    }
    PROFILED(c, PK_ROPE, 0, cuda_rope(c, x, n_heads, head_dim, rp, factors));
    return cu_status(p);
}

static int cu_kv_store(void *p, void *kc, void *vc, const float *k, const float *v, int kv_dim, uint32_t kv_type) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_KV_STORE, 0, cuda_kv_store(c, kc, vc, k, v, kv_dim, kv_type));
    return cu_status(p);
}

static int cu_attention(void *p, const float *q, const void *kc, const void *vc, float *out, const bk_attn *a) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_ATTENTION, 0, cuda_attention(c, q, kc, vc, out, a));
    return cu_status(p);
}

static int cu_silu_mul(void *p, float *g, const float *u, size_t n) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_SILU_MUL, 0, cuda_silu_mul(c, g, u, n));
    return cu_status(p);
}

static int cu_add(void *p, float *x, const float *y, size_t n) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_ADD, 0, cuda_add(c, x, y, n));
    return cu_status(p);
}

static int cu_copy_blocks(void *p, void *cache, const int32_t *src, const int32_t *dst, int n, size_t block_bytes) {
    cuda_ctx *c = C(p);
    if (n <= 0 || !ensure_ints(c, &c->copy, 2 * (size_t)n)) return cu_status(p);
    CK(c, cudaMemcpy(c->copy.p, src, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
    CK(c, cudaMemcpy(c->copy.p + n, dst, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
    PROFILED(c, PK_COPY_BLOCKS, 0, cuda_copy_blocks(c, cache, c->copy.p, c->copy.p + n, n, block_bytes));
    return cu_status(p);
}

static int cu_gather_out_rows(void *p, const float *x, int dim, float *out) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_GATHER_OUT, 0, cuda_gather_rows(c, x, dim, c->out_rows, c->n_out, out));
    return cu_status(p);
}

static int cu_scale(void *p, float *x, float sc, size_t n) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_SCALE, 0, cuda_scale(c, x, sc, n));
    return cu_status(p);
}

static int cu_gelu_mul(void *p, float *g, const float *u, size_t n) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_GELU_MUL, 0, cuda_gelu_mul(c, g, u, n));
    return cu_status(p);
}

static int cu_swiglu_oai(void *p, float *g, const float *u, size_t n, float alpha, float limit) {
    cuda_ctx *c = C(p);
    PROFILED(c, PK_SWIGLU_OAI, 0, cuda_swiglu_oai(c, g, u, n, alpha, limit));
    return cu_status(p);
}

static int cu_gather_rows(void *p, const float *x, int dim, const int32_t *rows, int n, float *out) {
    cuda_ctx *c = C(p);
    if (n <= 0 || !cuda_upload_ints(c, &c->rows, rows, (size_t)n)) return cu_status(p);
    PROFILED(c, PK_GATHER_ROWS, 0, cuda_gather_rows(c, x, dim, c->rows.p, n, out));
    return cu_status(p);
}

static int cu_scatter_add_rows(void *p, float *x, int dim, const int32_t *rows, const float *weights, int n,
                               const float *y) {
    cuda_ctx *c = C(p);
    if (n <= 0 || !cuda_upload_ints(c, &c->rows, rows, (size_t)n) ||
        !cuda_upload_ints(c, &c->mix, (const int32_t *)(const void *)weights, (size_t)n)) /* float bits */
        return cu_status(p);
    PROFILED(c, PK_SCATTER_ADD, 0,
             cuda_scatter_add_rows(c, x, dim, c->rows.p, (const float *)(void *)c->mix.p, n, y));
    return cu_status(p);
}

/* The op table, filled by field name (C++17 has no designated initializers). */
static backend_ops cuda_ops(void) {
    backend_ops o = {};
    o.destroy = cu_destroy;
    o.weight_load = cu_weight_load;
    o.alloc = cu_alloc;
    o.free = cu_free;
    o.to_host = cu_to_host;
    o.top_k = cu_top_k;
    o.memset0 = cu_memset0;
    o.begin = cu_begin;
    o.embed = cu_embed;
    o.rmsnorm = cu_rmsnorm;
    o.matmul = cu_matmul;
    o.matmul_multi = cu_matmul_multi;
    o.add_bias = cu_add_bias;
    o.rope = cu_rope;
    o.kv_store = cu_kv_store;
    o.attention = cu_attention;
    o.silu_mul = cu_silu_mul;
    o.add = cu_add;
    o.copy_blocks = cu_copy_blocks;
    o.gather_out_rows = cu_gather_out_rows;
    o.scale = cu_scale;
    o.gelu_mul = cu_gelu_mul;
    o.swiglu_oai = cu_swiglu_oai;
    o.gather_rows = cu_gather_rows;
    o.scatter_add_rows = cu_scatter_add_rows;
    o.graph_begin = cu_graph_begin;
    o.graph_end = cu_graph_end;
    return o;
}
static const backend_ops g_cuda_ops = cuda_ops();

/* ---- the device ---- */

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

extern "C" int backend_cuda_unusable_reason(char *why, size_t why_len) { return check_device(0, why, why_len); }

static bool env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

extern "C" int backend_cuda_create(int device, backend **out, llc_err *err) {
    *out = NULL;
    char why[256];
    int rc = check_device(device, why, sizeof why);
    if (rc) return llc_fail(err, rc, "%s", why);
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    backend *b = (backend *)calloc(1, sizeof *b);
    if (!c || !b) {
        free(c), free(b);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    c->device = device;
    const size_t blas_ws = 32u << 20;
    cudaError_t e;
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaStreamCreate(&c->stream)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&c->batch_copied, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaMalloc((void **)&c->d_scale, 3 * sizeof(float))) != cudaSuccess ||
        (e = cudaMalloc(&c->blas_workspace, blas_ws)) != cudaSuccess) {
        cudaGetLastError();
        cu_destroy(c), free(b);
        return llc_fail(err, LLC_ERR_IO, "CUDA: %s", cudaGetErrorString(e));
    }
    if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        cu_destroy(c), free(b);
        return llc_fail(err, LLC_ERR_IO, "cuBLAS could not start");
    }
    /* one stream, one fixed workspace: cuBLAS calls can then be captured in graphs */
    if (cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(c->blas, c->blas_workspace, blas_ws) != CUBLAS_STATUS_SUCCESS) {
        cu_destroy(c), free(b);
        return llc_fail(err, LLC_ERR_IO, "cuBLAS could not be set up");
    }
    cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH);
    if (env_is("LLC_CUDA_PROFILE", "1")) {
        c->prof = (cuda_profile *)calloc(1, sizeof *c->prof);
        for (int i = 0; c->prof && i < 2 * PROF_PENDING; i++) cudaEventCreate(&c->prof->ev[i]);
    }
    c->attn_by_rows = env_is("LLC_CUDA_ATTN", "rows");
    c->attn_no_split = env_is("LLC_CUDA_ATTN", "nosplit");
    c->no_multi = env_is("LLC_CUDA_MULTI", "0");
    c->f16_off = env_is("LLC_CUDA_F16_CACHE", "0");
    c->float_act = env_is("LLC_CUDA_INT8", "0");
    c->gemv_rows = env_is("LLC_CUDA_GEMV_ROWS", "1") ? 1 : 0;
    if (!env_is("LLC_CUDA_GRAPHS", "0") && !c->prof) c->graphs = (cuda_graphs *)calloc(1, sizeof *c->graphs);
    b->name = "cuda";
    b->ops = &g_cuda_ops;
    b->ctx = c;
    *out = b;
    return 0;
}

extern "C" double backend_cuda_read_bandwidth(backend *b, size_t bytes) {
    if (!b || strcmp(b->name, "cuda")) return 0;
    cuda_ctx *c = C(b->ctx);
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    if (bytes > free_b / 2) bytes = free_b / 2;
    bytes &= ~(size_t)15;
    return bytes ? cuda_read_bandwidth(c, bytes, 5) : 0;
}

extern "C" void backend_cuda_graph_stats(backend *b, unsigned long *recorded, unsigned long *replayed) {
    *recorded = *replayed = 0;
    if (!b || strcmp(b->name, "cuda") || !C(b->ctx)->graphs) return;
    *recorded = C(b->ctx)->graphs->recorded;
    *replayed = C(b->ctx)->graphs->replays;
}
