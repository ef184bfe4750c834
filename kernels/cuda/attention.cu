/* attention.cu — the paged KV cache on the GPU: storing each step's K and V rows
 * (f32, f16 or q8_0, as kernels/quant.h lays them out) at the batch's slots, and
 * causal attention of each row over its sequence's keys read through the block
 * table (sliding windows and soft-capping included). Steps of a few rows
 * (decode) split each row's keys into chunks taken by separate blocks, merged
 * by a second kernel in chunk order (flash-decoding), so a step of one row and
 * eight KV heads still fills the GPU. */
#include <string.h>

#include "kernels/cuda/cuda_internal.h"

__device__ __forceinline__ float ld_f16(const uint8_t *p) {
    __half h;
    memcpy(&h, p, 2);
    return __half2float(h);
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
                            int window, float softcap, const float *sinks) {
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
    float corr = 1.0f;
    if (sinks && sinks[h] > m) { /* the sink joins the denominator, rescaled to its maximum */
        corr = __expf(m - sinks[h]);
        l = l * corr + 1.0f;
    } else if (sinks) {
        l += __expf(sinks[h] - m);
    }
    float inv = l > 0 ? corr / l : 0;
#pragma unroll
    for (int a = 0; a < 4; a++) {
        int d = threadIdx.x + a * blockDim.x;
        if (d < head_dim) out[((size_t)r * n_heads + h) * head_dim + d] = acc[a] * inv;
    }
}


/* ---- attention by key-value head: the kernel every row takes ----
 *
 * One block per (row, KV head, group of HB query heads sharing it): each K and V
 * row is read once for the HB heads. W warps take tiles of 32 keys in turn (warp
 * w: tiles w, w+W, ...); in a tile lane j scores key j against the HB query heads
 * (from shared memory), the warp runs the online softmax, then the lanes, each
 * owning DPL of the head's dimensions, add the keys' values in key order, eight
 * keys' loads in flight at a time. The warps' partial results are merged in warp
 * order, so a row's output depends only on its own keys and the model's shape:
 * the same in any batch. DFIX is the head size when known at compile time (64,
 * 128, 256: unrolled loops), else 0 and D is read at run time. */

/* 8 elements e..e+7 of a cache row (e a multiple of 8) */
template <int KT> __device__ __forceinline__ void kv_load8(const uint8_t *row, int e, float *out) {
    if (KT == QT_F16) {
        const uint4 v = *(const uint4 *)(row + 2 * (size_t)e);
        const __half2 *h = (const __half2 *)&v;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = __half22float2(h[i]);
            out[2 * i] = f.x, out[2 * i + 1] = f.y;
        }
    } else if (KT == QT_F32) {
        const float4 a = *(const float4 *)(row + 4 * (size_t)e), b = *(const float4 *)(row + 4 * (size_t)e + 16);
        out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    } else {
        const uint8_t *b = row + (size_t)(e / 32) * 34;
        const float d = ld_f16(b);
#pragma unroll
        for (int i = 0; i < 8; i++) out[i] = d * (float)(int8_t)b[2 + e % 32 + i];
    }
}

/* shared memory floats: q [HB][D] | per warp: m [HB], l [HB], acc [HB][D] */
static constexpr int attg_smem(int HB, int D, int W) { return (HB * D + W * (2 * HB + HB * D)) * (int)sizeof(float); }
/* Warps per block. A block serves one row and KV head, so a step of many rows
 * has blocks enough; with 16 warps (the most that fit) a decode step of 256
 * sequences of ~190 keys took 227 us per layer on an H200 (2026-11-29): most
 * of a block's warps had no tile, and its 512 threads held a whole
 * multiprocessor's registers. 4 warps: each block's shared memory (q, and per
 * warp m, l, acc) stays under 48 KB at 8 heads of 256. */
#define ATT_WARPS 4
static_assert((8 * 256 + ATT_WARPS * (2 * 8 + 8 * 256)) * 4 <= 48 * 1024, "attention shared memory");

/* Split keys (SPLIT, the few rows of a decode step): blockIdx.z also names a
 * chunk of `chunk` keys; the block takes that chunk only, with ATT_WARPS warps, and
 * writes its unnormalised partial (max, sum of weights, weighted values) to
 * part_md / part_num for k_attention_merge. Enough blocks then share one row's
 * keys to keep the GPU busy when a step has one row and a few KV heads. */
struct attn_split {
    int chunk, n_chunks;  /* keys per chunk; chunks per row (gridDim.z / head groups) */
    float *part_md;       /* [T][n_heads][n_chunks][2]: max, sum of weights */
    float *part_num;      /* [T][n_heads][n_chunks][D] */
};

template <int KT, int HB, int DPL, int DFIX, int W = ATT_WARPS, bool SPLIT = false>
__global__ void __launch_bounds__(32 * W)
    k_attention_group(const float *q, const uint8_t *kc, const uint8_t *vc, size_t row_bytes, float *out,
                      const int *pos, const int *row_seq, const int *kv_len, const int *table, int max_blocks,
                      int n_heads, int n_kv_heads, int D_arg, int block_size, float scale, int window, float softcap,
                      const float *sinks, attn_split sp) {
    extern __shared__ float smem[];
    const int D = DFIX ? DFIX : D_arg;
    float *qs = smem;
    const int r = blockIdx.x, kvh = blockIdx.y, G = n_heads / n_kv_heads;
    const int n_hz = G / HB, hz = SPLIT ? (int)blockIdx.z % n_hz : (int)blockIdx.z, chunk_i = SPLIT ? (int)blockIdx.z / n_hz : 0;
    const int h0 = kvh * G + hz * HB; /* first query head of this block */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int s = row_seq[r];
    const int n_end = pos[r] + 1 < kv_len[s] ? pos[r] + 1 : kv_len[s];
    const int lo = window > 0 && pos[r] - window + 1 > 0 ? pos[r] - window + 1 : 0;
    const int n_kv = n_end > lo ? n_end - lo : 0;
    /* this block's keys: kb .. ke-1 (as t = lo + index) */
    const int kb = SPLIT ? chunk_i * sp.chunk : 0;
    const int ke = SPLIT ? min(n_kv, kb + sp.chunk) : n_kv;
    if (SPLIT && kb >= ke) return; /* past the row's keys: k_attention_merge reads no partial of it */
    const int e0 = kvh * D;
    const int *blocks = table + (size_t)s * max_blocks;
    for (int i = threadIdx.x; i < HB * D; i += blockDim.x) qs[i] = q[((size_t)r * n_heads + h0) * D + i];
    __syncthreads();

    float m[HB], l[HB], acc[HB][DPL];
#pragma unroll
    for (int h = 0; h < HB; h++) {
        m[h] = -INFINITY, l[h] = 0;
#pragma unroll
        for (int i = 0; i < DPL; i++) acc[h][i] = 0;
    }
    for (int t0 = kb + warp * 32; t0 < ke; t0 += 32 * W) {
        const int t = t0 + lane;
        float sc[HB];
#pragma unroll
        for (int h = 0; h < HB; h++) sc[h] = -INFINITY;
        unsigned long long my_slot = 0;
        if (t < ke) {
            const int key = lo + t;
            my_slot = (unsigned long long)blocks[key / block_size] * block_size + key % block_size;
            const uint8_t *krow = kc + my_slot * row_bytes;
            float dot[HB];
#pragma unroll
            for (int h = 0; h < HB; h++) dot[h] = 0;
#pragma unroll
            for (int d = 0; d < (DFIX ? DFIX : 256); d += 8) {
                if (!DFIX && d >= D) break;
                float kf[8];
                kv_load8<KT>(krow, e0 + d, kf);
#pragma unroll
                for (int h = 0; h < HB; h++)
#pragma unroll
                    for (int i = 0; i < 8; i++) dot[h] += qs[h * D + d + i] * kf[i];
            }
#pragma unroll
            for (int h = 0; h < HB; h++) {
                float v = dot[h] * scale;
                if (softcap > 0) v = softcap * tanhf(v / softcap);
                sc[h] = v;
            }
        }
        const int n_tile = ke - t0 < 32 ? ke - t0 : 32;
        float p[HB];
#pragma unroll
        for (int h = 0; h < HB; h++) {
            float tm = sc[h];
            for (int o = 16; o > 0; o >>= 1) tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
            const float new_m = fmaxf(m[h], tm);
            p[h] = t < ke ? __expf(sc[h] - new_m) : 0.0f;
            float ts = p[h];
            for (int o = 16; o > 0; o >>= 1) ts += __shfl_xor_sync(0xffffffffu, ts, o);
            const float corr = __expf(m[h] - new_m); /* (m = -inf at first: 0) */
            l[h] = l[h] * corr + ts;
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[h][i] *= corr;
            m[h] = new_m;
        }
        /* keys whose values load together: a split block (decode) has few warps
         * and is bound by the loads' round trips, so it takes twice or four
         * times as many at once (the same sums in the same order) */
        constexpr int JB = SPLIT ? (DPL <= 4 ? 16 : 8) : DPL <= 2 ? 8 : DPL == 4 ? 4 : 2;
        for (int j0 = 0; j0 < n_tile; j0 += JB) {
            float vv[JB][DPL];
#pragma unroll
            for (int jj = 0; jj < JB; jj++) { /* JB keys' values loaded before any is used */
                const unsigned long long slot = __shfl_sync(0xffffffffu, my_slot, j0 + jj);
                const uint8_t *vrow = vc + slot * row_bytes;
#pragma unroll
                for (int i = 0; i < DPL; i++) {
                    const int d = lane + 32 * i;
                    vv[jj][i] = j0 + jj < n_tile && d < D ? kv_elem<KT>(vrow, e0 + d) : 0.0f;
                }
            }
#pragma unroll
            for (int jj = 0; jj < JB; jj++)
#pragma unroll
                for (int h = 0; h < HB; h++) {
                    const float pj = __shfl_sync(0xffffffffu, p[h], j0 + jj); /* 0 past the tile */
#pragma unroll
                    for (int i = 0; i < DPL; i++) acc[h][i] += pj * vv[jj][i];
                }
        }
    }
    /* merge the warps in warp order */
    const int stride = 2 * HB + HB * D;
    float *wm = smem + HB * D + warp * stride, *wl = wm + HB, *wacc = wl + HB;
#pragma unroll
    for (int h = 0; h < HB; h++) {
        if (lane == 0) wm[h] = m[h], wl[h] = l[h];
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < D) wacc[h * D + d] = acc[h][i];
        }
    }
    __syncthreads();
    const float *base = smem + HB * D;
    /* a split block leaves the sink to the merge, which adds it once */
    const bool use_sinks = sinks && !SPLIT;
    for (int k = threadIdx.x; k < HB * D; k += blockDim.x) {
        const int h = k / D;
        const float sink = use_sinks ? sinks[h0 + h] : -INFINITY; /* joins the denominator only */
        float M = sink;
        for (int w = 0; w < W; w++) M = fmaxf(M, base[w * stride + h]);
        float num = 0, den = 0;
        if (M > -INFINITY) {
            for (int w = 0; w < W; w++) {
                const float f = __expf(base[w * stride + h] - M);
                num += base[w * stride + 2 * HB + k] * f;
                den += base[w * stride + HB + h] * f;
            }
            if (use_sinks) den += __expf(sink - M);
        }
        if (SPLIT) { /* the chunk's unnormalised partial */
            const int d = k % D;
            const size_t pi = ((size_t)r * n_heads + h0 + h) * sp.n_chunks + chunk_i;
            sp.part_num[pi * D + d] = num;
            if (d == 0) sp.part_md[2 * pi] = M, sp.part_md[2 * pi + 1] = den;
        } else {
            out[((size_t)r * n_heads + h0) * D + k] = den > 0 ? num / den : 0.0f;
        }
    }
}

/* One block per (row, head): the row's chunk partials folded in chunk order, the
 * sink joining the denominator, out = Σ weighted values / Σ weights. */
__global__ void k_attention_merge(float *out, const int *pos, const int *row_seq, const int *kv_len, int n_heads, int D,
                                  int window, const float *sinks, attn_split sp) {
    const int r = blockIdx.x, h = blockIdx.y, s = row_seq[r];
    const int n_end = pos[r] + 1 < kv_len[s] ? pos[r] + 1 : kv_len[s];
    const int lo = window > 0 && pos[r] - window + 1 > 0 ? pos[r] - window + 1 : 0;
    const int n_kv = n_end > lo ? n_end - lo : 0;
    const int nc = (n_kv + sp.chunk - 1) / sp.chunk;
    const size_t p0 = ((size_t)r * n_heads + h) * sp.n_chunks;
    const float *md = sp.part_md + 2 * p0, *pn = sp.part_num + p0 * D;
    const float sink = sinks ? sinks[h] : -INFINITY;
    float M = sink;
    for (int c = 0; c < nc; c++) M = fmaxf(M, md[2 * c]);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float num = 0, den = 0;
        if (M > -INFINITY) {
            for (int c = 0; c < nc; c++) {
                if (md[2 * c] == -INFINITY) continue;
                const float f = __expf(md[2 * c] - M);
                num += pn[(size_t)c * D + d] * f;
                den += md[2 * c + 1] * f;
            }
            if (sinks) den += __expf(sink - M);
        }
        out[((size_t)r * n_heads + h) * D + d] = den > 0 ? num / den : 0.0f;
    }
}

void cuda_kv_store(cuda_ctx *c, void *kc, void *vc, const float *k, const float *v, int kv_dim, uint32_t kv_type) {
    if (!c->T) return;
    if (kv_type == QT_Q8_0) {
        if (kv_dim % 32) {
            cuda_fail(c, "CUDA: a Q8_0 KV cache needs rows of whole blocks of 32 (kv_dim %d)", kv_dim);
            return;
        }
        k_kv_store_q8_0<<<grid_for((size_t)c->T * (kv_dim / 32), 128), 128, 0, c->stream>>>(
            (uint8_t *)kc, (uint8_t *)vc, k, v, c->slots, c->T, kv_dim);
    } else if (kv_type == QT_F32 || kv_type == QT_F16) {
        k_kv_store_elem<<<grid_for((size_t)c->T * kv_dim, 256), 256, 0, c->stream>>>(
            (uint8_t *)kc, (uint8_t *)vc, k, v, c->slots, c->T, kv_dim, kv_type == QT_F16);
    } else {
        cuda_fail(c, "CUDA: the KV cache cannot be stored as %s", qtype_name(kv_type));
        return;
    }
    LAUNCHED(c);
}

/* The split for this step, or chunk 0 when the step is not split: steps of up
 * to ATT_SPLIT_MAX_ROWS rows (decode), whose partials fit in scratch. The chunk
 * depends only on the engine's table width (max_blocks), so a row's result is
 * the same whatever else is in such a step; at most 64 chunks a row. */
#define ATT_SPLIT_MAX_ROWS 32
#define ATT_SPLIT_MAX_CHUNKS 64
static attn_split plan_split(cuda_ctx *c, const bk_attn *a) {
    attn_split sp = {0, 0, NULL, NULL};
    if (c->T > ATT_SPLIT_MAX_ROWS || c->attn_no_split) return sp;
    const int base = 32 * ATT_WARPS, cap = c->max_blocks * a->block_size;
    const int per = (cap + base * ATT_SPLIT_MAX_CHUNKS - 1) / (base * ATT_SPLIT_MAX_CHUNKS);
    sp.chunk = base * (per > 0 ? per : 1);
    sp.n_chunks = (cap + sp.chunk - 1) / sp.chunk;
    if (sp.n_chunks <= 1) return sp.chunk = 0, sp; /* one chunk: the plain kernel does the same work */
    const size_t n_part = (size_t)c->T * a->n_heads * sp.n_chunks;
    float *s = (float *)cuda_scratch(c, n_part * (2 + (size_t)a->head_dim) * sizeof(float));
    if (!s) return sp.chunk = 0, sp;
    sp.part_md = s, sp.part_num = s + 2 * n_part;
    return sp;
}

template <int KT, int HB>
static void launch_group(cuda_ctx *c, const float *q, const uint8_t *k8, const uint8_t *v8, size_t rb, float *out,
                         const bk_attn *a) {
    const int G = a->n_heads / a->n_kv_heads, D = a->head_dim;
    const attn_split sp = plan_split(c, a);
    if (c->failed) return;
    /* split: blockIdx.z also names the chunk of keys, and the merge follows */
    const dim3 grid((unsigned)c->T, (unsigned)a->n_kv_heads, (unsigned)(G / HB * (sp.chunk ? sp.n_chunks : 1)));
#define ATTG(DPL, DFIX, SPLIT)                                                                                      \
    k_attention_group<KT, HB, DPL, DFIX, ATT_WARPS, SPLIT><<<grid, 32 * ATT_WARPS, attg_smem(HB, D, ATT_WARPS),      \
                                                             c->stream>>>(                                          \
        q, k8, v8, rb, out, c->pos, c->row_seq, c->kv_len, c->table, c->max_blocks, a->n_heads, a->n_kv_heads, D,     \
        a->block_size, a->scale, a->window, a->softcap, a->sinks, sp)
#define ATTG_BY_HEAD_SIZE(SPLIT)                 \
    do {                                         \
        if (D == 64) ATTG(2, 64, SPLIT);         \
        else if (D == 128) ATTG(4, 128, SPLIT);  \
        else if (D == 256) ATTG(8, 256, SPLIT);  \
        else if (D <= 32) ATTG(1, 0, SPLIT);     \
        else ATTG(8, 0, SPLIT);                  \
    } while (0)
    if (!sp.chunk) {
        ATTG_BY_HEAD_SIZE(false);
        return;
    }
    ATTG_BY_HEAD_SIZE(true);
    LAUNCHED(c);
    k_attention_merge<<<dim3((unsigned)c->T, (unsigned)a->n_heads), D < 128 ? 64 : 128, 0, c->stream>>>(
        out, c->pos, c->row_seq, c->kv_len, a->n_heads, D, a->window, a->sinks, sp);
#undef ATTG_BY_HEAD_SIZE
#undef ATTG
}

template <int KT>
static void launch_attention(cuda_ctx *c, const float *q, const uint8_t *k8, const uint8_t *v8, size_t rb, float *out,
                             const bk_attn *a) {
    const int G = a->n_heads / a->n_kv_heads;
    if (G % 8 == 0) launch_group<KT, 8>(c, q, k8, v8, rb, out, a);
    else if (G % 4 == 0) launch_group<KT, 4>(c, q, k8, v8, rb, out, a);
    else if (G % 2 == 0) launch_group<KT, 2>(c, q, k8, v8, rb, out, a);
    else launch_group<KT, 1>(c, q, k8, v8, rb, out, a);
}

void cuda_attention(cuda_ctx *c, const float *q, const void *kc, const void *vc, float *out, const bk_attn *a) {
    if (!c->T) return;
    const size_t rb = qtype_row_bytes(a->kv_type, (int64_t)a->n_kv_heads * a->head_dim);
    const uint8_t *k8 = (const uint8_t *)kc, *v8 = (const uint8_t *)vc;
    /* heads a multiple of 8 wide up to 256 (every model we know): the grouped
     * kernel; LLC_CUDA_ATTN=rows keeps the first kernel, for comparison */
    if (a->head_dim % 8 == 0 && a->head_dim <= 256 && a->n_heads % a->n_kv_heads == 0 && !c->attn_by_rows) {
        switch (a->kv_type) {
        case QT_F32: launch_attention<QT_F32>(c, q, k8, v8, rb, out, a); break;
        case QT_F16: launch_attention<QT_F16>(c, q, k8, v8, rb, out, a); break;
        case QT_Q8_0: launch_attention<QT_Q8_0>(c, q, k8, v8, rb, out, a); break;
        default: cuda_fail(c, "CUDA: the KV cache cannot be read as %s", qtype_name(a->kv_type)); return;
        }
        LAUNCHED(c);
        return;
    }
    if (a->head_dim > 4 * ATT_THREADS) {
        cuda_fail(c, "CUDA attention: head size %d is over %d", a->head_dim, 4 * ATT_THREADS);
        return;
    }
    dim3 grid((unsigned)c->T, (unsigned)a->n_heads);
    const size_t shm = (size_t)(a->head_dim + ATT_THREADS) * sizeof(float);
#define ATT_ARGS q, k8, v8, rb, out, c->pos, c->row_seq, c->kv_len, c->table, c->max_blocks, a->n_heads, \
                 a->n_kv_heads, a->head_dim, a->block_size, a->scale, a->window, a->softcap, a->sinks
    switch (a->kv_type) {
    case QT_F32: k_attention<QT_F32><<<grid, ATT_THREADS, shm, c->stream>>>(ATT_ARGS); break;
    case QT_F16: k_attention<QT_F16><<<grid, ATT_THREADS, shm, c->stream>>>(ATT_ARGS); break;
    case QT_Q8_0: k_attention<QT_Q8_0><<<grid, ATT_THREADS, shm, c->stream>>>(ATT_ARGS); break;
    default: cuda_fail(c, "CUDA: the KV cache cannot be read as %s", qtype_name(a->kv_type)); return;
    }
#undef ATT_ARGS
    LAUNCHED(c);
}
