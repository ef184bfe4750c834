/* attention.h — causal attention over the paged KV cache on the CPU, for one
 * flattened varlen batch: each row attends to positions 0..its own of its
 * sequence, through the sequence's block table. Grouped-query heads share K/V.
 * Vectorized (AVX-512 or AVX2+FMA, chosen with the matmul's SIMD level) with a
 * plain C fallback; every (row, head) is computed by one thread in a fixed
 * order, so results do not depend on the thread count. */
#ifndef LLC_CPU_ATTENTION_H
#define LLC_CPU_ATTENTION_H

#include "kernels/backend.h"
#include "kernels/cpu/pool.h"

/* out[r, h, :] = softmax(cap(scale * q[r, h] · K[lo..n_kv))) · V for every row r
 * and head h, where lo is 0 or the start of the sliding window (a->window) and cap
 * the optional soft-capping (a->softcap). q, out: [T][n_heads * head_dim]; caches: [slot][n_kv_heads * head_dim].
 * max_kv_len bounds every kv_len in the batch. Uses the pool's scratch. */
void cpu_attention_run(cpu_pool *pool, const bk_batch *b, const bk_attn *a, const float *q,
                       const float *k_cache, const float *v_cache, float *out, int max_kv_len);

#endif
