/* kvcache.c — the KV block manager described in kvcache.h: per-block refcount,
 * hash, parent hash and token ids; the free list that doubles as LRU; an
 * open-addressing hash table (linear probing, backward-shift deletion) from block
 * hash to block; sequences with their block tables; the pending copy list.
 *
 * Block states (refcount, flags):
 *   in use        refcount > 0; F_HASHED when full and committed (immutable),
 *                 F_LISTED as well when it owns the table entry for its hash
 *   cached        refcount 0, F_HASHED | F_LISTED, in the free list after all
 *                 plain free blocks, least recently freed first
 *   free          refcount 0, no flags, at the head side of the free list
 *   pinned        refcount 0, F_PINNED (plus any hash flags): a pending copy still
 *                 reads it, so it waits in the pinned list, not allocatable, until
 *                 kv_pool_take_copies hands the copies out
 *
 * Pending copies are kept free of hazards so the device may run them all at once
 * in any order: a copy from a block that is itself the destination of a pending
 * copy reads that copy's source instead (pdst), a destination that is allocated
 * again cancels the copy into it, and a source block cannot be reallocated while
 * a copy reads it (pin, pinned list). So destinations are distinct and never a
 * source. */
#include "engine/sched/kvcache.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum { F_HASHED = 1, F_LISTED = 2, F_PINNED = 4 };

#define ROOT_SEED 0 /* parent hash of a sequence's first block */

struct kv_seq {
    kv_pool *pool; /* NULL once detached by kv_pool_free */
    kv_seq *prev, *next; /* the pool's list of live sequences */
    int32_t *blocks;     /* [n_blocks] block table; n_blocks = ceil(len / block_size) */
    int n_blocks, cap;
    int len;      /* tokens appended */
    int computed; /* tokens committed, <= len */
};

struct kv_pool {
    int n_blocks, block_size;
    int32_t *refcount; /* [n_blocks] */
    uint8_t *flags;    /* [n_blocks] F_* */
    uint64_t *hash;    /* [n_blocks] valid with F_HASHED */
    uint64_t *parent;  /* [n_blocks] parent block's hash (seed) when F_HASHED */
    int32_t *tokens;   /* [n_blocks * block_size] token id of every slot */
    /* Free list / LRU of refcount-0 blocks: head = next to be allocated. The
     * pinned list (refcount 0, read by a pending copy) uses the same links. */
    int32_t *prev, *next; /* [n_blocks], -1 = none */
    int32_t head, tail;
    int32_t phead, ptail;
    int n_free_list; /* blocks in the free list */
    int n_cached;    /* of those, listed in the table */
    int n_pinned;    /* blocks in the pinned list */
    /* Hash table: open addressing, linear probing; tval -1 = empty slot. */
    uint64_t *tkey;
    int32_t *tval;
    uint32_t tmask;
    int tcount;
    /* Pending copies; csrc[i] = -1 marks a cancelled one. */
    int32_t *csrc, *cdst;
    int n_copies, cap_copies;
    int32_t *pdst; /* [n_blocks] live pending copy writing the block, or -1 */
    int32_t *pin;  /* [n_blocks] live pending copies reading the block */
    /* Live sequences. */
    kv_seq *seqs;
    int n_seqs;
    int64_t lookups_tokens, hit_tokens;
};

/* ---- hash table ---- */

static int32_t table_find(const kv_pool *p, uint64_t key) {
    for (uint32_t i = (uint32_t)key & p->tmask;; i = (i + 1) & p->tmask) {
        if (p->tval[i] < 0) return -1;
        if (p->tkey[i] == key) return p->tval[i];
    }
}

/* The key must be absent; the table never holds more than n_blocks entries and
 * has at least twice as many slots, so there is always an empty one. */
static void table_insert(kv_pool *p, uint64_t key, int32_t b) {
    uint32_t i = (uint32_t)key & p->tmask;
    while (p->tval[i] >= 0) {
        LLC_ASSERT(p->tkey[i] != key);
        i = (i + 1) & p->tmask;
    }
    p->tkey[i] = key;
    p->tval[i] = b;
    p->tcount++;
}

static void table_remove(kv_pool *p, uint64_t key) {
    uint32_t i = (uint32_t)key & p->tmask;
    while (p->tkey[i] != key || p->tval[i] < 0) {
        LLC_ASSERT(p->tval[i] >= 0); /* the key must be present */
        i = (i + 1) & p->tmask;
    }
    /* Backward-shift deletion: move later entries of the probe run into the hole
     * unless their home slot lies cyclically in (hole, j]. */
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & p->tmask;
        if (p->tval[j] < 0) break;
        uint32_t home = (uint32_t)p->tkey[j] & p->tmask;
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        p->tkey[i] = p->tkey[j];
        p->tval[i] = p->tval[j];
        i = j;
    }
    p->tval[i] = -1;
    p->tcount--;
}

/* ---- free list ---- */

/* Doubly linked lists over prev/next; (head, tail) is the free list or the
 * pinned list. */
static void list_unlink(kv_pool *p, int32_t *head, int32_t *tail, int32_t b) {
    if (p->prev[b] >= 0) p->next[p->prev[b]] = p->next[b];
    else *head = p->next[b];
    if (p->next[b] >= 0) p->prev[p->next[b]] = p->prev[b];
    else *tail = p->prev[b];
    p->prev[b] = p->next[b] = -1;
}

static void list_push_head(kv_pool *p, int32_t *head, int32_t *tail, int32_t b) {
    p->prev[b] = -1;
    p->next[b] = *head;
    if (*head >= 0) p->prev[*head] = b;
    else *tail = b;
    *head = b;
}

static void list_push_tail(kv_pool *p, int32_t *head, int32_t *tail, int32_t b) {
    p->next[b] = -1;
    p->prev[b] = *tail;
    if (*tail >= 0) p->next[*tail] = b;
    else *head = b;
    *tail = b;
}

/* Cancels the pending copy into b (b is being reused). */
static void copy_cancel_into(kv_pool *p, int32_t b) {
    int32_t e = p->pdst[b];
    if (e < 0) return;
    p->pin[p->csrc[e]]--;
    p->csrc[e] = -1;
    p->pdst[b] = -1;
}

/* Takes the head of the free list (a plain free block, else the least recently
 * freed cached one, which forgets its hash). The caller checked availability. */
static int32_t block_alloc(kv_pool *p) {
    int32_t b = p->head;
    LLC_ASSERT(b >= 0);
    list_unlink(p, &p->head, &p->tail, b);
    p->n_free_list--;
    if (p->flags[b] & F_LISTED) {
        table_remove(p, p->hash[b]);
        p->n_cached--;
    }
    copy_cancel_into(p, b);
    p->flags[b] = 0;
    p->refcount[b] = 1;
    return b;
}

/* An unreferenced, unpinned block joins the free list: a listed block (or a
 * hashed one whose hash is no longer listed — its twin was evicted) becomes
 * cached at the LRU tail; anything else becomes plain free at the head. */
static void to_free_list(kv_pool *p, int32_t b) {
    p->n_free_list++;
    if (!(p->flags[b] & F_LISTED) && (p->flags[b] & F_HASHED) && table_find(p, p->hash[b]) < 0) {
        table_insert(p, p->hash[b], b);
        p->flags[b] |= F_LISTED;
    }
    if (p->flags[b] & F_LISTED) {
        p->n_cached++;
        list_push_tail(p, &p->head, &p->tail, b);
    } else {
        p->flags[b] = 0;
        list_push_head(p, &p->head, &p->tail, b);
    }
}

/* Drops one reference; at zero the block is free, or pinned while a pending copy
 * reads it. */
static void block_release(kv_pool *p, int32_t b) {
    LLC_ASSERT(p->refcount[b] > 0);
    if (--p->refcount[b] > 0) return;
    if (p->pin[b] > 0) {
        p->flags[b] |= F_PINNED;
        p->n_pinned++;
        list_push_tail(p, &p->phead, &p->ptail, b);
    } else {
        to_free_list(p, b);
    }
}

/* A listed block gains a reference (prefix hit); at refcount 0 it was cached
 * (only listed blocks are found by the table) or pinned. */
static void block_acquire(kv_pool *p, int32_t b) {
    if (p->refcount[b] == 0) {
        if (p->flags[b] & F_PINNED) {
            list_unlink(p, &p->phead, &p->ptail, b);
            p->flags[b] &= (uint8_t)~F_PINNED;
            p->n_pinned--;
        } else {
            list_unlink(p, &p->head, &p->tail, b);
            p->n_free_list--;
            p->n_cached--;
        }
    }
    p->refcount[b]++;
}

/* Records "copy block s to the fresh block d" (capacity reserved by the caller). */
static void copy_record(kv_pool *p, int32_t s, int32_t d) {
    int32_t o = p->pdst[s] >= 0 ? p->csrc[p->pdst[s]] : s; /* whose content s will hold */
    int e = p->n_copies++;
    p->csrc[e] = o;
    p->cdst[e] = d;
    p->pdst[d] = e;
    p->pin[o]++;
}

static uint64_t block_hash(const kv_pool *p, const int32_t *tokens, uint64_t parent) {
    return XXH3_64bits_withSeed(tokens, (size_t)p->block_size * sizeof(int32_t), parent);
}

/* ---- pool ---- */

int kv_pool_create(int n_blocks, int block_size, kv_pool **out) {
    LLC_ASSERT(out);
    *out = NULL;
    if (n_blocks < 1 || block_size < 1 || (int64_t)n_blocks * block_size > INT32_MAX)
        return LLC_ERR_RANGE;
    kv_pool *p = calloc(1, sizeof *p);
    if (!p) return LLC_ERR_NOMEM;
    p->n_blocks = n_blocks;
    p->block_size = block_size;
    uint32_t tcap = 16;
    while (tcap < 2u * (uint32_t)n_blocks) tcap *= 2;
    p->tmask = tcap - 1;
    size_t nb = (size_t)n_blocks;
    p->refcount = calloc(nb, sizeof *p->refcount);
    p->flags = calloc(nb, sizeof *p->flags);
    p->hash = calloc(nb, sizeof *p->hash);
    p->parent = calloc(nb, sizeof *p->parent);
    p->tokens = calloc(nb * (size_t)block_size, sizeof *p->tokens);
    p->prev = malloc(nb * sizeof *p->prev);
    p->next = malloc(nb * sizeof *p->next);
    p->tkey = calloc(tcap, sizeof *p->tkey);
    p->tval = malloc(tcap * sizeof *p->tval);
    p->pdst = malloc(nb * sizeof *p->pdst);
    p->pin = calloc(nb, sizeof *p->pin);
    if (!p->refcount || !p->flags || !p->hash || !p->parent || !p->tokens || !p->prev ||
        !p->next || !p->tkey || !p->tval || !p->pdst || !p->pin) {
        kv_pool_free(p);
        return LLC_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < tcap; i++) p->tval[i] = -1;
    /* All blocks free, in id order. */
    for (int i = 0; i < n_blocks; i++) {
        p->prev[i] = i - 1;
        p->next[i] = i + 1 < n_blocks ? i + 1 : -1;
        p->pdst[i] = -1;
    }
    p->head = 0;
    p->tail = n_blocks - 1;
    p->phead = p->ptail = -1;
    p->n_free_list = n_blocks;
    *out = p;
    return 0;
}

void kv_pool_free(kv_pool *p) {
    if (!p) return;
    for (kv_seq *s = p->seqs; s; s = s->next) {
        s->pool = NULL;
        s->n_blocks = s->len = s->computed = 0;
    }
    free(p->refcount);
    free(p->flags);
    free(p->hash);
    free(p->parent);
    free(p->tokens);
    free(p->prev);
    free(p->next);
    free(p->tkey);
    free(p->tval);
    free(p->csrc);
    free(p->cdst);
    free(p->pdst);
    free(p->pin);
    free(p);
}

int kv_pool_block_size(const kv_pool *p) { return p->block_size; }
int kv_pool_n_blocks(const kv_pool *p) { return p->n_blocks; }
int kv_pool_available(const kv_pool *p) { return p->n_free_list; }

void kv_pool_stats(const kv_pool *p, kv_stats *out) {
    out->n_blocks = p->n_blocks;
    out->used = p->n_blocks - p->n_free_list - p->n_pinned;
    out->cached = p->n_cached;
    out->free = p->n_free_list - p->n_cached;
    out->pinned = p->n_pinned;
    out->n_seqs = p->n_seqs;
    out->lookups_tokens = p->lookups_tokens;
    out->hit_tokens = p->hit_tokens;
}

int kv_pool_take_copies(kv_pool *p, const int32_t **src, const int32_t **dst) {
    int n = 0;
    for (int e = 0; e < p->n_copies; e++) {
        int32_t s = p->csrc[e], d = p->cdst[e];
        if (s < 0) continue; /* cancelled */
        p->pin[s]--;
        p->pdst[d] = -1;
        if (p->refcount[d] == 0 && p->flags[d] == 0) continue; /* owner gone, unread */
        p->csrc[n] = s;
        p->cdst[n] = d;
        n++;
    }
    p->n_copies = 0;
    /* Nothing reads the pinned blocks any more. */
    while (p->phead >= 0) {
        int32_t b = p->phead;
        list_unlink(p, &p->phead, &p->ptail, b);
        p->flags[b] &= (uint8_t)~F_PINNED;
        p->n_pinned--;
        to_free_list(p, b);
    }
    if (src) *src = p->csrc;
    if (dst) *dst = p->cdst;
    return n;
}

int kv_pool_validate(const kv_pool *p, llc_err *err) {
    const int nb = p->n_blocks, bs = p->block_size;
    int rc = 0;
    int32_t *refs = calloc((size_t)nb, sizeof *refs);
    if (!refs) return llc_fail(err, LLC_ERR_NOMEM, "kv validate: out of memory");

#define BAD(...)                                         \
    do {                                                 \
        rc = llc_fail(err, LLC_ERR_FORMAT, __VA_ARGS__); \
        goto done;                                       \
    } while (0)

    /* Sequences: shapes, references, the hash chain of committed full blocks. */
    int n_seqs = 0;
    for (const kv_seq *s = p->seqs; s; s = s->next) {
        if (++n_seqs > p->n_seqs) BAD("kv: sequence list longer than n_seqs %d", p->n_seqs);
        if (s->pool != p) BAD("kv: sequence %d belongs to another pool", n_seqs - 1);
        if (s->len < 0 || s->computed < 0 || s->computed > s->len)
            BAD("kv: sequence %d has len %d computed %d", n_seqs - 1, s->len, s->computed);
        if (s->n_blocks != (int)(((int64_t)s->len + bs - 1) / bs) || s->n_blocks > s->cap)
            BAD("kv: sequence %d has %d blocks for len %d", n_seqs - 1, s->n_blocks, s->len);
        for (int i = 0; i < s->n_blocks; i++) {
            int32_t b = s->blocks[i];
            if (b < 0 || b >= nb) BAD("kv: sequence %d block %d is id %d", n_seqs - 1, i, b);
            refs[b]++;
            if (i < s->computed / bs) {
                uint64_t want = i ? p->hash[s->blocks[i - 1]] : ROOT_SEED;
                if (!(p->flags[b] & F_HASHED))
                    BAD("kv: sequence %d committed full block %d (id %d) is not hashed",
                        n_seqs - 1, i, b);
                if (p->parent[b] != want)
                    BAD("kv: sequence %d block %d (id %d) has a broken hash chain", n_seqs - 1,
                        i, b);
            }
        }
    }
    if (n_seqs != p->n_seqs) BAD("kv: %d sequences listed, n_seqs %d", n_seqs, p->n_seqs);

    int n_zero = 0, n_listed = 0;
    for (int b = 0; b < nb; b++) {
        if (refs[b] != p->refcount[b])
            BAD("kv: block %d has refcount %d but %d references", b, p->refcount[b], refs[b]);
        if (p->refcount[b] == 0) n_zero++;
        uint8_t f = p->flags[b];
        if (f & ~(F_HASHED | F_LISTED | F_PINNED)) BAD("kv: block %d has flags 0x%x", b, f);
        if ((f & F_PINNED) && p->refcount[b] != 0) BAD("kv: block %d pinned and referenced", b);
        if ((f & F_LISTED) && !(f & F_HASHED)) BAD("kv: block %d listed without a hash", b);
        if (f & F_LISTED) {
            n_listed++;
            if (table_find(p, p->hash[b]) != b) BAD("kv: block %d is not found under its hash", b);
        }
        if ((f & F_HASHED) &&
            block_hash(p, p->tokens + (size_t)b * bs, p->parent[b]) != p->hash[b])
            BAD("kv: hashed block %d was written (hash no longer matches its tokens)", b);
    }

    /* Free list: unpinned refcount-0 blocks, plain free ones before cached. */
    int count = 0, n_cached = 0;
    int32_t prev = -1;
    for (int32_t b = p->head; b >= 0; b = p->next[b]) {
        if (b >= nb) BAD("kv: free list holds id %d", b);
        if (++count > nb) BAD("kv: free list has a cycle");
        if (p->prev[b] != prev) BAD("kv: free list back link of block %d is wrong", b);
        if (p->refcount[b] != 0) BAD("kv: block %d is free and referenced", b);
        if (p->pin[b] != 0) BAD("kv: free block %d is read by a pending copy", b);
        if (p->flags[b] == (F_HASHED | F_LISTED)) n_cached++;
        else if (p->flags[b] != 0) BAD("kv: free block %d is hashed but not listed", b);
        else if (n_cached) BAD("kv: plain free block %d after a cached block", b);
        prev = b;
    }
    if (p->tail != prev) BAD("kv: free list tail is %d, last block %d", p->tail, prev);
    if (count != p->n_free_list)
        BAD("kv: free list has %d blocks, counter %d", count, p->n_free_list);
    if (n_cached != p->n_cached) BAD("kv: %d cached blocks, counter %d", n_cached, p->n_cached);
    /* Pinned list: the other refcount-0 blocks. */
    int pcount = 0;
    prev = -1;
    for (int32_t b = p->phead; b >= 0; b = p->next[b]) {
        if (b >= nb) BAD("kv: pinned list holds id %d", b);
        if (++pcount > nb) BAD("kv: pinned list has a cycle");
        if (p->prev[b] != prev) BAD("kv: pinned list back link of block %d is wrong", b);
        if (p->refcount[b] != 0 || !(p->flags[b] & F_PINNED))
            BAD("kv: pinned list holds block %d (refcount %d, flags 0x%x)", b, p->refcount[b],
                p->flags[b]);
        prev = b;
    }
    if (p->ptail != prev) BAD("kv: pinned list tail is %d, last block %d", p->ptail, prev);
    if (pcount != p->n_pinned) BAD("kv: %d pinned blocks, counter %d", pcount, p->n_pinned);
    if (count + pcount != n_zero)
        BAD("kv: %d free + %d pinned blocks but %d unreferenced", count, pcount, n_zero);

    /* Table: every entry names a listed block under that block's hash. */
    int entries = 0;
    for (uint32_t i = 0; i <= p->tmask; i++) {
        int32_t b = p->tval[i];
        if (b < 0) continue;
        entries++;
        if (b >= nb) BAD("kv: table entry names id %d", b);
        if (!(p->flags[b] & F_LISTED) || p->hash[b] != p->tkey[i])
            BAD("kv: table entry for block %d does not match the block", b);
    }
    if (entries != p->tcount || entries != n_listed)
        BAD("kv: table has %d entries, counter %d, %d listed blocks", entries, p->tcount,
            n_listed);

    /* Pending copies: pin and pdst agree with the live ones; destinations are
     * distinct and never read. refs is reused to count readers. */
    memset(refs, 0, (size_t)nb * sizeof *refs);
    int n_pdst = 0;
    for (int b = 0; b < nb; b++) n_pdst += p->pdst[b] >= 0;
    for (int i = 0; i < p->n_copies; i++) {
        int32_t s = p->csrc[i], d = p->cdst[i];
        if (s < -1 || s >= nb || d < 0 || d >= nb || s == d)
            BAD("kv: pending copy %d is %d -> %d", i, s, d);
        if (s < 0) continue;
        refs[s]++;
        if (p->pdst[d] != i) BAD("kv: pending copy %d into block %d is not indexed", i, d);
        n_pdst--;
    }
    if (n_pdst) BAD("kv: %d blocks indexed as copy destinations without a copy", n_pdst);
    for (int b = 0; b < nb; b++) {
        if (refs[b] != p->pin[b])
            BAD("kv: block %d is read by %d pending copies, pin %d", b, refs[b], p->pin[b]);
        if (p->pin[b] && p->pdst[b] >= 0) BAD("kv: block %d is both read and written", b);
    }
#undef BAD
done:
    free(refs);
    return rc;
}

/* ---- sequences ---- */

static int seq_reserve(kv_seq *s, int n) {
    if (n <= s->cap) return 0;
    int cap = s->cap ? s->cap : 4;
    while (cap < n) cap = cap > INT_MAX / 2 ? n : cap * 2;
    int32_t *nb = realloc(s->blocks, (size_t)cap * sizeof *nb);
    if (!nb) return LLC_ERR_NOMEM;
    s->blocks = nb;
    s->cap = cap;
    return 0;
}

static int seq_new(kv_pool *p, kv_seq **out) {
    kv_seq *s = calloc(1, sizeof *s);
    if (!s) return LLC_ERR_NOMEM;
    s->pool = p;
    s->next = p->seqs;
    if (p->seqs) p->seqs->prev = s;
    p->seqs = s;
    p->n_seqs++;
    *out = s;
    return 0;
}

int kv_seq_create(kv_pool *p, kv_seq **out) {
    LLC_ASSERT(p && out);
    *out = NULL;
    return seq_new(p, out);
}

void kv_seq_free(kv_seq *s) {
    if (!s) return;
    kv_pool *p = s->pool;
    if (p) {
        for (int i = s->n_blocks - 1; i >= 0; i--) block_release(p, s->blocks[i]);
        if (s->prev) s->prev->next = s->next;
        else p->seqs = s->next;
        if (s->next) s->next->prev = s->prev;
        p->n_seqs--;
    }
    free(s->blocks);
    free(s);
}

void kv_seq_free_uncached(kv_seq *s) {
    if (!s) return;
    kv_pool *p = s->pool;
    for (int i = s->n_blocks - 1; p && i >= 0; i--) {
        int32_t b = s->blocks[i];
        if (p->refcount[b] != 1 || p->pin[b] > 0) continue; /* others keep it, or a copy reads it */
        if (p->flags[b] & F_LISTED) table_remove(p, p->hash[b]);
        p->flags[b] = 0; /* released below as a plain free block */
    }
    kv_seq_free(s);
}

int kv_seq_len(const kv_seq *s) { return s->len; }
int kv_seq_computed(const kv_seq *s) { return s->computed; }

const int32_t *kv_seq_blocks(const kv_seq *s, int *n_blocks) {
    if (n_blocks) *n_blocks = s->n_blocks;
    return s->blocks;
}

int kv_seq_match_prefix(kv_seq *s, const int32_t *tokens, int n) {
    LLC_ASSERT(s);
    kv_pool *p = s->pool;
    if (!p || s->len != 0 || n < 0 || (n > 0 && !tokens)) return LLC_ERR_RANGE;
    const int bs = p->block_size;
    int max = n > 0 ? (n - 1) / bs : 0;
    if (max > p->n_blocks) max = p->n_blocks;
    p->lookups_tokens += n;
    if (max == 0) return 0;
    if (seq_reserve(s, max)) return LLC_ERR_NOMEM;
    uint64_t parent = ROOT_SEED;
    int k = 0;
    for (; k < max; k++) {
        const int32_t *t = tokens + (size_t)k * bs;
        uint64_t h = block_hash(p, t, parent);
        int32_t b = table_find(p, h);
        if (b < 0 || p->parent[b] != parent ||
            memcmp(p->tokens + (size_t)b * bs, t, (size_t)bs * sizeof *t) != 0)
            break;
        block_acquire(p, b);
        s->blocks[k] = b;
        parent = h;
    }
    s->n_blocks = k;
    s->len = s->computed = k * bs;
    p->hit_tokens += s->len;
    return s->len;
}

/* How an append of n treats the partial last block. */
enum { COW_NONE, COW_COPY, COW_STRIP };

/* Plans an append: *n_new fresh blocks for the tail, *cow for the last block, and
 * returns the number of blocks taken from the available ones. A block only this
 * sequence holds is copied (so its cached prefix survives) only when a block is
 * left for it; it comes back as cached once the copy is taken. */
static int64_t plan_append(const kv_seq *s, int n, int64_t *n_new, int *cow) {
    const kv_pool *p = s->pool;
    const int bs = p->block_size;
    *n_new = ((int64_t)s->len + n + bs - 1) / bs - s->n_blocks;
    *cow = COW_NONE;
    if (n == 0 || s->len % bs == 0) return *n_new;
    int32_t b = s->blocks[s->n_blocks - 1];
    if (p->refcount[b] > 1) {
        *cow = COW_COPY;
        return *n_new + 1;
    }
    if (!(p->flags[b] & F_HASHED)) return *n_new;
    if ((p->flags[b] & F_LISTED) && *n_new + 1 <= p->n_free_list) {
        *cow = COW_COPY;
        return *n_new + 1;
    }
    *cow = COW_STRIP;
    return *n_new;
}

int kv_seq_blocks_needed(const kv_seq *s, int n) {
    LLC_ASSERT(s);
    if (!s->pool || n < 0 || n > INT_MAX - s->len) return LLC_ERR_RANGE;
    int64_t n_new;
    int cow;
    int64_t need = plan_append(s, n, &n_new, &cow);
    return need > INT_MAX ? INT_MAX : (int)need;
}

int kv_seq_append(kv_seq *s, const int32_t *tokens, int n) {
    LLC_ASSERT(s);
    kv_pool *p = s->pool;
    if (!p || n < 0 || (n > 0 && !tokens) || n > INT_MAX - s->len) return LLC_ERR_RANGE;
    if (n == 0) return 0;
    const int bs = p->block_size;
    int64_t n_new;
    int cow;
    if (plan_append(s, n, &n_new, &cow) > p->n_free_list) return KV_NO_SPACE;
    /* Grow the arrays before changing anything. */
    if (seq_reserve(s, s->n_blocks + (int)n_new)) return LLC_ERR_NOMEM;
    if (cow == COW_COPY && p->n_copies == p->cap_copies) {
        int cap = p->cap_copies ? p->cap_copies * 2 : 16;
        int32_t *a = realloc(p->csrc, (size_t)cap * sizeof *a);
        if (!a) return LLC_ERR_NOMEM;
        p->csrc = a;
        a = realloc(p->cdst, (size_t)cap * sizeof *a);
        if (!a) return LLC_ERR_NOMEM;
        p->cdst = a;
        p->cap_copies = cap;
    }
    int32_t old = -1;
    if (cow == COW_COPY) {
        old = s->blocks[s->n_blocks - 1];
        int32_t d = block_alloc(p);
        memcpy(p->tokens + (size_t)d * bs, p->tokens + (size_t)old * bs,
               (size_t)bs * sizeof *p->tokens);
        copy_record(p, old, d);
        s->blocks[s->n_blocks - 1] = d;
    } else if (cow == COW_STRIP) {
        int32_t b = s->blocks[s->n_blocks - 1];
        if (p->flags[b] & F_LISTED) table_remove(p, p->hash[b]);
        p->flags[b] = 0;
    }
    for (int64_t i = 0; i < n_new; i++) s->blocks[s->n_blocks++] = block_alloc(p);
    for (int i = 0; i < n; i++) {
        int pos = s->len + i;
        p->tokens[(size_t)s->blocks[pos / bs] * bs + pos % bs] = tokens[i];
    }
    s->len += n;
    if (old >= 0) block_release(p, old); /* pinned if this was its last reference */
    return 0;
}

int kv_seq_commit(kv_seq *s, int n) {
    LLC_ASSERT(s);
    kv_pool *p = s->pool;
    if (!p || n < 0 || n > s->len - s->computed) return LLC_ERR_RANGE;
    const int bs = p->block_size;
    int end = s->computed + n;
    for (int i = s->computed / bs; (int64_t)(i + 1) * bs <= end; i++) {
        int32_t b = s->blocks[i];
        if (p->flags[b] & F_HASHED) continue; /* a sharer committed it already */
        uint64_t parent = ROOT_SEED;
        if (i > 0) {
            LLC_ASSERT(p->flags[s->blocks[i - 1]] & F_HASHED);
            parent = p->hash[s->blocks[i - 1]];
        }
        uint64_t h = block_hash(p, p->tokens + (size_t)b * bs, parent);
        p->hash[b] = h;
        p->parent[b] = parent;
        p->flags[b] = F_HASHED;
        if (table_find(p, h) < 0) {
            table_insert(p, h, b);
            p->flags[b] |= F_LISTED;
        }
    }
    s->computed = end;
    return 0;
}

int kv_seq_fork(const kv_seq *src, kv_seq **out) {
    LLC_ASSERT(src && out);
    *out = NULL;
    kv_pool *p = src->pool;
    if (!p) return LLC_ERR_RANGE;
    kv_seq *s;
    int rc = seq_new(p, &s);
    if (rc) return rc;
    if (seq_reserve(s, src->n_blocks)) {
        kv_seq_free(s);
        return LLC_ERR_NOMEM;
    }
    for (int i = 0; i < src->n_blocks; i++) {
        s->blocks[i] = src->blocks[i];
        p->refcount[src->blocks[i]]++;
    }
    s->n_blocks = src->n_blocks;
    s->len = src->len;
    s->computed = src->computed;
    *out = s;
    return 0;
}

int kv_seq_truncate(kv_seq *s, int n) {
    LLC_ASSERT(s);
    kv_pool *p = s->pool;
    if (!p || n < 0 || n > s->len) return LLC_ERR_RANGE;
    const int bs = p->block_size;
    int keep = (int)(((int64_t)n + bs - 1) / bs);
    while (s->n_blocks > keep) block_release(p, s->blocks[--s->n_blocks]);
    s->len = n;
    if (s->computed > n) s->computed = n;
    return 0;
}
