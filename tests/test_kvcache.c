/* test_kvcache.c — the KV block manager: prefix sharing and the n-1 rule, cached
 * blocks across turns and LRU eviction order, fork + copy-on-write, truncation
 * back into hashed blocks, all-or-nothing KV_NO_SPACE, bad arguments, detached
 * sequences, and a randomized run against a shadow model: a simulated device
 * (token id per slot) that receives the reported copies and every computed token
 * through the block tables, so any sharing or copy-on-write mistake shows up as a
 * sequence reading someone else's tokens. Its operations: new requests with
 * prefix lookups, forks, appends, steps (copies, compute, commit), truncation,
 * frees, and preemption with re-admission through the prefix cache.
 * kv_pool_validate runs after every operation, and an outside check that the
 * blocks in use are exactly those the block tables reference. */
#include "engine/sched/kvcache.h"
#include "tests/test.h"

#include <limits.h>
#include <stdint.h>

static void valid(const kv_pool *p) {
    llc_err err = {{0}};
    int rc = kv_pool_validate(p, &err);
    CHECKF(rc == 0, "validate: %d %s", rc, err.msg);
}

static kv_pool *mk_pool(int n_blocks, int bs) {
    kv_pool *p = NULL;
    int rc = kv_pool_create(n_blocks, bs, &p);
    CHECKF(rc == 0 && p, "kv_pool_create(%d, %d): %d", n_blocks, bs, rc);
    return p;
}

static kv_seq *mk_seq(kv_pool *p) {
    kv_seq *s = NULL;
    int rc = kv_seq_create(p, &s);
    CHECKF(rc == 0 && s, "kv_seq_create: %d", rc);
    return s;
}

static int32_t blk(const kv_seq *s, int i) {
    int n;
    const int32_t *b = kv_seq_blocks(s, &n);
    return i < n ? b[i] : -1;
}

static int nblk(const kv_seq *s) {
    int n;
    kv_seq_blocks(s, &n);
    return n;
}

static bool stats_eq(const kv_stats *a, const kv_stats *b) {
    return a->n_blocks == b->n_blocks && a->used == b->used && a->cached == b->cached &&
           a->free == b->free && a->pinned == b->pinned && a->n_seqs == b->n_seqs &&
           a->lookups_tokens == b->lookups_tokens && a->hit_tokens == b->hit_tokens;
}

/* A fresh sequence that looks up `t` and appends (and commits) the rest. */
static kv_seq *prompt_seq(kv_pool *p, const int32_t *t, int n, int *reused) {
    kv_seq *s = mk_seq(p);
    int r = kv_seq_match_prefix(s, t, n);
    CHECKF(r >= 0, "match_prefix: %d", r);
    if (r < 0) r = 0;
    CHECK(kv_seq_append(s, t + r, n - r) == 0);
    CHECK(kv_seq_commit(s, n - r) == 0);
    if (reused) *reused = r;
    return s;
}

static void test_create_args(void) {
    kv_pool *p = (kv_pool *)1;
    CHECK(kv_pool_create(0, 16, &p) == LLC_ERR_RANGE && !p);
    CHECK(kv_pool_create(16, 0, &p) == LLC_ERR_RANGE);
    CHECK(kv_pool_create(-3, 16, &p) == LLC_ERR_RANGE);
    CHECK(kv_pool_create(INT_MAX, 2, &p) == LLC_ERR_RANGE);
    kv_pool_free(NULL);
    kv_seq_free(NULL);
    p = mk_pool(10, 16);
    if (!p) return;
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.n_blocks == 10 && st.used == 0 && st.cached == 0 && st.free == 10 && st.n_seqs == 0);
    CHECK(kv_pool_block_size(p) == 16 && kv_pool_n_blocks(p) == 10 && kv_pool_available(p) == 10);
    const int32_t *src, *dst;
    CHECK(kv_pool_take_copies(p, &src, &dst) == 0);
    valid(p);
    kv_pool_free(p);
}

/* Same 40-token prompt, prompts differing in token 20, the n-1 rule, uncommitted
 * blocks never matched, lookup statistics. */
static void test_prefix_sharing(void) {
    kv_pool *p = mk_pool(64, 16);
    if (!p) return;
    int32_t pa[40], pe[40];
    for (int i = 0; i < 40; i++) pa[i] = 100 + i, pe[i] = 500 + i;
    int r;
    kv_seq *a = prompt_seq(p, pa, 40, &r);
    CHECK(r == 0 && kv_seq_len(a) == 40 && kv_seq_computed(a) == 40 && nblk(a) == 3);

    kv_seq *b = mk_seq(p);
    CHECK(kv_seq_match_prefix(b, pa, 40) == 32);
    CHECK(kv_seq_len(b) == 32 && kv_seq_computed(b) == 32 && nblk(b) == 2);
    CHECK(blk(b, 0) == blk(a, 0) && blk(b, 1) == blk(a, 1));
    CHECK(kv_seq_append(b, pa + 32, 8) == 0 && kv_seq_commit(b, 8) == 0);
    CHECK(nblk(b) == 3 && blk(b, 2) != blk(a, 2));
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.used == 4 && st.free == 60 && st.cached == 0);
    valid(p);

    int32_t pc[40];
    memcpy(pc, pa, sizeof pa);
    pc[20] = 999;
    kv_seq *c = mk_seq(p);
    CHECK(kv_seq_match_prefix(c, pc, 40) == 16 && blk(c, 0) == blk(a, 0));
    kv_seq *d = mk_seq(p);
    CHECK(kv_seq_match_prefix(d, pa, 32) == 16); /* n-1 rule: the last block is recomputed */
    kv_seq *d2 = mk_seq(p);
    CHECK(kv_seq_match_prefix(d2, pa, 33) == 32);
    kv_seq *d3 = mk_seq(p);
    CHECK(kv_seq_match_prefix(d3, pa, 1) == 0 && nblk(d3) == 0);
    CHECK(kv_seq_match_prefix(d3, pa, 0) == 0);
    valid(p);

    /* Uncommitted blocks are not found; they are as soon as they are committed. */
    kv_seq *e = mk_seq(p);
    CHECK(kv_seq_match_prefix(e, pe, 40) == 0);
    CHECK(kv_seq_append(e, pe, 40) == 0);
    kv_seq *f = mk_seq(p);
    CHECK(kv_seq_match_prefix(f, pe, 40) == 0);
    CHECK(kv_seq_commit(e, 20) == 0);
    kv_seq *g = mk_seq(p);
    CHECK(kv_seq_match_prefix(g, pe, 40) == 16 && blk(g, 0) == blk(e, 0));
    CHECK(kv_seq_commit(e, 20) == 0);
    kv_seq *h = mk_seq(p);
    CHECK(kv_seq_match_prefix(h, pe, 40) == 32 && blk(h, 1) == blk(e, 1));
    valid(p);

    kv_pool_stats(p, &st);
    /* lookups: b 40, c 40, d 32, d2 33, d3 1 + 0, e 40, f 40, g 40, h 40 (a: 40) */
    CHECK(st.lookups_tokens == 40 + 40 + 40 + 32 + 33 + 1 + 0 + 40 + 40 + 40 + 40);
    CHECK(st.hit_tokens == 32 + 16 + 16 + 32 + 16 + 32);
    CHECK(st.n_seqs == 10);
    kv_seq *all[] = {a, b, c, d, d2, d3, e, f, g, h};
    for (size_t i = 0; i < LLC_ARRAY_LEN(all); i++) kv_seq_free(all[i]);
    kv_pool_stats(p, &st);
    CHECK(st.n_seqs == 0 && st.used == 0 && st.cached + st.free == 64);
    CHECK(st.cached == 4); /* the full committed blocks: a's (shared by b) and e's */
    valid(p);
    kv_pool_free(p);
}

/* The next turn of a conversation finds the previous turn's blocks after the
 * sequence was freed; eviction takes plain free blocks first, then the least
 * recently freed cached block; a hit pulls a block out of the LRU. */
static void test_turn_and_lru(void) {
    kv_pool *p = mk_pool(64, 16);
    if (!p) return;
    int32_t t[60];
    for (int i = 0; i < 60; i++) t[i] = 7 * i + 3;
    kv_seq *a = prompt_seq(p, t, 40, NULL);
    for (int i = 40; i < 48; i++) /* generated tokens, one step each */
        CHECK(kv_seq_append(a, t + i, 1) == 0 && kv_seq_commit(a, 1) == 0);
    kv_seq_free(a);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.used == 0 && st.cached == 3 && st.free == 61);
    int r;
    kv_seq *b = prompt_seq(p, t, 58, &r);
    CHECK(r == 48 && nblk(b) == 4);
    kv_pool_stats(p, &st);
    CHECK(st.used == 4 && st.cached == 0 && st.free == 60);
    valid(p);
    kv_seq_free(b);
    kv_pool_free(p);

    /* LRU order: 8 blocks of 4. */
    p = mk_pool(8, 4);
    if (!p) return;
    int32_t x[3][5];
    int32_t xb[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 5; i++) x[k][i] = 10 * (k + 1) + i;
        kv_seq *s = prompt_seq(p, x[k], 4, NULL);
        xb[k] = blk(s, 0);
        kv_seq_free(s); /* freed in order 0, 1, 2 */
    }
    kv_pool_stats(p, &st);
    CHECK(st.cached == 3 && st.free == 5);
    kv_seq *y = mk_seq(p);
    CHECK(kv_seq_match_prefix(y, x[0], 5) == 4 && blk(y, 0) == xb[0]); /* out of the LRU */
    kv_pool_stats(p, &st);
    CHECK(st.cached == 2 && st.used == 1 && st.free == 5);
    int32_t z_tok[28];
    for (int i = 0; i < 28; i++) z_tok[i] = 1000 + i;
    kv_seq *z = mk_seq(p);
    CHECK(kv_seq_append(z, z_tok, 20) == 0); /* 5 plain free blocks, nothing evicted */
    for (int i = 0; i < 5; i++) CHECK(blk(z, i) != xb[1] && blk(z, i) != xb[2]);
    kv_pool_stats(p, &st);
    CHECK(st.cached == 2 && st.free == 0);
    CHECK(kv_seq_append(z, z_tok + 20, 4) == 0); /* evicts the least recently freed: x1 */
    CHECK(blk(z, 5) == xb[1]);
    kv_pool_stats(p, &st);
    CHECK(st.cached == 1);
    kv_seq *w = mk_seq(p);
    CHECK(kv_seq_match_prefix(w, x[1], 5) == 0);
    kv_seq *w2 = mk_seq(p);
    CHECK(kv_seq_match_prefix(w2, x[2], 5) == 4 && blk(w2, 0) == xb[2]);
    CHECK(kv_pool_available(p) == 0);
    CHECK(kv_seq_append(z, z_tok + 24, 4) == KV_NO_SPACE);
    valid(p);
    kv_seq_free(w);
    kv_seq_free(w2);
    kv_seq_free(y);
    kv_seq_free(z);
    valid(p);
    kv_pool_free(p);
}

/* A freed sequence releases its last block first, so the deeper blocks of a
 * prefix are evicted before the blocks they extend. A block computed twice
 * (the n-1 rule recomputes a cached last block) is not listed while its twin is,
 * but takes over the prefix when it is freed after its twin was evicted. */
static void test_eviction_order(void) {
    kv_pool *p = mk_pool(4, 4);
    if (!p) return;
    int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, z[12] = {0};
    kv_seq *a = prompt_seq(p, t, 8, NULL);
    int32_t a0 = blk(a, 0), a1 = blk(a, 1);
    kv_seq_free(a);
    kv_seq *s = mk_seq(p);
    CHECK(kv_seq_append(s, z, 12) == 0); /* 2 plain free blocks, then evicts one */
    CHECK(blk(s, 2) == a1);
    kv_seq_free(s);
    s = mk_seq(p);
    CHECK(kv_seq_match_prefix(s, t, 9) == 4 && blk(s, 0) == a0);
    kv_seq_free(s);
    valid(p);
    kv_pool_free(p);

    p = mk_pool(3, 4);
    if (!p) return;
    a = prompt_seq(p, t, 8, NULL);
    a0 = blk(a, 0), a1 = blk(a, 1);
    kv_seq_free(a);
    int r;
    kv_seq *b = prompt_seq(p, t, 8, &r); /* reuses a0, computes a twin of a1 */
    int32_t b1 = blk(b, 1);
    CHECK(r == 4 && blk(b, 0) == a0 && b1 != a1);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.cached == 1 && st.used == 2);
    s = mk_seq(p);
    CHECK(kv_seq_append(s, z, 4) == 0 && blk(s, 0) == a1); /* evicts a1 */
    kv_seq_free(b);
    kv_pool_stats(p, &st);
    CHECK(st.cached == 2 && st.used == 1);
    kv_seq *d = mk_seq(p);
    CHECK(kv_seq_match_prefix(d, t, 9) == 8 && blk(d, 0) == a0 && blk(d, 1) == b1);
    valid(p);
    kv_seq_free(s);
    kv_seq_free(d);
    valid(p);
    kv_pool_free(p);
}

static void test_fork_cow(void) {
    kv_pool *p = mk_pool(16, 4);
    if (!p) return;
    int32_t t[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    const int32_t *src, *dst;
    kv_seq *a = prompt_seq(p, t, 6, NULL);
    int32_t a0 = blk(a, 0), a1 = blk(a, 1);
    kv_seq *b = NULL;
    CHECK(kv_seq_fork(a, &b) == 0 && b);
    if (!b) return;
    CHECK(kv_seq_len(b) == 6 && kv_seq_computed(b) == 6 && nblk(b) == 2);
    CHECK(blk(b, 0) == a0 && blk(b, 1) == a1);
    CHECK(kv_pool_take_copies(p, &src, &dst) == 0);
    CHECK(kv_seq_blocks_needed(b, 1) == 1); /* the copy */
    int32_t x = 77, y = 88;
    CHECK(kv_seq_append(b, &x, 1) == 0);
    CHECK(blk(b, 0) == a0 && blk(b, 1) != a1 && blk(b, 1) >= 0);
    CHECK(kv_seq_blocks_needed(a, 1) == 0); /* a is the only owner now */
    CHECK(kv_seq_append(a, &y, 1) == 0);
    CHECK(blk(a, 0) == a0 && blk(a, 1) == a1);
    int n = kv_pool_take_copies(p, &src, &dst);
    CHECK(n == 1);
    if (n == 1) CHECK(src[0] == a1 && dst[0] == blk(b, 1));
    CHECK(kv_pool_take_copies(p, &src, &dst) == 0); /* cleared */
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.used == 3);
    valid(p);

    /* Block-aligned: both sides append into fresh blocks, no copies. */
    kv_seq *c = prompt_seq(p, t, 8, NULL);
    kv_seq *d = NULL;
    CHECK(kv_seq_fork(c, &d) == 0 && d);
    if (!d) return;
    CHECK(kv_seq_append(c, &x, 1) == 0 && kv_seq_append(d, &y, 1) == 0);
    CHECK(nblk(c) == 3 && nblk(d) == 3 && blk(c, 2) != blk(d, 2));
    CHECK(blk(c, 0) == blk(d, 0) && blk(c, 1) == blk(d, 1));
    CHECK(kv_pool_take_copies(p, &src, &dst) == 0);
    valid(p);

    /* Three sharers of a partial block: two copies, the last writes in place. */
    kv_seq *e = prompt_seq(p, t, 5, NULL);
    int32_t e1 = blk(e, 1);
    kv_seq *f = NULL, *g = NULL;
    CHECK(kv_seq_fork(e, &f) == 0 && kv_seq_fork(f, &g) == 0 && f && g);
    if (!f || !g) return;
    CHECK(kv_seq_append(f, &x, 1) == 0 && kv_seq_append(e, &y, 1) == 0);
    CHECK(kv_seq_append(g, &x, 1) == 0);
    n = kv_pool_take_copies(p, &src, &dst);
    CHECK(n == 2);
    if (n == 2) CHECK(src[0] == e1 && src[1] == e1 && dst[0] == blk(f, 1) && dst[1] == blk(e, 1));
    CHECK(blk(g, 1) == e1);
    valid(p);
    kv_seq *all[] = {a, b, c, d, e, f, g};
    for (size_t i = 0; i < LLC_ARRAY_LEN(all); i++) kv_seq_free(all[i]);
    kv_pool_stats(p, &st);
    CHECK(st.used == 0);
    valid(p);
    kv_pool_free(p);
}

/* Truncating back into a full hashed block, then appending, must not change the
 * cached block: other sequences and later lookups still see the original tokens. */
static bool independent(const int32_t *src, const int32_t *dst, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if ((i != j && dst[i] == dst[j]) || dst[i] == src[j]) return false;
    return true;
}

/* The copies of a step can run at once: a copy from a block that is being copied
 * into reads the original, a destination reused cancels the copy into it, a copy
 * whose destination was freed is dropped, and a source whose last reference goes
 * stays pinned (unallocatable) until the copies are taken. */
static void test_copies_independent(void) {
    kv_pool *p = mk_pool(16, 4);
    if (!p) return;
    int32_t t[6] = {1, 2, 3, 4, 5, 6}, u[6] = {7, 8, 9, 10, 11, 12}, x = 42, z[64] = {0};
    const int32_t *src, *dst;
    kv_seq *a = prompt_seq(p, t, 6, NULL), *b = NULL, *c = NULL;
    int32_t a1 = blk(a, 1);
    CHECK(kv_seq_fork(a, &b) == 0 && kv_seq_append(b, &x, 1) == 0);
    CHECK(kv_seq_fork(b, &c) == 0 && kv_seq_append(c, &x, 1) == 0);
    valid(p);
    int n = kv_pool_take_copies(p, &src, &dst);
    CHECK(n == 2);
    if (n == 2)
        CHECK(src[0] == a1 && dst[0] == blk(b, 1) && src[1] == a1 && dst[1] == blk(c, 1));

    kv_seq *d = NULL, *e = NULL;
    CHECK(kv_seq_fork(a, &d) == 0 && kv_seq_append(d, &x, 1) == 0);
    int32_t d1 = blk(d, 1);
    kv_seq_free(d);
    CHECK(kv_seq_fork(b, &e) == 0 && kv_seq_append(e, &x, 1) == 0);
    CHECK(blk(e, 1) == d1); /* the plain free block just released */
    valid(p);
    n = kv_pool_take_copies(p, &src, &dst);
    CHECK(n == 1);
    if (n == 1) CHECK(src[0] == blk(b, 1) && dst[0] == d1);

    kv_seq *f = NULL;
    CHECK(kv_seq_fork(a, &f) == 0 && kv_seq_append(f, &x, 1) == 0);
    kv_seq_free(f);
    valid(p);
    CHECK(kv_pool_take_copies(p, &src, &dst) == 0);

    kv_seq *g = prompt_seq(p, u, 6, NULL), *h = NULL;
    int32_t g1 = blk(g, 1);
    CHECK(kv_seq_fork(g, &h) == 0 && kv_seq_append(h, &x, 1) == 0);
    int avail = kv_pool_available(p);
    kv_seq_free(g);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.pinned == 1 && kv_pool_available(p) == avail);
    CHECK(st.used + st.cached + st.free + st.pinned == st.n_blocks);
    valid(p);
    kv_seq *w = mk_seq(p);
    CHECK(kv_seq_append(w, z, avail * 4) == 0);
    for (int i = 0; i < nblk(w); i++) CHECK(blk(w, i) != g1);
    CHECK(kv_seq_append(w, z, 1) == KV_NO_SPACE);
    n = kv_pool_take_copies(p, &src, &dst);
    CHECK(n == 1 && independent(src, dst, n));
    if (n == 1) CHECK(src[0] == g1 && dst[0] == blk(h, 1));
    kv_pool_stats(p, &st);
    CHECK(st.pinned == 0 && kv_pool_available(p) == 1);
    valid(p);
    kv_seq *all[] = {a, b, c, e, h, w};
    for (size_t i = 0; i < LLC_ARRAY_LEN(all); i++) kv_seq_free(all[i]);
    valid(p);
    kv_pool_free(p);
}

static void test_truncate_hashed(void) {
    kv_pool *p = mk_pool(16, 4);
    if (!p) return;
    int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t u[9] = {1, 2, 3, 4, 5, 6, 90, 91, 92};
    const int32_t *src, *dst;
    kv_seq *a = prompt_seq(p, t, 8, NULL);
    int32_t a0 = blk(a, 0), a1 = blk(a, 1);
    kv_seq *b = NULL;
    CHECK(kv_seq_fork(a, &b) == 0 && b);
    if (!b) return;
    CHECK(kv_seq_truncate(b, 6) == 0 && kv_seq_len(b) == 6 && kv_seq_computed(b) == 6);
    CHECK(nblk(b) == 2 && blk(b, 1) == a1);
    CHECK(kv_seq_append(b, u + 6, 2) == 0 && kv_seq_commit(b, 2) == 0);
    int n = kv_pool_take_copies(p, &src, &dst);
    CHECK(n == 1 && blk(b, 1) != a1);
    if (n == 1) CHECK(src[0] == a1 && dst[0] == blk(b, 1));
    valid(p); /* also rehashes every hashed block from its tokens */
    kv_seq *c = mk_seq(p), *d = mk_seq(p);
    CHECK(kv_seq_match_prefix(c, t, 9) == 8 && blk(c, 0) == a0 && blk(c, 1) == a1);
    CHECK(kv_seq_match_prefix(d, u, 9) == 8 && blk(d, 0) == a0 && blk(d, 1) == blk(b, 1));
    kv_seq_free(a);
    kv_seq_free(b);
    kv_seq_free(c);
    kv_seq_free(d);
    valid(p);
    kv_pool_free(p);

    /* Only owner, room for a copy: copied, the original stays cached. */
    p = mk_pool(16, 4);
    if (!p) return;
    kv_seq *s = prompt_seq(p, t, 8, NULL);
    int32_t s1 = blk(s, 1);
    CHECK(kv_seq_truncate(s, 6) == 0);
    CHECK(kv_seq_blocks_needed(s, 2) == 1);
    int avail = kv_pool_available(p);
    CHECK(kv_seq_append(s, u + 6, 2) == 0 && kv_seq_commit(s, 2) == 0);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(kv_pool_available(p) == avail - 1 && st.pinned == 1); /* s1 is read by the copy */
    n = kv_pool_take_copies(p, &src, &dst);
    CHECK(n == 1 && blk(s, 1) != s1);
    if (n == 1) CHECK(src[0] == s1 && dst[0] == blk(s, 1));
    kv_pool_stats(p, &st);
    CHECK(kv_pool_available(p) == avail && st.pinned == 0 && st.cached == 1); /* s1 cached */
    kv_seq_free(s);
    c = mk_seq(p);
    d = mk_seq(p);
    CHECK(kv_seq_match_prefix(c, t, 9) == 8 && blk(c, 1) == s1);
    CHECK(kv_seq_match_prefix(d, u, 9) == 8 && blk(d, 1) != s1);
    kv_seq_free(c);
    kv_seq_free(d);
    valid(p);
    kv_pool_free(p);

    /* Only owner, no block left: forgets the hash and writes in place. */
    p = mk_pool(2, 4);
    if (!p) return;
    s = prompt_seq(p, t, 8, NULL);
    s1 = blk(s, 1);
    CHECK(kv_seq_truncate(s, 6) == 0 && kv_pool_available(p) == 0);
    CHECK(kv_seq_blocks_needed(s, 2) == 0);
    CHECK(kv_seq_append(s, u + 6, 2) == 0 && kv_seq_commit(s, 2) == 0);
    CHECK(kv_pool_take_copies(p, &src, &dst) == 0 && blk(s, 1) == s1);
    valid(p);
    kv_seq_free(s);
    c = mk_seq(p);
    d = mk_seq(p);
    CHECK(kv_seq_match_prefix(c, t, 9) == 4);
    CHECK(kv_seq_match_prefix(d, u, 9) == 8 && blk(d, 1) == s1);
    kv_seq_free(c);
    kv_seq_free(d);
    valid(p);
    kv_pool_free(p);
}

static void snapshot(const kv_seq *s, int32_t *blocks, int *n, int *len, int *computed) {
    const int32_t *b = kv_seq_blocks(s, n);
    if (*n) memcpy(blocks, b, (size_t)*n * sizeof *b);
    *len = kv_seq_len(s);
    *computed = kv_seq_computed(s);
}

static bool same_as(const kv_seq *s, const int32_t *blocks, int n, int len, int computed) {
    int m;
    const int32_t *b = kv_seq_blocks(s, &m);
    return m == n && (n == 0 || !memcmp(b, blocks, (size_t)n * sizeof *b)) &&
           kv_seq_len(s) == len && kv_seq_computed(s) == computed;
}

static void test_no_space_and_args(void) {
    kv_pool *p = mk_pool(4, 4);
    if (!p) return;
    int32_t t[16];
    for (int i = 0; i < 16; i++) t[i] = i + 1;
    kv_seq *a = prompt_seq(p, t, 10, NULL); /* 3 blocks, last partial */
    kv_seq *b = mk_seq(p);
    kv_stats before, after;
    kv_pool_stats(p, &before);
    CHECK(kv_seq_blocks_needed(b, 8) == 2 && kv_pool_available(p) == 1);
    CHECK(kv_seq_append(b, t, 8) == KV_NO_SPACE);
    kv_pool_stats(p, &after);
    CHECK(stats_eq(&before, &after) && kv_seq_len(b) == 0 && nblk(b) == 0);
    valid(p);

    /* Shared partial last block: the copy counts. */
    kv_seq *c = NULL;
    CHECK(kv_seq_fork(a, &c) == 0 && c);
    if (!c) return;
    int32_t blocks[8];
    int n, len, computed;
    snapshot(a, blocks, &n, &len, &computed);
    kv_pool_stats(p, &before);
    CHECK(kv_seq_blocks_needed(a, 6) == 2);
    CHECK(kv_seq_append(a, t, 6) == KV_NO_SPACE);
    kv_pool_stats(p, &after);
    CHECK(stats_eq(&before, &after) && same_as(a, blocks, n, len, computed));
    const int32_t *src, *dst;
    CHECK(kv_pool_take_copies(p, &src, &dst) == 0);
    valid(p);
    CHECK(kv_seq_blocks_needed(a, 2) == 1);
    CHECK(kv_seq_append(a, t, 2) == 0 && kv_pool_available(p) == 0);
    CHECK(kv_pool_take_copies(p, &src, &dst) == 1);
    CHECK(kv_seq_append(c, t, 2) == 0); /* c is the only owner now: in place */
    CHECK(kv_pool_take_copies(p, &src, &dst) == 0);
    valid(p);

    /* Bad arguments: an error, nothing changed. */
    snapshot(a, blocks, &n, &len, &computed);
    kv_pool_stats(p, &before);
    CHECK(kv_seq_append(a, t, -1) == LLC_ERR_RANGE);
    CHECK(kv_seq_append(a, NULL, 3) == LLC_ERR_RANGE);
    CHECK(kv_seq_append(a, t, INT_MAX) == LLC_ERR_RANGE);
    CHECK(kv_seq_append(a, t, INT_MAX - kv_seq_len(a)) == KV_NO_SPACE);
    CHECK(kv_seq_append(a, t, 0) == 0);
    CHECK(kv_seq_blocks_needed(a, -1) == LLC_ERR_RANGE);
    CHECK(kv_seq_truncate(a, -1) == LLC_ERR_RANGE);
    CHECK(kv_seq_truncate(a, len + 1) == LLC_ERR_RANGE);
    CHECK(kv_seq_commit(a, -1) == LLC_ERR_RANGE);
    CHECK(kv_seq_commit(a, len - computed + 1) == LLC_ERR_RANGE);
    CHECK(kv_seq_match_prefix(a, t, 16) == LLC_ERR_RANGE); /* not empty */
    CHECK(kv_seq_match_prefix(b, t, -5) == LLC_ERR_RANGE);
    CHECK(kv_seq_match_prefix(b, NULL, 5) == LLC_ERR_RANGE);
    kv_pool_stats(p, &after);
    CHECK(stats_eq(&before, &after) && same_as(a, blocks, n, len, computed));
    CHECK(kv_seq_len(b) == 0);
    valid(p);

    /* Truncate to 0 and back; truncate to the same length is a no-op. */
    CHECK(kv_seq_truncate(a, len) == 0 && same_as(a, blocks, n, len, computed));
    CHECK(kv_seq_truncate(c, 0) == 0 && nblk(c) == 0 && kv_seq_computed(c) == 0);
    valid(p);
    kv_seq_free(a);
    kv_seq_free(b);
    kv_seq_free(c);
    kv_pool_stats(p, &after);
    CHECK(after.used == 0 && after.cached + after.free == 4);
    valid(p);
    kv_pool_free(p);
}

/* Freeing the pool with live sequences detaches them; they can still be freed. */
static void test_detached(void) {
    kv_pool *p = mk_pool(4, 4);
    if (!p) return;
    int32_t t[6] = {1, 2, 3, 4, 5, 6};
    kv_seq *a = prompt_seq(p, t, 6, NULL);
    kv_seq *b = NULL;
    CHECK(kv_seq_fork(a, &b) == 0);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.n_seqs == 2);
    kv_pool_free(p);
    CHECK(kv_seq_len(a) == 0 && nblk(a) == 0);
    CHECK(kv_seq_append(a, t, 1) == LLC_ERR_RANGE);
    CHECK(kv_seq_truncate(a, 0) == LLC_ERR_RANGE);
    CHECK(kv_seq_commit(a, 0) == LLC_ERR_RANGE);
    CHECK(kv_seq_match_prefix(a, t, 6) == LLC_ERR_RANGE);
    kv_seq *c = NULL;
    CHECK(kv_seq_fork(a, &c) == LLC_ERR_RANGE && !c);
    kv_seq_free(a);
    kv_seq_free(b);
}

/* ---- randomized run against a shadow model ---- */

#define R_BLOCKS 64
#define R_BS 4
#define R_MAXSEQ 12
#define R_MAXLEN 48

typedef struct shadow {
    kv_seq *s;
    int32_t tok[R_MAXLEN + 16]; /* what the sequence holds, position by position */
    int len;
} shadow;

static uint64_t g_rs;
static uint32_t rnd(uint32_t n) {
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return (uint32_t)((g_rs >> 16) % n);
}

typedef struct rstate {
    kv_pool *p;
    shadow sh[R_MAXSEQ];
    int n;
    int32_t dev[R_BLOCKS * R_BS]; /* simulated device: the token whose K/V is in each slot */
    int copies, no_space, hits, steps, preempts;
} rstate;

/* Checks the pool from outside, without kv_pool_validate: every block id in a
 * live block table is in range, and the blocks in use are exactly the distinct
 * ids the tables hold (a leak or an early free would show as a difference). */
static void r_check_refs(rstate *r) {
    bool seen[R_BLOCKS] = {0};
    int distinct = 0;
    for (int k = 0; k < r->n; k++) {
        int nb;
        const int32_t *b = kv_seq_blocks(r->sh[k].s, &nb);
        for (int i = 0; i < nb; i++) {
            CHECKF(b[i] >= 0 && b[i] < R_BLOCKS, "block id %d out of range", b[i]);
            if (b[i] < 0 || b[i] >= R_BLOCKS) return;
            if (!seen[b[i]]) seen[b[i]] = true, distinct++;
        }
    }
    kv_stats st;
    kv_pool_stats(r->p, &st);
    CHECKF(st.used == distinct, "%d blocks in use, %d referenced", st.used, distinct);
}

/* The engine's preemption: the sequence's blocks go back to the pool, and it is
 * re-admitted later through the prefix cache (its full computed blocks usually
 * survive), with the rest appended again (which may find no space: it then
 * holds what was re-admitted so far). */
static void r_append(rstate *r, shadow *x, const int32_t *t, int n);
static void r_preempt(rstate *r, shadow *x) {
    int32_t t[R_MAXLEN + 16];
    int n = x->len;
    memcpy(t, x->tok, sizeof t);
    kv_seq_free(x->s);
    x->s = mk_seq(r->p);
    x->len = 0;
    r->preempts++;
    if (n == 0) return;
    int got = kv_seq_match_prefix(x->s, t, n);
    CHECKF(got >= 0 && got % R_BS == 0 && got <= n - 1, "re-admission matched %d of %d", got, n);
    if (got < 0) got = 0;
    r->hits += got;
    x->len = got;
    r_append(r, x, t + got, n - got);
}

/* Appends through the shadow; checks blocks_needed against the outcome and that
 * KV_NO_SPACE changes nothing. */
static void r_append(rstate *r, shadow *x, const int32_t *t, int n) {
    if (x->len + n > R_MAXLEN) n = R_MAXLEN - x->len;
    if (n <= 0) return;
    kv_stats before, after;
    kv_pool_stats(r->p, &before);
    int need = kv_seq_blocks_needed(x->s, n), avail = kv_pool_available(r->p);
    int32_t blocks[R_MAXLEN];
    int nb, len, computed;
    snapshot(x->s, blocks, &nb, &len, &computed);
    int rc = kv_seq_append(x->s, t, n);
    if (rc == KV_NO_SPACE) {
        r->no_space++;
        CHECKF(need > avail, "no space with need %d avail %d", need, avail);
        kv_pool_stats(r->p, &after);
        CHECK(stats_eq(&before, &after) && same_as(x->s, blocks, nb, len, computed));
        return;
    }
    CHECKF(rc == 0 && need <= avail, "append rc %d need %d avail %d", rc, need, avail);
    CHECKF(kv_pool_available(r->p) == avail - need, "available %d -> %d, need %d", avail,
           kv_pool_available(r->p), need);
    memcpy(x->tok + x->len, t, (size_t)n * sizeof *t);
    x->len += n;
}

static void r_make_prompt(int32_t *t, int *n) {
    /* Three shared "system prompts" and a tiny vocabulary, so prompts share
     * prefixes and identical blocks get computed independently. */
    static const int32_t sys[3][14] = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
                                       {1, 2, 3, 4, 9, 9, 9, 9, 0, 1, 0, 1, 2, 2},
                                       {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5}};
    int k = (int)rnd(4), m = 0;
    if (k < 3) {
        int plen = 3 + (int)rnd(12);
        memcpy(t, sys[k], (size_t)plen * sizeof *t);
        m = plen;
    }
    int slen = 1 + (int)rnd(10);
    for (int i = 0; i < slen; i++) t[m++] = (int32_t)rnd(3);
    *n = m;
}

/* One engine step: apply the copies, compute every uncomputed token into its
 * slot, check every sequence reads back its own tokens, commit some. */
static void r_step(rstate *r) {
    const int32_t *src, *dst;
    int nc = kv_pool_take_copies(r->p, &src, &dst);
    r->copies += nc;
    r->steps++;
    CHECK(independent(src, dst, nc));
    /* Independent copies may run in any order: run them backwards. */
    for (int i = nc - 1; i >= 0; i--)
        memcpy(r->dev + (size_t)dst[i] * R_BS, r->dev + (size_t)src[i] * R_BS,
               R_BS * sizeof *r->dev);
    for (int k = 0; k < r->n; k++) {
        shadow *x = &r->sh[k];
        const int32_t *b = kv_seq_blocks(x->s, NULL);
        for (int pos = kv_seq_computed(x->s); pos < x->len; pos++)
            r->dev[b[pos / R_BS] * R_BS + pos % R_BS] = x->tok[pos];
    }
    for (int k = 0; k < r->n; k++) {
        shadow *x = &r->sh[k];
        int nb;
        const int32_t *b = kv_seq_blocks(x->s, &nb);
        CHECK(kv_seq_len(x->s) == x->len && nb == (x->len + R_BS - 1) / R_BS);
        for (int pos = 0; pos < x->len; pos++) {
            int32_t got = r->dev[b[pos / R_BS] * R_BS + pos % R_BS];
            if (got != x->tok[pos]) {
                CHECKF(got == x->tok[pos], "step %d seq %d pos %d: device has %d, want %d",
                       r->steps, k, pos, got, x->tok[pos]);
                break;
            }
        }
        int left = x->len - kv_seq_computed(x->s);
        CHECKF(left >= 0, "computed %d > len %d", kv_seq_computed(x->s), x->len);
        if (left < 0) continue;
        int c = rnd(4) ? left : (int)rnd((uint32_t)left + 1);
        CHECK(kv_seq_commit(x->s, c) == 0);
    }
}

static void r_free(rstate *r, int k) {
    kv_seq_free(r->sh[k].s);
    r->sh[k] = r->sh[--r->n];
}

static void r_run(uint64_t seed, int iters) {
    g_rs = seed;
    rstate *r = calloc(1, sizeof *r);
    r->p = mk_pool(R_BLOCKS, R_BS);
    if (!r->p) return;
    for (int i = 0; i < R_BLOCKS * R_BS; i++) r->dev[i] = -1;
    int failures_before = t_cur_failures;
    for (int it = 0; it < iters && t_cur_failures == failures_before; it++) {
        int op = (int)rnd(100);
        int32_t t[R_MAXLEN];
        int n;
        if (r->n == 0 || (op < 14 && r->n < R_MAXSEQ)) {
            /* New request: prefix lookup, then the rest of the prompt. */
            shadow *x = &r->sh[r->n];
            x->s = mk_seq(r->p);
            x->len = 0;
            r->n++;
            r_make_prompt(t, &n);
            int got = kv_seq_match_prefix(x->s, t, n);
            CHECKF(got >= 0 && got % R_BS == 0 && got <= n - 1, "match %d of %d", got, n);
            if (got < 0) got = 0;
            r->hits += got;
            memcpy(x->tok, t, (size_t)got * sizeof *t);
            x->len = got;
            r_append(r, x, t + got, n - got);
        } else if (op < 24 && r->n < R_MAXSEQ) {
            shadow *from = &r->sh[rnd((uint32_t)r->n)];
            shadow *x = &r->sh[r->n];
            CHECK(kv_seq_fork(from->s, &x->s) == 0);
            memcpy(x->tok, from->tok, sizeof x->tok);
            x->len = from->len;
            r->n++;
        } else if (op < 46) {
            shadow *x = &r->sh[rnd((uint32_t)r->n)];
            n = 1 + (int)rnd(6);
            for (int i = 0; i < n; i++) t[i] = (int32_t)rnd(3);
            r_append(r, x, t, n);
        } else if (op < 63) {
            r_step(r);
        } else if (op < 68) {
            r_preempt(r, &r->sh[rnd((uint32_t)r->n)]);
        } else if (op < 78) {
            shadow *x = &r->sh[rnd((uint32_t)r->n)];
            int to = rnd(3) ? x->len - (int)rnd(6) : (int)rnd((uint32_t)x->len + 1);
            if (to < 0) to = 0;
            int computed = kv_seq_computed(x->s);
            CHECK(kv_seq_truncate(x->s, to) == 0);
            CHECK(kv_seq_len(x->s) == to &&
                  kv_seq_computed(x->s) == (computed < to ? computed : to));
            x->len = to;
        } else if (op < 88) {
            r_free(r, (int)rnd((uint32_t)r->n));
        } else {
            /* Look up what an existing sequence has computed (plus one token). */
            shadow *from = &r->sh[rnd((uint32_t)r->n)];
            int c = kv_seq_computed(from->s);
            if (r->n < R_MAXSEQ && c < R_MAXLEN) {
                shadow *x = &r->sh[r->n];
                x->s = mk_seq(r->p);
                r->n++;
                memcpy(t, from->tok, (size_t)c * sizeof *t);
                t[c] = 1;
                int got = kv_seq_match_prefix(x->s, t, c + 1);
                CHECKF(got >= 0 && got <= c && got % R_BS == 0, "match %d of %d", got, c + 1);
                if (got < 0) got = 0;
                r->hits += got;
                memcpy(x->tok, t, (size_t)got * sizeof *t);
                x->len = got;
            }
        }
        kv_stats st;
        kv_pool_stats(r->p, &st);
        CHECK(st.used + st.cached + st.free + st.pinned == R_BLOCKS && st.n_seqs == r->n);
        r_check_refs(r);
        llc_err err = {{0}};
        int rc = kv_pool_validate(r->p, &err);
        CHECKF(rc == 0, "seed %llu op %d (kind %d): %s", (unsigned long long)seed, it, op,
               err.msg);
    }
    r_step(r);
    while (r->n) r_free(r, r->n - 1);
    kv_stats st;
    kv_pool_stats(r->p, &st);
    CHECK(st.used == 0 && st.pinned == 0 && st.n_seqs == 0 && st.cached + st.free == R_BLOCKS);
    valid(r->p);
    /* The run must have exercised the interesting paths. */
    CHECKF(r->copies > 0 && r->no_space > 0 && r->hits > 0 && st.cached > 0 && r->preempts > 0,
           "copies %d, no space %d, hit tokens %d, cached %d, preemptions %d", r->copies, r->no_space,
           r->hits, st.cached, r->preempts);
    kv_pool_free(r->p);
    free(r);
}

static void test_random(void) {
    for (uint64_t seed = 1; seed <= 8; seed++) r_run(seed * 0x9E3779B97F4A7C15ULL, 30000);
}

int main(void) {
    RUN(test_create_args);
    RUN(test_prefix_sharing);
    RUN(test_turn_and_lru);
    RUN(test_eviction_order);
    RUN(test_fork_cow);
    RUN(test_copies_independent);
    RUN(test_truncate_hashed);
    RUN(test_no_space_and_args);
    RUN(test_detached);
    RUN(test_random);
    return t_summary();
}
