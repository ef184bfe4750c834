/* topk.cu — the k best entries of each row of logits on the GPU (the backend's
 * top_k op), so a decode step copies k entries per sequence to the host instead
 * of the vocabulary and the sampler reads those (engine: sampler_sample_top).
 *
 * The same entries, in the same order, as topk_row (kernels/topk.h). One block
 * per row: a radix select over order-preserving 32-bit keys (11, 11 and 10
 * bits) finds the k-th best key T; the entries above T are all taken, those
 * equal to T in id order (each warp walks a contiguous span of the row, so
 * ranks follow ids), and the k taken are put in order by counting. */
#include <float.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/topk.h"

#define TOPK_THREADS 1024
#define TOPK_WARPS (TOPK_THREADS / 32)

/* larger key = better entry; 0 = left out (NaN, -inf); +inf as FLT_MAX; -0 as +0 */
__device__ __forceinline__ uint32_t topk_key(float v) {
    if (!(v > -INFINITY)) return 0;
    if (v == INFINITY) v = FLT_MAX;
    const uint32_t u = __float_as_uint(v + 0.0f); /* (-0 + 0 = +0) */
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The histogram of one digit: shared-memory adds, one per distinct bin a warp
 * meets (logits crowd into few bins: lane-by-lane adds would queue on them). */
__device__ __forceinline__ void hist_add(unsigned *hist, bool take, unsigned bin) {
    const unsigned active = __ballot_sync(0xffffffffu, take);
    if (!take) return;
    const unsigned same = __match_any_sync(active, bin);
    if ((threadIdx.x & 31) == (unsigned)(__ffs(same) - 1)) atomicAdd(&hist[bin], (unsigned)__popc(same));
}

/* Warp 0: the digit (bins nb, best = highest) holding the remaining-th best
 * entry; prefix gets it, remaining loses the entries of better digits. Also
 * the total count in the histogram. */
__device__ void pick_digit(const unsigned *hist, int nb, int shift, uint32_t *prefix, unsigned *remaining,
                           unsigned *total) {
    const int lane = threadIdx.x & 31, per = nb / 32;
    const int hi = nb - 1 - lane * per; /* lane's bins: hi, hi-1, .., hi-per+1 */
    unsigned sum = 0;
    for (int j = 0; j < per; j++) sum += hist[hi - j];
    unsigned incl = sum;
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
    }
    const unsigned all = __shfl_sync(0xffffffffu, incl, 31);
    if (lane == 0) *total = all;
    const unsigned need = *remaining;
    const unsigned found = __ballot_sync(0xffffffffu, incl >= need);
    if (!found) return; /* fewer than need: the caller takes everything */
    if (lane == __ffs(found) - 1) {
        unsigned cum = incl - sum;
        int d = hi;
        for (; d > hi - per + 1; d--) {
            if (cum + hist[d] >= need) break;
            cum += hist[d];
        }
        *prefix |= (uint32_t)d << shift;
        *remaining = need - cum;
    }
}

__global__ void __launch_bounds__(TOPK_THREADS) k_top_k(const float *x, int n, int k, int32_t *ids, float *vals) {
    __shared__ unsigned hist[2048];
    __shared__ uint32_t s_prefix, c_key[TOPK_MAX];
    __shared__ unsigned s_remaining, s_total, s_slot, warp_ties[TOPK_WARPS];
    __shared__ int32_t c_id[TOPK_MAX];
    const float *row = x + (size_t)blockIdx.x * n;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (tid == 0) s_prefix = 0, s_remaining = (unsigned)k, s_slot = 0;

    /* radix select: bits 31..21, 20..10, 9..0 */
    uint32_t mask = 0;
    bool take_all = false;
    for (int pass = 0; pass < 3; pass++) {
        const int nb = pass == 2 ? 1024 : 2048, shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
        for (int i = tid; i < nb; i += TOPK_THREADS) hist[i] = 0;
        __syncthreads();
        const uint32_t prefix = s_prefix;
        for (int i0 = 0; i0 < n; i0 += TOPK_THREADS) { /* (the whole block in every round: ballots) */
            const int i = i0 + tid;
            const uint32_t key = i < n ? topk_key(row[i]) : 0;
            hist_add(hist, key != 0 && (key & mask) == prefix, (key >> shift) & (unsigned)(nb - 1));
        }
        __syncthreads();
        if (warp == 0) pick_digit(hist, nb, shift, &s_prefix, &s_remaining, &s_total);
        __syncthreads();
        if (pass == 0 && s_total <= (unsigned)k) { /* no more entries than k: all of them */
            take_all = true;
            break;
        }
        mask |= (uint32_t)(nb - 1) << shift;
    }
    /* taken: key > T, and the first `ties` entries (by id) with key == T */
    const uint32_t T = take_all ? 0 : s_prefix;
    const unsigned ties = take_all ? 0 : s_remaining;
    const int n_taken = take_all ? (int)s_total : k;
    const int span = ((n + TOPK_WARPS - 1) / TOPK_WARPS + 31) & ~31, w0 = warp * span;
    const int w1 = min(n, w0 + span);
    unsigned my_ties = 0;
    for (int i0 = w0; i0 < w1; i0 += 32) { /* key > T anywhere; ties counted per warp */
        const int i = i0 + lane;
        const uint32_t key = i < w1 ? topk_key(row[i]) : 0;
        if (key > T) {
            const unsigned s = atomicAdd(&s_slot, 1u);
            c_key[s] = key, c_id[s] = i;
        }
        my_ties += __popc(__ballot_sync(0xffffffffu, key != 0 && key == T));
    }
    if (lane == 0) warp_ties[warp] = my_ties;
    __syncthreads();
    if (ties > 0) { /* the ties in id order: warps' spans in order, lanes in order */
        const unsigned n_gt = (unsigned)k - ties;
        unsigned base = 0;
        for (int w = 0; w < warp; w++) base += warp_ties[w];
        for (int i0 = w0; i0 < w1 && base < ties; i0 += 32) {
            const int i = i0 + lane;
            const bool tie = i < w1 && topk_key(row[i]) == T;
            const unsigned b = __ballot_sync(0xffffffffu, tie);
            const unsigned rank = base + __popc(b & ((1u << lane) - 1u));
            if (tie && rank < ties) c_key[n_gt + rank] = T, c_id[n_gt + rank] = i;
            base += __popc(b);
        }
    }
    __syncthreads();
    /* in order by counting: an entry's place is the number of better ones */
    int32_t *ids_r = ids + (size_t)blockIdx.x * k;
    float *vals_r = vals + (size_t)blockIdx.x * k;
    if (tid < n_taken) {
        const uint32_t key = c_key[tid];
        const int32_t id = c_id[tid];
        int place = 0;
        for (int j = 0; j < n_taken; j++) place += c_key[j] > key || (c_key[j] == key && c_id[j] < id);
        const float v = row[id];
        ids_r[place] = id, vals_r[place] = v == INFINITY ? FLT_MAX : v;
    } else if (tid < k) {
        ids_r[tid] = -1, vals_r[tid] = -INFINITY;
    }
}

void cuda_top_k(cuda_ctx *c, const float *x, int rows, int n, int k, int32_t *d_ids, float *d_vals) {
    if (rows <= 0) return;
    k_top_k<<<(unsigned)rows, TOPK_THREADS, 0, c->stream>>>(x, n, k, d_ids, d_vals);
    LAUNCHED(c);
}
