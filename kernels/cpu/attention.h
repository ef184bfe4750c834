/* attention.h — causal attention over the paged KV cache on the CPU, for one
 * flattened varlen batch: each row attends to positions 0..its own of its
 * sequence, through the sequence's block table. Grouped-query heads share K/V.
 * The caches hold a->kv_type elements (f32, f16 or q8_0, see bk_attn), read as
 * they are; cpu_kv_write_row writes a row of them.
 * FlashAttention-style: tiles of query rows against tiles of 32 keys with an
 * online softmax (no score row as long as the context), split over the pool by
 * (query tile, KV head). Vectorized (AVX-512 or AVX2+FMA, chosen with the
 * matmul's SIMD level) with a plain C fallback. A row's result depends only on
 * its own query and keys (tiles lie at fixed positions), so it is the same bits
 * alone (decode), in any prefill chunk, and at any thread count. */
#ifndef LLC_CPU_ATTENTION_H
#define LLC_CPU_ATTENTION_H

#include "kernels/backend.h"
#include "kernels/cpu/pool.h"

/* out[r, h, :] = softmax(cap(scale * q[r, h] · K[lo..n_kv))) · V for every row r
 * and head h, where lo is 0 or the start of the sliding window (a->window) and cap
 * the optional soft-capping (a->softcap). q, out: [T][n_heads * head_dim]; caches: a row of
 * n_kv_heads * head_dim elements of a->kv_type per slot (cpu_kv_type_supported must hold).
 * max_kv_len bounds every kv_len in the batch. Uses the pool's scratch. */
void cpu_attention_run(cpu_pool *pool, const bk_batch *b, const bk_attn *a, const float *q,
                       const void *k_cache, const void *v_cache, float *out, int max_kv_len);

/* Whether a cache of rows of kv_dim elements, heads of head_dim, can be of `type`
 * (f32 and f16 always; q8_0 when kv_dim % 32 == 0 and head_dim % 8 == 0). */
bool cpu_kv_type_supported(uint32_t type, int kv_dim, int head_dim);

/* Writes n floats as one cache row of `type` at dst (f16 rounds to nearest even;
 * q8_0 as quantize_row does). Every SIMD level writes the same bytes. */
void cpu_kv_write_row(uint32_t type, void *dst, const float *src, int n);

#endif
