/* kvcache.h — the KV block manager: which KV blocks each sequence owns, sharing
 * of common prefixes through a hash table of full blocks, copy-on-write when a
 * shared block would be written, and an LRU of cached free blocks.
 *
 * It holds metadata only (refcounts, hashes, the token id in every slot); the K/V
 * data lives in model_kv, indexed by the same block ids (slot = block * block_size
 * + offset). The manager reports the block copies the engine must perform on the
 * device (model_kv_copy_blocks) before the next forward step.
 *
 * Model of a sequence: `len` tokens reserved (appended, their slots assigned) of
 * which the first `computed` have K/V written (committed). Each step the engine
 * computes tokens computed..len (or a chunk of them) through the block table, then
 * commits them. Blocks:
 *   - A full block whose tokens are all committed is hashed: XXH3_64bits_withSeed
 *     over its block_size token ids, seeded with its parent block's hash (the first
 *     block's seed is 0), so a hash names the whole prefix up to the block's end.
 *     A hashed block is immutable. The hash table maps hash -> block; when two
 *     blocks get the same hash (the same prefix computed twice, e.g. the last
 *     block of a prompt, which the n-1 rule recomputes) the first keeps the entry;
 *     the other stays unlisted, and lists itself when its last reference goes
 *     if the listed one has been evicted by then.
 *   - Only the partial last block of a sequence is ever written. Before appending
 *     into it, the manager makes it private: if it is shared (refcount > 1) it takes
 *     a fresh block and records a copy (copy-on-write); if it is this sequence's
 *     alone but hashed (after a truncate back into it) it copies too when a block is
 *     available, so the cached prefix survives, and otherwise forgets the hash and
 *     writes in place.
 *   - Pending copies are hazard-free: destinations are distinct and no destination
 *     is the source of another copy, so the device may run them all at once in any
 *     order. To keep it so, a block that a pending copy reads is "pinned" when its
 *     last reference goes: it is not available until kv_pool_take_copies.
 *   - Free list = LRU. A block whose refcount drops to 0 goes to the tail if it is
 *     listed in the hash table (it stays "cached" and can be found again), else to
 *     the head as a plain free block. Allocation takes the head, so plain free
 *     blocks are used before any cached one is evicted, and cached blocks are
 *     evicted least recently freed first (an evicted block forgets its hash).
 *     A sequence releases its blocks last to first, so deeper blocks of a prefix
 *     are evicted before the blocks they extend. A prefix hit pulls a cached block
 *     back out of the LRU.
 *
 * Every operation costs O(blocks touched); nothing scans the pool except
 * kv_pool_validate. Results follow kernels/common.h: 0 ok, negative error, positive
 * soft condition. Counts from outside (token counts, lengths) are checked and give
 * LLC_ERR_RANGE, never a crash; NULL handles are programmer errors (LLC_ASSERT).
 * Not thread-safe: the engine thread owns the pool and its sequences. */
#ifndef LLC_KVCACHE_H
#define LLC_KVCACHE_H

#include <stdint.h>

#include "kernels/common.h"

#define KV_NO_SPACE 1 /* soft: not enough free blocks; nothing was changed */

typedef struct kv_pool kv_pool;
typedef struct kv_seq kv_seq;

typedef struct kv_stats {
    int n_blocks;
    int used;   /* refcount > 0 */
    int cached; /* refcount 0, still listed under its hash (reusable prefix) */
    int free;   /* refcount 0, no hash */
    int pinned; /* refcount 0, but a pending copy reads it: free after take_copies */
    int n_seqs; /* live sequences */
    int64_t lookups_tokens; /* tokens offered to kv_seq_match_prefix */
    int64_t hit_tokens;     /* tokens it reused */
} kv_stats;

/* n_blocks >= 1, block_size >= 1, n_blocks * block_size < 2^31 (slots are int32);
 * otherwise LLC_ERR_RANGE. */
int kv_pool_create(int n_blocks, int block_size, kv_pool **out);
/* Sequences still alive are detached, not freed: they become empty, every further
 * operation on them returns LLC_ERR_RANGE, and kv_seq_free still frees them. */
void kv_pool_free(kv_pool *p);
int kv_pool_block_size(const kv_pool *p);
int kv_pool_n_blocks(const kv_pool *p);
void kv_pool_stats(const kv_pool *p, kv_stats *out);
/* Free + cached blocks: what allocations can take (pinned blocks are not). */
int kv_pool_available(const kv_pool *p);
/* Checks every invariant: each block's refcount equals the number of block-table
 * references across live sequences; the free and pinned lists together hold
 * exactly the refcount-0 blocks (free list: plain free ones before cached ones),
 * with consistent links and counters, so no block is lost or both free and used;
 * every listed block is in the table under its hash exactly once and the table
 * finds it; every hashed block's hash matches its tokens and parent hash (hashed
 * blocks were never written); the full committed blocks of every sequence are
 * hashed and chained; pending copies are valid, indexed, and independent. Returns
 * 0, or LLC_ERR_FORMAT with a one-line description in err (LLC_ERR_NOMEM if
 * scratch memory is unavailable). O(n_blocks * block_size + total table entries). */
int kv_pool_validate(const kv_pool *p, llc_err *err);
/* The copies the engine must perform before the next forward step: for i < the
 * returned count, block dst[i] = block src[i] (all layers, K and V). They are
 * independent (distinct destinations, none of them a source), so they may run
 * together in any order. The list is then cleared and pinned blocks are released;
 * the arrays stay valid until the next kv_seq_append or kv_pool_free. Call it once
 * per step, after the appends and before the forward pass. */
int kv_pool_take_copies(kv_pool *p, const int32_t **src, const int32_t **dst);

int kv_seq_create(kv_pool *p, kv_seq **out);
/* Drops its block references (last block first); full hashed blocks stay cached. */
void kv_seq_free(kv_seq *s);
/* The same, but the blocks this frees (refcount 0, not pinned) forget their
 * hashes and become plain free blocks: nothing of s stays cached, so it evicts
 * no one else's cached prefix (embeddings: one-off texts). Blocks others still
 * hold keep their hashes. */
void kv_seq_free_uncached(kv_seq *s);
int kv_seq_len(const kv_seq *s);      /* tokens reserved (appended) */
int kv_seq_computed(const kv_seq *s); /* tokens committed */
/* Its block table: ceil(len / block_size) block ids, valid until the next call
 * that changes this sequence. */
const int32_t *kv_seq_blocks(const kv_seq *s, int *n_blocks);

/* Prefix cache lookup, only on an empty sequence (else LLC_ERR_RANGE): adopts the
 * longest run of cached full blocks whose hash chain matches tokens[0..n) (the
 * token ids are compared too), at most n-1 tokens so the caller always computes
 * the last one (it needs its logits). Returns the number of tokens reused, a
 * multiple of block_size; they count as appended and computed. */
int kv_seq_match_prefix(kv_seq *s, const int32_t *tokens, int n);
/* Reserves slots for n more tokens (ids remembered for hashing), taking blocks as
 * needed and making the partial last block private first (see above; a copy is
 * recorded for kv_pool_take_copies). All or nothing: returns KV_NO_SPACE, changing
 * nothing, when kv_seq_blocks_needed(s, n) > kv_pool_available(pool). */
int kv_seq_append(kv_seq *s, const int32_t *tokens, int n);
/* How many blocks appending n tokens would take out of kv_pool_available now
 * (fresh blocks, plus one for a copy-on-write of the last block), for scheduler
 * admission; append succeeds exactly when this is <= kv_pool_available. Negative
 * on bad n. */
int kv_seq_blocks_needed(const kv_seq *s, int n);
/* Marks the next n appended tokens as computed (their K/V are written); every
 * block that becomes full is hashed and listed (0 <= n <= len - computed). */
int kv_seq_commit(kv_seq *s, int n);
/* A new sequence sharing all of src's blocks (refcount++), with the same len and
 * computed. Whichever appends first into the shared partial last block copies it.
 * Tokens src has appended but not committed must be computed by each side. */
int kv_seq_fork(const kv_seq *src, kv_seq **out);
/* Keeps the first n tokens (0 <= n <= len): releases the blocks past them (last
 * first); computed = min(computed, n). A now-partial hashed last block is left
 * intact until the next append makes it private. */
int kv_seq_truncate(kv_seq *s, int n);

#endif
